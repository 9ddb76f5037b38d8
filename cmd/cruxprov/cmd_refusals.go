package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/refusal"
)

func init() {
	register(&cli.Command{
		Name:        "refusals",
		Usage:       "list every refusal code (exit 78); docs/refusals.md says what to do about each",
		UsageText:   "cruxprov refusals [--json]",
		Description: "Example:\n   cruxprov refusals\n   cruxprov refusals --json | jq -r '.codes[]'",
		Action: func(c *cli.Context) error {
			o, err := globals(c)
			if err != nil {
				return err
			}
			if c.NArg() > 0 {
				return usagef("refusals takes no arguments")
			}
			codes := refusal.Codes()
			return o.emit("cruxprov.refusals/v1", map[string]any{"exit_code": exitRefused, "codes": codes}, func(w io.Writer) {
				fmt.Fprintf(w, "Refusals exit %d and print 'refused: <code>: <detail>'. Codes:\n", exitRefused)
				for _, c := range codes {
					fmt.Fprintf(w, "  %s\n", c)
				}
			})
		},
	})
}
