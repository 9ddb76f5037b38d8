package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/manifest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/wheel"
)

func init() {
	register(&cli.Command{
		Name:      "lock",
		Usage:     "work with PEP 751 locks: resolve one for platforms",
		UsageText: "cruxprov lock resolve (--wheel W | --lock F) --platform P[,P…] [--platform-file F]",
		Description: "Example:\n   cruxprov lock resolve --lock pylock.toml --platform cp312-manylinux_2_39_x86_64,cp312-macosx_14_0_arm64\n" +
			"   cruxprov lock resolve --wheel acme_echo-1.0.0-py3-none-any.whl --platform host --json",
		Subcommands: []*cli.Command{{
			Name:      "resolve",
			Usage:     "the chosen wheel per package, per platform, and each platform's resolution digest",
			UsageText: "cruxprov lock resolve (--wheel W | --lock F) --platform P[,P…] [--platform-file F]… [--python PATH] [--extra E]… [--group G]… [--allow-linux-tags]",
			Description: "Resolves the provider's embedded lock (--wheel) or a bare lock (--lock) for every platform\n" +
				"given and prints one table: a row per package, a column per platform, each cell the chosen\n" +
				"wheel's tags, '-' where the package's marker excludes the platform, or the refusal code\n" +
				"where the lock does not cover it. Then each platform's resolution digest or refusal: with\n" +
				"--wheel, a platform where the lock does not meet the wheel's own Requires-Dist is lock_invalid.\n" +
				"Exit 78 when any platform is refused (after the table).\n\n" +
				"Example:\n   cruxprov lock resolve --lock pylock.toml --platform cp312-manylinux_2_39_x86_64,cp312-macosx_14_0_arm64,cp312-win_amd64\n" +
				"   cruxprov lock resolve --wheel acme_echo-1.0.0-py3-none-any.whl --platform host --python /usr/bin/python3.11 --json\n" +
				"   cruxprov lock resolve --lock pylock.toml --platform-file host.json --extra <extra> --group <group>",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "wheel", Usage: "the provider's root `WHEEL` (its embedded cruxible/pylock.toml)"},
				&cli.StringFlag{Name: "lock", Usage: "a bare pylock.toml `FILE`"},
				&cli.StringSliceFlag{Name: "platform", Usage: "target `PLATFORM`s: preset ids or host, comma-separated or repeated"},
				&cli.StringSliceFlag{Name: "platform-file", Usage: "a platform in canonical JSON `FILE` (from 'platform show --json'); repeatable"},
				&cli.StringFlag{Name: "python", Value: "python3", Usage: "the interpreter `PATH` probed for host"},
				&cli.StringSliceFlag{Name: "extra", Usage: "install the lock's `EXTRA` (default: none)"},
				&cli.StringSliceFlag{Name: "group", Usage: "install dependency `GROUP` (default: the lock's default-groups)"},
				&cli.BoolFlag{Name: "no-default-groups", Usage: "do not install the lock's default-groups"},
				&cli.BoolFlag{Name: "allow-linux-tags", Usage: "also accept linux_<arch> (local build) wheels, ranked last"},
			},
			Action: lockResolve,
		}},
	})
}

// lockSource reads the lock bytes from --lock or the root wheel, and
// says where they came from; for a root wheel, opts carries its own
// requirements, which the lock must meet, and root is its name (which
// its own lock must not list), "" for --lock.
func lockSource(c *cli.Context, opts *lockfile.Options) (data []byte, source, root string, err error) {
	wf, lf := c.String("wheel"), c.String("lock")
	switch {
	case wf != "" && lf != "":
		return nil, "", "", usagef("give --wheel or --lock, not both")
	case lf != "":
		b, err := inputFile("--lock", lf, maxInputFile)
		if err != nil {
			return nil, "", "", err
		}
		return b, lf, "", nil
	case wf != "":
		if err := readable("--wheel", wf); err != nil {
			return nil, "", "", err
		}
		w, err := wheel.Open(wf)
		if err != nil {
			return nil, "", "", err
		}
		defer w.Close()
		b, err := manifest.LockFromWheel(w)
		if err != nil {
			return nil, "", "", err
		}
		if opts.Requires, err = manifest.Requires(w); err != nil {
			return nil, "", "", err
		}
		name := w.Filename().Name
		opts.Root = name + " " + w.Metadata().Version
		opts.RootWheel = filepath.Base(wf)
		return b, wf + " (" + w.DistInfo() + "/cruxible/pylock.toml)", name, nil
	}
	return nil, "", "", usagef("give --wheel W or --lock F")
}

type lockOutcomeJSON struct {
	Name     string `json:"name"`
	Selected bool   `json:"selected"`
	Filename string `json:"filename,omitempty"`
	Code     string `json:"code,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

type lockPlatformJSON struct {
	Platform         string                   `json:"platform"`
	ResolutionDigest *digest.Digest           `json:"resolution_digest,omitempty"`
	Packages         []lockfile.ResolvedWheel `json:"packages,omitempty"`
	Refused          *refusedJSON             `json:"refused,omitempty"`
	Outcomes         []lockOutcomeJSON        `json:"outcomes"`
}

type refusedJSON struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

func refusedOf(err error) *refusedJSON {
	var r *refusal.Error
	if errors.As(err, &r) {
		return &refusedJSON{string(r.Code), oneLine(r.Message())}
	}
	return &refusedJSON{"", oneLine(err.Error())}
}

func lockResolve(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() > 0 {
		return usagef("lock resolve takes no arguments (use --lock F or --wheel W)")
	}
	var names []string
	for _, p := range c.StringSlice("platform") {
		names = append(names, strings.Split(p, ",")...)
	}
	files := c.StringSlice("platform-file")
	if len(names) == 0 && len(files) == 0 {
		return usagef("--platform P[,P…] or --platform-file F is required ('cruxprov platform list' shows the presets)")
	}
	if c.IsSet("python") {
		if err := pythonUnprobed(names, "add --platform host"); err != nil {
			return err
		}
	}
	var opts lockfile.Options
	data, source, root, err := lockSource(c, &opts)
	if err != nil {
		return err
	}
	plats, err := loadPlatforms(c, names, files)
	if err != nil {
		return err
	}
	lock, warns, err := lockfile.Parse(data)
	if err != nil {
		return err
	}
	if root != "" {
		if err := manifest.CheckNotInOwnLock(root, lock); err != nil {
			return err
		}
	}
	opts.Extras, opts.AllowLinuxTags = c.StringSlice("extra"), c.Bool("allow-linux-tags")
	if c.IsSet("group") || c.Bool("no-default-groups") {
		opts.Groups = append([]string{}, c.StringSlice("group")...)
	}
	if err := lock.CheckSelection(opts.Extras, opts.Groups); err != nil {
		return usagef("%v", err)
	}
	reps, first := lockfile.ResolveAll(lock, plats, opts)
	if reps == nil {
		return first
	}
	out := struct {
		Source    string             `json:"source"`
		Warnings  []string           `json:"warnings"`
		Platforms []lockPlatformJSON `json:"platforms"`
		Refused   *refusedJSON       `json:"refused,omitempty"`
	}{Source: source, Warnings: []string{}}
	for _, w := range warns {
		out.Warnings = append(out.Warnings, w.String())
	}
	for i := range reps {
		r := &reps[i]
		pj := lockPlatformJSON{Platform: r.Platform, Outcomes: []lockOutcomeJSON{}}
		if res, err := r.Resolution(); err != nil {
			pj.Refused = refusedOf(err)
		} else {
			d, err := res.Digest()
			if err != nil {
				return err
			}
			pj.ResolutionDigest, pj.Packages = &d, append([]lockfile.ResolvedWheel(nil), res.Packages...)
			for i := range pj.Packages { // a private index's URL may carry a credential
				pj.Packages[i].URL = index.Redact(pj.Packages[i].URL)
			}
		}
		for _, oc := range r.Packages {
			oj := lockOutcomeJSON{Name: oc.Name, Selected: oc.Selected}
			if oc.Wheel != nil {
				oj.Filename = oc.Wheel.Filename
			}
			if oc.Err != nil {
				rj := refusedOf(oc.Err)
				oj.Code, oj.Detail = rj.Code, rj.Detail
			}
			pj.Outcomes = append(pj.Outcomes, oj)
		}
		out.Platforms = append(out.Platforms, pj)
	}
	if first != nil {
		out.Refused = refusedOf(first)
	}
	err = o.emit("cruxprov.lock.resolve/v1", out, func(w io.Writer) { printLockTable(w, o, out.Warnings, lock, reps, out.Platforms) })
	if err != nil || first == nil {
		return err
	}
	if o.json {
		// The document above already carries "refused": exit 78 without a
		// second document on stdout.
		return &reportedError{code: exitRefused, err: first}
	}
	return first
}

// printLockTable prints one row per package and one column per platform.
func printLockTable(w io.Writer, o *opts, warns []string, lock *lockfile.Lock, reps []lockfile.Report, pjs []lockPlatformJSON) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	if !o.quiet {
		for _, s := range warns {
			fmt.Fprintf(o.stderr, "warning: %s\n", s)
		}
	}
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "PACKAGE")
	for _, r := range reps {
		fmt.Fprintf(tw, "\t%s", r.Platform)
	}
	fmt.Fprintln(tw)
	// Rows: every package name of the lock, in name order, labelled with
	// the version chosen (else the lock's first entry's).
	var names []string
	versions := map[string]string{}
	lockVersions := map[string]string{}
	for _, p := range lock.Packages {
		if _, ok := lockVersions[p.Name]; !ok {
			lockVersions[p.Name] = p.Version
			names = append(names, p.Name)
		}
	}
	for _, r := range reps {
		for _, oc := range r.Packages {
			if oc.Wheel != nil && versions[oc.Name] == "" {
				versions[oc.Name] = oc.Wheel.Version
			}
		}
	}
	sortStrings(names)
	for _, n := range names {
		label := n
		if versions[n] == "" {
			versions[n] = lockVersions[n]
		}
		if v := versions[n]; v != "" {
			label += " " + v
		}
		fmt.Fprint(tw, label)
		for _, r := range reps {
			fmt.Fprintf(tw, "\t%s", cell(r, n))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(bw)
	for _, pj := range pjs {
		if pj.Refused != nil {
			fmt.Fprintf(bw, "%s: refused: %s: %s\n", pj.Platform, pj.Refused.Code, pj.Refused.Detail)
		} else {
			fmt.Fprintf(bw, "%s: %s, resolution_digest %s\n", pj.Platform, count(len(pj.Packages), "package"), pj.ResolutionDigest)
		}
	}
}

// cell is what a platform's column shows for a package: the chosen
// wheel's tags, "-" when no entry's marker applies, or the refusal code.
func cell(r lockfile.Report, name string) string {
	if r.Err != nil {
		return "✗ " + string(refusal.CodeOf(r.Err))
	}
	for _, oc := range r.Packages {
		if oc.Name != name {
			continue
		}
		switch {
		case oc.Err != nil:
			return "✗ " + string(refusal.CodeOf(oc.Err))
		case oc.Wheel != nil:
			return wheelTags(oc.Wheel.Filename)
		}
		return "-"
	}
	return "-"
}

// wheelTags is the python-abi-platform part of a wheel file name.
func wheelTags(filename string) string {
	parts := strings.Split(strings.TrimSuffix(filename, ".whl"), "-")
	if len(parts) < 5 {
		return filename
	}
	return strings.Join(parts[len(parts)-3:], "-")
}

func sortStrings(xs []string) {
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && xs[j] < xs[j-1]; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
}
