package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/manifest"
)

func init() {
	register(&cli.Command{
		Name:      "inspect",
		Usage:     "show a provider wheel's identity, manifest, implementation digests and lock summary",
		UsageText: "cruxprov inspect WHEEL [--json]",
		Description: "Verifies every member of WHEEL against its RECORD, then shows its name, version, sha256\n" +
			"and tags; its provider.toml; each entrypoint with its implementation digest (docs/digests.md);\n" +
			"and its embedded pylock.toml: packages, wheels, the platforms they cover.\n" +
			"A wheel without a manifest or lock is refused (manifest_missing, lock_missing).\n\n" +
			"Example:\n   cruxprov inspect dist/acme_echo-1.0.0-py3-none-any.whl\n" +
			"   cruxprov inspect acme_echo-1.0.0-py3-none-any.whl --json | jq '.entrypoints[].implementation_digest'",
		Action: func(c *cli.Context) error {
			o, err := globals(c)
			if err != nil {
				return err
			}
			if c.NArg() != 1 {
				return usagef("inspect takes one WHEEL")
			}
			if err := readable("WHEEL", c.Args().First()); err != nil {
				return err
			}
			r, err := manifest.Inspect(c.Context, c.Args().First())
			if err != nil {
				return err
			}
			return o.emit("cruxprov.inspect/v1", r, func(w io.Writer) { printInspect(w, r) })
		},
	})
}

func inspectList(xs []string) string {
	if len(xs) == 0 {
		return "(none)"
	}
	return strings.Join(xs, ", ")
}

func printInspect(out io.Writer, r *manifest.Report) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	m := r.Manifest
	fmt.Fprintf(w, "wheel\t%s\n", r.Wheel.Filename)
	fmt.Fprintf(w, "name\t%s %s\n", r.Wheel.Name, r.Wheel.Version)
	fmt.Fprintf(w, "sha256\t%s\n", r.Wheel.SHA256)
	fmt.Fprintf(w, "size\t%d bytes\n", r.Wheel.Size)
	fmt.Fprintf(w, "tags\t%s\n", inspectList(r.Wheel.Tags))
	fmt.Fprintf(w, "manifest\tschema %d, protocol [%d, %d], %s\n", m.Schema, m.Protocol[0], m.Protocol[1], m.Digest)
	fmt.Fprintf(w, "secrets\t%s\n", inspectList(m.Secrets))
	fmt.Fprintf(w, "egress\t%s\n", inspectList(m.Egress))
	budgets := []string{}
	if m.Budgets.TimeoutMS > 0 {
		budgets = append(budgets, fmt.Sprintf("timeout %d ms", m.Budgets.TimeoutMS))
	}
	if m.Budgets.OutputBytes > 0 {
		budgets = append(budgets, fmt.Sprintf("output %d bytes", m.Budgets.OutputBytes))
	}
	fmt.Fprintf(w, "budgets\t%s\n", inspectList(budgets))
	l := r.Lock
	fmt.Fprintf(w, "lock\tlock-version %s, %s, %s, %s\n", l.LockVersion, count(len(l.Packages), "package"), count(l.Wheels, "wheel"), l.Digest)
	fmt.Fprintf(w, "platforms\t%s\n", inspectList(l.Platforms))
	w.Flush()

	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ENTRYPOINT\tOBJECT\tINTERFACE\tIMPLEMENTATION DIGEST")
	for _, e := range r.Entrypoints {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.Name, e.Object, e.Interface.ID, e.ImplementationDigest)
	}
	w.Flush()

	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PACKAGE\tVERSION\tWHEELS\tPLATFORMS")
	for _, p := range l.Packages {
		n := fmt.Sprint(p.Wheels)
		if p.Sdist {
			n += " + sdist"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Name, p.Version, n, inspectList(p.Platforms))
	}
	w.Flush()
	for _, wa := range r.Warnings {
		fmt.Fprintf(out, "warning: lock %s\n", wa)
	}
}
