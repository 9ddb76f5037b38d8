package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/manifest"
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
				m, err := readInputFile(c.String("manifest"), maxInputFile)
				if err != nil {
					return usagef("cannot read --manifest: %v", err)
				}
				l, err := readInputFile(c.String("lock"), maxInputFile)
				if err != nil {
					return usagef("cannot read --lock: %v", err)
				}
				out := c.String("output")
				if strings.HasSuffix(out, "/") {
					// "-o release/" names a directory, as the docs write it:
					// made when it does not exist yet.
					if err := os.MkdirAll(out, 0o755); err != nil {
						return usagef("-o %s: %v", out, unwrapPath(err))
					}
				}
				if st, err := os.Stat(out); err == nil && st.IsDir() {
					out = filepath.Join(out, filepath.Base(src))
				} else if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
					return usagef("-o %s: %s is not a directory; create it first or give -o an existing directory", out, filepath.Dir(out))
				}
				r, err := manifest.EmbedFile(c.Context, src, out, m, l)
				if err != nil {
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
