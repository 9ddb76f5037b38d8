package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// reorder makes flags position-independent (DESIGN §13). urfave/cli v2 stops
// parsing flags at the first positional argument and accepts global flags
// only before the command, so an ignored "verify NAME --deep" would fail
// open. reorder returns argv as: program, global flags, the command path,
// the command's flags, then "--" and the positional arguments. It also
// rejects an unknown command or flag, a flag missing its value or given an
// empty one, an empty positional argument and a missing command as usage
// errors before anything runs (the help is shown only when asked for:
// --help anywhere).
// path is the command path ("env", "verify"), for messages and schemas.
func reorder(app *cli.App, args []string) (out []string, path []string, err error) {
	if len(args) == 0 {
		return args, nil, nil
	}
	global := flagIndex(app.Flags)
	global["help"] = false
	global["h"] = false
	global["version"] = false
	global["v"] = false
	var globals, local, positional []string
	help := false
	// once maps each name of a flag that takes one value to the flag, and
	// seen what each was given: urfave/cli keeps the last of a repeated
	// one and drops the others without a word.
	once := singleValued(app.Flags)
	seen := map[cli.Flag]string{}
	repeated := func(a, value string) error {
		name, _ := flagName(a)
		f, ok := once[name]
		if !ok {
			return nil
		}
		if first, dup := seen[f]; dup {
			return repeatedFlag(f, first, value)
		}
		seen[f] = value
		return nil
	}
	level := app.Commands
	var leaf *cli.Command
	var leafFlags map[string]bool
	rest := args[1:]
	var i int
	// take appends the flag a to dst, and its value where it takes one
	// and was not given it with "=" (the next argument, which i then
	// passes), and checks the value's flag is not repeated.
	take := func(dst []string, a string, takes, hasValue bool) ([]string, error) {
		dst = append(dst, a)
		if takes && !hasValue {
			if i+1 == len(rest) {
				return nil, usagef("flag %s needs a value", a)
			}
			i++
			if rest[i] == "" {
				return nil, usagef("flag %s has an empty value (an unset shell variable?): give a value or leave the flag out", a)
			}
			if isFlag(rest[i], leafFlags, global) {
				return nil, usagef("flag %s needs a value, not the flag %s (give %s=%s if that is the value)", a, rest[i], a, rest[i])
			}
			dst = append(dst, rest[i])
		}
		if takes {
			if err := repeated(a, flagValue(a, dst)); err != nil {
				return nil, err
			}
		}
		return dst, nil
	}
	for i = 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			positional = append(positional, rest[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			name, hasValue := flagName(a)
			if hasValue && strings.HasSuffix(a, "=") && takesValue(name, leafFlags, global) {
				return nil, path, usagef("flag %s has an empty value (an unset shell variable?): give a value or leave the flag out", strings.TrimSuffix(a, "="))
			}
			if name == "help" || name == "h" {
				help = true
				continue
			}
			if (name == "version" || name == "v") && leaf == nil && !hasValue {
				// cruxprov --version is cruxprov version, as in most tools.
				if c := findCommand(level, "version"); c != nil {
					leaf, path, level = c, append(path, c.Name), nil
					leafFlags = flagIndex(c.Flags)
					leafFlags["help"], leafFlags["h"] = false, false
					continue
				}
			}
			if leafFlags != nil {
				if takes, ok := leafFlags[name]; ok {
					if local, err = take(local, a, takes, hasValue); err != nil {
						return nil, path, err
					}
					continue
				}
			}
			takes, ok := global[name]
			if !ok {
				if leaf == nil && len(path) == 0 {
					return nil, nil, usagef("unknown flag %s", a)
				}
				return nil, path, usagef("unknown flag %s for '%s'", a, strings.Join(path, " "))
			}
			if globals, err = take(globals, a, takes, hasValue); err != nil {
				return nil, path, err
			}
			continue
		}
		if len(positional) == 0 && level != nil {
			c := findCommand(level, a)
			if c == nil {
				if leaf == nil {
					return nil, nil, usagef("unknown command %q", a)
				}
				if len(leaf.Subcommands) > 0 {
					return nil, path, usagef("unknown command %q for '%s'", a, strings.Join(path, " "))
				}
			} else {
				leaf = c
				path = append(path, c.Name)
				leafFlags = flagIndex(c.Flags)
				for n, f := range singleValued(c.Flags) {
					once[n] = f
				}
				leafFlags["help"] = false
				leafFlags["h"] = false
				if len(c.Subcommands) > 0 {
					level = c.Subcommands
				} else {
					level = nil
				}
				continue
			}
		}
		positional = append(positional, a)
	}
	for i, p := range positional {
		if p == "" && !help {
			return nil, path, usagef("argument %d is empty (an unset shell variable?): give a value", i+1)
		}
	}
	if !help && (leaf == nil || len(leaf.Subcommands) > 0) {
		var names []string
		for _, c := range level {
			if !c.Hidden {
				names = append(names, c.Name)
			}
		}
		if leaf == nil {
			return nil, nil, usagef("a command is required: %s", strings.Join(names, ", "))
		}
		return nil, path, usagef("'%s' needs a command: %s", strings.Join(path, " "), strings.Join(names, ", "))
	}
	out = append(out, args[0])
	out = append(out, globals...)
	out = append(out, path...)
	if help {
		// --help anywhere shows the command's help; positionals after it
		// would be read as a help topic.
		return append(out, "--help"), path, nil
	}
	out = append(out, local...)
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out, path, nil
}

func flagName(a string) (name string, hasValue bool) {
	a = strings.TrimLeft(a, "-")
	if i := strings.IndexByte(a, '='); i >= 0 {
		return a[:i], true
	}
	return a, false
}

// takesValue reports whether the flag name takes a value, as a flag of
// the command reached so far (leaf, nil before one) or a global flag.
func takesValue(name string, leaf, global map[string]bool) bool {
	if takes, ok := leaf[name]; ok {
		return takes
	}
	return global[name]
}

// flagIndex maps every name and alias of flags to whether it takes a value.
func flagIndex(flags []cli.Flag) map[string]bool {
	m := map[string]bool{}
	for _, f := range flags {
		takes := true
		if d, ok := f.(cli.DocGenerationFlag); ok {
			takes = d.TakesValue()
		}
		for _, n := range f.Names() {
			m[n] = takes
		}
	}
	return m
}

func findCommand(cs []*cli.Command, name string) *cli.Command {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

// isFlag reports whether a, given as a flag's value, is one of the
// command's or the global flags: "--home --json" forgot the home, and
// taking --json for it would run without the JSON the caller asked for.
func isFlag(a string, leafFlags, global map[string]bool) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	name, _ := flagName(a)
	_, l := leafFlags[name]
	_, g := global[name]
	return l || g
}

// flagValue is the value of flag argument a, just appended to args (as
// --name=value, or as --name then the value).
func flagValue(a string, args []string) string {
	if _, v, ok := strings.Cut(a, "="); ok {
		return v
	}
	return args[len(args)-1]
}

// singleValued maps every name and alias of the flags that take one
// value (not a repeatable slice flag, not a boolean) to the flag.
func singleValued(flags []cli.Flag) map[string]cli.Flag {
	m := map[string]cli.Flag{}
	for _, f := range flags {
		switch f.(type) {
		case *cli.StringSliceFlag, *cli.IntSliceFlag, *cli.Int64SliceFlag, *cli.UintSliceFlag, *cli.Uint64SliceFlag, *cli.Float64SliceFlag:
			continue
		}
		if d, ok := f.(cli.DocGenerationFlag); !ok || !d.TakesValue() {
			continue
		}
		for _, n := range f.Names() {
			m[n] = f
		}
	}
	return m
}

// repeatedFlag is the usage error for a flag that takes one value given
// twice: refused, not the last taken silently (--platform A --platform B
// built B alone). A flag whose values are comma-separated says so.
func repeatedFlag(f cli.Flag, first, second string) error {
	n := f.Names()[0]
	dash := "--"
	if len(n) == 1 {
		dash = "-"
	}
	if u, ok := f.(cli.DocGenerationFlag); ok && strings.Contains(u.GetUsage(), "comma-separated") {
		return usagef("%s%s is given twice (%s, %s): give the values once, comma-separated: %s%s %s,%s", dash, n, first, second, dash, n, first, second)
	}
	return usagef("%s%s is given twice (%s, %s): it takes one value; give it once", dash, n, first, second)
}
