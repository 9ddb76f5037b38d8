package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/receipts"
)

func init() {
	ledgerFlag := &cli.StringSliceFlag{Name: "ledger", Usage: "a receipts ledger `PATH`; repeatable (default: this host and user's)"}
	register(&cli.Command{
		Name:        "receipts",
		Usage:       "read receipts ledgers: every run's intent and outcome",
		UsageText:   "cruxprov receipts scan|list …",
		Description: "Example:\n   cruxprov receipts list\n   cruxprov receipts scan --ledger a.jsonl --ledger b.jsonl --json",
		Subcommands: []*cli.Command{{
			Name:      "scan",
			Usage:     "check ledgers strictly and report attempts, orphaned intents, torn and corrupt rows",
			UsageText: "cruxprov receipts scan [--ledger PATH]… [--tolerate-corrupt]",
			Description: "Merges several ledgers. Strict by default: the first line that is not valid UTF-8, a JSON\n" +
				"object of a known phase with its typed fields is refused (ledger_corrupt, with its line,\n" +
				"byte offset and sha256); --tolerate-corrupt reports such lines as data instead. An orphan is\n" +
				"an intent without its outcome (a crash between them): reconcile it by its attempt id.\n\n" +
				"Example:\n   cruxprov receipts scan\n   cruxprov receipts scan --ledger worker1.jsonl --ledger worker2.jsonl --tolerate-corrupt --json",
			Flags:  []cli.Flag{ledgerFlag, &cli.BoolFlag{Name: "tolerate-corrupt", Usage: "report corrupt lines instead of refusing"}},
			Action: func(c *cli.Context) error { return receiptsAction(c, true) },
		}, {
			Name:        "list",
			Usage:       "list the runs a ledger recorded",
			UsageText:   "cruxprov receipts list [--ledger PATH]…",
			Description: "Example:\n   cruxprov receipts list\n   cruxprov receipts list --json | jq '.attempts[] | select(.outcome.status != \"ok\")'",
			Flags:       []cli.Flag{ledgerFlag},
			Action:      func(c *cli.Context) error { return receiptsAction(c, false) },
		}},
	})
}

func receiptsAction(c *cli.Context, scan bool) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() > 0 {
		return usagef("receipts %s takes no arguments", c.Command.Name)
	}
	paths, err := ledgerPaths(c, true)
	if err != nil {
		return err
	}
	if !c.IsSet("ledger") {
		// No run has written the default ledger yet: nothing to list, not
		// an error (a --ledger that is not there still is one).
		if _, err := os.Stat(paths[0]); errors.Is(err, fs.ErrNotExist) {
			paths = []string{}
		}
	}
	res, err := receipts.Scan(c.Context, paths, receipts.ScanOptions{TolerateCorrupt: scan && c.Bool("tolerate-corrupt")})
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist):
		return usagef("no ledger at %s: check the path (cruxprov receipts %s, without --ledger, reads this host and user's)", pe.Path, c.Command.Name)
	case errors.As(err, &pe) && errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("cannot read the ledger %s: permission denied; run as the user whose runs wrote it, or have it give read access", pe.Path)
	case err != nil:
		return err
	}
	type row struct {
		Intent  receipts.Intent   `json:"intent"`
		Outcome *receipts.Outcome `json:"outcome"`
		Ledger  string            `json:"ledger"`
		Line    int               `json:"line"`
	}
	rows := func(as []receipts.Attempt) []row {
		out := make([]row, 0, len(as))
		for _, a := range as {
			out = append(out, row{a.Intent, a.Outcome, a.Path, a.Line})
		}
		return out
	}
	v := map[string]any{"ledgers": paths, "attempts": rows(res.Attempts), "orphans": rows(res.Orphans)}
	if scan {
		// Empty lists are [] (not null), as attempts and orphans are.
		v["torn"], v["corrupt"], v["unmatched"], v["tails"] = nonNil(res.Torn), nonNil(res.Corrupt), nonNil(res.Unmatched), nonNil(res.Tails)
	}
	return o.emit("cruxprov.receipts."+c.Command.Name+"/v1", v, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "STARTED\tATTEMPT\tPROVIDER\tENTRYPOINT\tSTATUS\tEXIT\tKEY")
		for _, a := range res.Attempts {
			st, code := "ORPHAN", "-"
			if a.Outcome != nil {
				st, code = a.Outcome.Status, fmt.Sprint(a.Outcome.ExitCode)
				if a.Outcome.Replayed {
					st += " (replayed)"
				}
			}
			if len(a.Intent.Unenforced) > 0 {
				st += " (no " + strings.Join(a.Intent.Unenforced, ", ") + " limits)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Intent.StartedAt.Format("2006-01-02T15:04:05Z07:00"), a.Intent.AttemptID, a.Intent.Provider, a.Intent.Entrypoint, st, code, dash(a.Intent.IdempotencyKey))
		}
		tw.Flush()
		if scan {
			fmt.Fprintf(w, "%s, %s, %s, %s, %s in %s\n", count(len(res.Attempts), "attempt"), count(len(res.Orphans), "orphaned intent"), count(len(res.Torn), "torn row"), count(len(res.Corrupt), "corrupt line"), count(len(res.Tails), "unterminated tail"), count(len(paths), "ledger"))
		}
	})
}

// nonNil is s, or an empty slice for JSON's [] where s is nil.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
