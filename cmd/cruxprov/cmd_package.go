package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/manifest"
	"github.com/cruxible/cruxprov/wheel"
)

func init() {
	register(&cli.Command{
		Name:      "package",
		Usage:     "work on provider wheels built with ordinary Python tools",
		UsageText: "cruxprov package embed WHEEL --manifest F --lock F -o OUT.whl|DIR",
		Description: "Example:\n   cruxprov package embed dist/acme_echo-1.0.0-py3-none-any.whl --manifest provider.toml --lock pylock.toml -o out/\n" +
			"   cruxprov inspect out/acme_echo-1.0.0-py3-none-any.whl",
		Subcommands: []*cli.Command{{
			Name:      "embed",
			Usage:     "add or replace a wheel's provider.toml and pylock.toml, rewriting RECORD",
			UsageText: "cruxprov package embed WHEEL --manifest F --lock F -o OUT.whl|DIR",
			Description: "Writes WHEEL with <dist-info>/cruxible/provider.toml and <dist-info>/cruxible/pylock.toml\n" +
				"added or replaced and RECORD regenerated; every other member keeps its bytes. WHEEL is\n" +
				"verified against its RECORD first, the manifest against the wheel's name (manifest_invalid),\n" +
				"and the lock must parse (lock_invalid). The output is checked as `inspect` checks it before\n" +
				"it is renamed into place; -o DIR keeps WHEEL's file name.\n\n" +
				"Example:\n   cruxprov package embed dist/acme_echo-1.0.0-py3-none-any.whl --manifest provider.toml --lock pylock.toml -o out/\n" +
				"   cruxprov package embed acme_echo-1.0.0-py3-none-any.whl --manifest provider.toml --lock pylock.toml -o acme_echo-1.0.0-py3-none-any.whl --json",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "manifest", Usage: "the provider.toml `FILE` to embed"},
				&cli.StringFlag{Name: "lock", Usage: "the pylock.toml `FILE` to embed"},
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the output wheel `PATH`, or a directory to write it into under WHEEL's name"},
			},
			Action: func(c *cli.Context) error {
				o, err := globals(c)
				if err != nil {
					return err
				}
				if c.NArg() != 1 {
					return usagef("package embed takes one WHEEL")
				}
				src := c.Args().First()
				for _, f := range []string{"manifest", "lock", "output"} {
					if c.String(f) == "" {
						return usagef("package embed needs --%s", f)
					}
				}
				// WHEEL, --manifest and --lock are files the caller named:
				// one missing or unreadable is a usage error, as inspect
				// says of its WHEEL, not a refusal that blames a wheel.
				if err := readable("WHEEL", src); err != nil {
					return err
				}
				m, err := inputFile("--manifest", c.String("manifest"), maxInputFile)
				if err != nil {
					return err
				}
				l, err := inputFile("--lock", c.String("lock"), maxInputFile)
				if err != nil {
					return err
				}
				out, made, err := embedOutput(c.String("output"), src)
				if err != nil {
					return err
				}
				r, err := manifest.EmbedFile(c.Context, src, out, m, l)
				if err != nil {
					// A failure leaves nothing: not even the directory
					// this run made for -o.
					removeMade(made)
					var oe *manifest.OutputError
					if errors.As(err, &oe) {
						return fmt.Errorf("cannot write the embedded wheel into %s (-o): %v; %s", oe.Dir, oe.Err, outputAdvice(oe.Err))
					}
					return err
				}
				v := struct {
					Output string           `json:"output"`
					Report *manifest.Report `json:"inspect"`
				}{out, r}
				return o.emit("cruxprov.package.embed/v1", v, func(w io.Writer) {
					if o.quiet { // the result alone: the wheel written
						fmt.Fprintln(w, out)
						return
					}
					fmt.Fprintf(w, "wrote %s\n\n", out)
					printInspect(w, r)
				})
			},
		}},
	})
}

// embedOutput is the wheel path -o names for src: a directory (an
// existing one, or "DIR/", made here when missing: made lists what was
// made, deepest last) keeps src's file name; anything else must be a
// wheel file name for the same distribution, version and tags in an
// existing directory. A bad -o is a usage error naming -o and what it
// takes, not a refusal that blames the wheel.
func embedOutput(out, src string) (path string, made []string, err error) {
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return filepath.Join(out, filepath.Base(src)), nil, nil
	}
	if strings.HasSuffix(out, "/") {
		// "-o release/" names a directory, as the docs write it: made
		// when it does not exist yet.
		for d := filepath.Clean(out); ; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
				break
			}
			made = append([]string{d}, made...)
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			removeMade(made)
			return "", nil, usagef("-o %s: %v", out, unwrapPath(err))
		}
		return filepath.Join(out, filepath.Base(src)), made, nil
	}
	base := filepath.Base(out)
	takes := "give -o a directory (an existing one, or DIR/ to make it) to keep the wheel's name, or a file name " + filepath.Base(src)
	if !strings.HasSuffix(base, ".whl") {
		return "", nil, usagef("-o %s is neither a directory nor a wheel file name: %s", out, takes)
	}
	if sn, err := wheel.ParseFilename(filepath.Base(src)); err == nil { // else WHEEL's own refusal follows
		on, err := wheel.ParseFilename(base)
		if err != nil || on.Name != sn.Name || on.Version != sn.Version || !slices.Equal(on.Tags, sn.Tags) {
			return "", nil, usagef("-o %s does not name the same wheel as WHEEL (same distribution, version and tags): %s", out, takes)
		}
	}
	if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
		return "", nil, usagef("-o %s: %s is not a directory; create it first or give -o an existing directory", out, filepath.Dir(out))
	}
	return out, nil, nil
}

// removeMade removes the directories embedOutput made, deepest first,
// each only if still empty.
func removeMade(made []string) {
	for i := len(made) - 1; i >= 0; i-- {
		os.Remove(made[i])
	}
}

// outputAdvice is what to do about an output directory that could not
// be written.
func outputAdvice(err error) string {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return "give -o a directory this user may write, or have its owner give write access"
	case errors.Is(err, syscall.ENOSPC):
		return "free space on its file system, or give -o a directory on another"
	}
	return "give -o a directory this user may write"
}
