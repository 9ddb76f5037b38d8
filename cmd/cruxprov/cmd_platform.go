package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

func init() {
	register(&cli.Command{
		Name:      "platform",
		Usage:     "list the platform presets, or show one platform (or the host)",
		UsageText: "cruxprov platform list | show (NAME | host [--python PATH])",
		Description: "A platform is explicit: the PEP 508 marker values, the ordered supported wheel tags and the\n" +
			"interpreter layout. Presets are named by their canonical id; host probes an interpreter.\n" +
			"See docs/platforms.md.\n\n" +
			"Example:\n   cruxprov platform list\n   cruxprov platform show cp312-manylinux_2_39_x86_64 --json > p.json\n" +
			"   cruxprov platform show host --python /usr/bin/python3.11",
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "list the preset platforms by canonical id",
				UsageText: "cruxprov platform list [--json]",
				Description: "A header and a row a preset, nothing else, as every list prints ('cruxprov platform show ID'\n" +
					"shows one; 'cruxprov platform show host' the host's).\n\n" +
					"Example:\n   cruxprov platform list\n   cruxprov platform list --json",
				Action: platformList,
			},
			{
				Name:      "show",
				Usage:     "show a platform: markers, layout and supported tags (canonical JSON with --json)",
				UsageText: "cruxprov platform show (NAME | host [--python PATH]) [--json]",
				Description: "With --json the document's \"platform\" member is the platform's canonical JSON form, which\n" +
					"--platform-file accepts (the whole document is accepted too).\n\n" +
					"Example:\n   cruxprov platform show cp311-win_amd64\n   cruxprov platform show host --python /usr/bin/python3.11 --json > host.json",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "python", Value: "python3", Usage: "the interpreter `PATH` probed for host"},
					&cli.BoolFlag{Name: "all-tags", Usage: "list every supported tag, not the first ten"},
				},
				Action: platformShow,
			},
		},
	})
}

type platformRow struct {
	ID              string `json:"id"`
	PythonVersion   string `json:"python_version"`
	SysPlatform     string `json:"sys_platform"`
	PlatformMachine string `json:"platform_machine"`
	Tags            int    `json:"tags"`
}

func platformList(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() > 0 {
		return usagef("platform list takes no arguments")
	}
	var rows []platformRow
	for _, n := range platform.Presets() {
		p, err := platform.Lookup(n)
		if err != nil {
			return err
		}
		rows = append(rows, platformRow{n, p.PythonVersion, p.Markers["sys_platform"], p.Markers["platform_machine"], len(p.Tags)})
	}
	return o.emit("cruxprov.platform.list/v1", struct {
		Platforms []platformRow `json:"platforms"`
	}{rows}, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPYTHON\tSYS_PLATFORM\tMACHINE\tTAGS")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", r.ID, r.PythonVersion, r.SysPlatform, r.PlatformMachine, r.Tags)
		}
		// The header and the rows, as every other list prints: a count
		// line after them was read as one more row by a script piping
		// the list (stdout is the result; --json is only JSON).
		tw.Flush()
	})
}

func platformShow(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() != 1 {
		return usagef("platform show takes one NAME (a preset id, or host)")
	}
	if c.IsSet("python") {
		if err := pythonUnprobed(c.Args().Slice(), "show host"); err != nil {
			return err
		}
	}
	ps, err := loadPlatforms(c, []string{c.Args().First()}, nil)
	if err != nil {
		return err
	}
	p := ps[0]
	return o.emit("cruxprov.platform.show/v1", struct {
		Platform *platform.Platform `json:"platform"`
	}{p}, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "id\t%s\n", p.ID())
		if p.Interpreter != "" {
			fmt.Fprintf(tw, "interpreter\t%s\n", p.Interpreter)
		}
		fmt.Fprintf(tw, "python\t%s (abi %s)\n", p.PythonVersion, p.ABI)
		fmt.Fprintf(tw, "lib_dir\t%s\n", p.LibDir)
		for _, k := range platform.MarkerVariables {
			fmt.Fprintf(tw, "%s\t%q\n", k, p.Markers[k])
		}
		tw.Flush()
		n := len(p.Tags)
		if !c.Bool("all-tags") && n > 10 {
			n = 10
		}
		fmt.Fprintf(w, "tags (%d, most preferred first):\n", len(p.Tags))
		for _, t := range p.Tags[:n] {
			fmt.Fprintf(w, "  %s\n", t)
		}
		if n < len(p.Tags) {
			fmt.Fprintf(w, "  … %d more (--all-tags, or --json for the canonical form)\n", len(p.Tags)-n)
		}
	})
}

// pythonUnprobed is the usage error of a --python given on the command
// line where no platform named is probed from an interpreter: presets
// (and platform files, not in names), which no interpreter changes.
// platform show, lock resolve and fetch ignored it without a word, a
// preset's Python being fixed. instead is the other way out than
// dropping --python. A name that is no preset lets it by: host is probed
// from --python; fetch probes --python for an id that is no preset (the
// host platform's, pipeline's hostOfID); elsewhere it is refused as
// unknown (platform_unsupported), which says more than this would.
func pythonUnprobed(names []string, instead string) error {
	for _, n := range names {
		if n = strings.TrimSpace(n); n == "host" {
			return nil
		}
		if _, err := platform.Lookup(n); err != nil {
			return nil
		}
	}
	return usagef("--python names the interpreter the host platform is probed from, and no platform here is host (a preset or a platform file fixes its Python, which no interpreter changes): drop --python, or %s", instead)
}

// loadPlatforms turns platform names (preset ids, or host probed with
// --python) and platform files into platforms, in the order given.
func loadPlatforms(c *cli.Context, names, files []string) ([]*platform.Platform, error) {
	var out []*platform.Platform
	var host *platform.Platform
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, usagef("empty platform name in %q", strings.Join(names, ","))
		}
		if n == "host" {
			if host == nil {
				p, err := platform.Host(c.Context, c.String("python"))
				if err != nil {
					return nil, err
				}
				host = p
			}
			out = append(out, host)
			continue
		}
		p, err := platform.Lookup(n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	for _, f := range files {
		b, err := inputFile("--platform-file", f, maxInputFile)
		if err != nil {
			return nil, err
		}
		p, err := platform.ParseJSONFile(f, b)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	// One platform twice (host is a preset's id on most machines) gave
	// two columns of one label, with their outcomes side by side.
	seen := map[string]int{}
	for i, p := range out {
		if j, dup := seen[p.ID()]; dup {
			what := func(k int) string {
				if k < len(names) && strings.TrimSpace(names[k]) == "host" {
					return "host"
				}
				return p.ID()
			}
			return nil, usagef("the platform %s is named twice (as %s and as %s): name it once", p.ID(), what(j), what(i))
		}
		seen[p.ID()] = i
	}
	return out, nil
}

// pinnedPlatform is the --platform of verify and run, which pick a pinned
// materialization by its platform id: "host" is the id of the host's
// platform as install --platform host names it (pipeline.HostPlatform, of
// the interpreter config.yaml names, else python3, install's default
// --python), any other as given. "host" was compared with the pinned ids
// as it was, and refused pin_unapproved "for host", advising to propose
// the provider again for it.
func pinnedPlatform(c *cli.Context, o *opts) (string, error) {
	if c.String("platform") != "host" {
		return c.String("platform"), nil
	}
	cfg, err := loadConfig(o.home)
	if err != nil {
		return "", err
	}
	python := cmp.Or(cfg.Python, "python3")
	st, err := o.openStore()
	if err != nil {
		return "", err
	}
	id, err := pipeline.HostPlatform(c.Context, st, python)
	if err != nil {
		// Its advice (--python) is not this command's: it has none.
		return "", refusal.Wrap(refusal.PlatformUnsupported, err, "--platform host is the platform of the interpreter %s, which could not be probed: name the pinned platform's id instead", python).WithRemedy(refusal.ActionNamePlatform, "")
	}
	return id, nil
}
