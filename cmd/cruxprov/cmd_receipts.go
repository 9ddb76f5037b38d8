package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/deniedat"
	"github.com/cruxible/cruxprov/internal/kernelfs"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
)

func init() {
	ledgerFlag := &cli.StringSliceFlag{Name: "ledger", Usage: "a receipts ledger `PATH`; repeatable (default: this host and user's)"}
	stateFlag := &cli.StringFlag{Name: "state-dir", Usage: "the executor's state `DIR` whose ledger (DIR/receipts/<host>-<uid>.jsonl) to read, as run --state-dir DIR wrote it (default $XDG_STATE_HOME/cruxprov)"}
	tolerateFlag := &cli.BoolFlag{Name: "tolerate-corrupt", Usage: "report corrupt lines instead of refusing"}
	register(&cli.Command{
		Name:        "receipts",
		Usage:       "read receipts ledgers: every run's intent and outcome",
		UsageText:   "cruxprov receipts scan|list|show …",
		Description: "Example:\n   cruxprov receipts list\n   cruxprov receipts show <attempt-id>\n   cruxprov receipts scan --ledger a.jsonl --ledger b.jsonl --json",
		Subcommands: []*cli.Command{{
			Name:      "scan",
			Usage:     "check ledgers strictly and report attempts, orphaned intents, torn and corrupt rows",
			UsageText: "cruxprov receipts scan [--ledger PATH]… [--tolerate-corrupt]",
			Description: "Merges several ledgers. Strict by default: the first line that is not valid UTF-8, a JSON\n" +
				"object of a known phase with its typed fields is refused (ledger_corrupt, with its line,\n" +
				"byte offset and sha256); --tolerate-corrupt reports such lines as data instead. An orphan is\n" +
				"an intent without its outcome (a crash between them, or a run still going: list shows RUNNING\n" +
				"for one under an idempotency key whose writer holds its lock): reconcile it by its attempt id.\n" +
				"A repair a killed writer left (its journal, its lock) is checked as the next run will: one that\n" +
				"run would refuse is refused here with run's own line, one it finishes is listed.\n\n" +
				"Example:\n   cruxprov receipts scan\n   cruxprov receipts scan --ledger worker1.jsonl --ledger worker2.jsonl --tolerate-corrupt --json",
			Flags:  []cli.Flag{ledgerFlag, stateFlag, tolerateFlag},
			Action: func(c *cli.Context) error { return receiptsAction(c, true) },
		}, {
			Name:      "list",
			Usage:     "list the runs a ledger recorded",
			UsageText: "cruxprov receipts list [--ledger PATH]… [--provider NAME] [--status S] [--last N] [--tolerate-corrupt]",
			Description: "Oldest first, as the ledger holds them; the filters apply to the orphaned intents too.\n" +
				"Strict, as scan is: a corrupt line refuses the ledger (ledger_corrupt); --tolerate-corrupt lists\n" +
				"the valid rows and then each corrupt line (its line, byte offset and sha256; --json: \"corrupt\").\n" +
				"STATUS says how a run ended; EXIT is its process's status, - for none, and \"0 (after SIGTERM)\"\n" +
				"for a run stopped at its timeout or cancelled that then exited itself (--json: the number).\n\n" +
				"Example:\n   cruxprov receipts list --last 20\n   cruxprov receipts list --provider acme-echo --status error\n" +
				"   cruxprov receipts list --json | jq '.attempts[] | select(.outcome.status != \"ok\")'\n" +
				"   cruxprov receipts list --tolerate-corrupt",
			Flags: []cli.Flag{ledgerFlag, stateFlag, tolerateFlag,
				&cli.StringFlag{Name: "provider", Usage: "only the runs of provider `NAME`"},
				&cli.StringFlag{Name: "status", Usage: "only the runs that ended `S`: ok, error, timeout, output_limit, refused, or orphan (no outcome), or running (no outcome yet, its key's lock held)"},
				&cli.IntFlag{Name: "last", Usage: "only the last `N` runs (default: all)"},
			},
			Action: func(c *cli.Context) error { return receiptsAction(c, false) },
		}, {
			Name:      "show",
			Usage:     "show one run's receipt: what ran, how it ended, its error, stderr tail and egress",
			UsageText: "cruxprov receipts show ATTEMPT [--ledger PATH]… [--tolerate-corrupt]",
			Description: "ATTEMPT is the attempt id a run prints (att_…), or a prefix of it that only one run has (att_ may\n" +
				"be left out).\n" +
				"Strict, as scan is: a corrupt line refuses the ledger (ledger_corrupt); --tolerate-corrupt shows\n" +
				"the attempt from the valid rows and then each corrupt line (--json: \"corrupt\").\n\n" +
				"Example:\n   cruxprov receipts show <attempt-id>\n   cruxprov receipts show <attempt-id> --ledger worker1.jsonl --json\n" +
				"   cruxprov receipts show <attempt-id> --tolerate-corrupt",
			Flags:  []cli.Flag{ledgerFlag, stateFlag, tolerateFlag},
			Action: receiptsShow,
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
	keep, err := listFilter(c)
	if err != nil {
		return err
	}
	tolerate := c.Bool("tolerate-corrupt")
	paths, res, err := scanLedgers(c, tolerate)
	if err != nil {
		return err
	}
	if scan && !c.IsSet("ledger") {
		// This executor's own ledger, which its runs append to: one
		// they cannot open for writing refuses every run, and a scan
		// run as a health check said all was well. (A ledger named with
		// --ledger may be an archive, read-only on purpose.) One no run
		// has made yet (paths is empty then) is judged as the first run
		// would make it.
		own, err := ledgerPaths(c, true)
		if err != nil {
			return err
		}
		if err := receipts.Writable(own[0]); err != nil {
			if stateDirOnKernelFS(err) {
				return err
			}
			return withLedgerAdvice(err)
		}
		roomWarning(o, own[0])
	} else if scan {
		// A ledger named may be an archive, read-only on purpose, or the
		// one runs given --ledger append to: what would refuse them is
		// said, and the scan of a sound ledger still exits 0.
		for _, p := range paths {
			if err := receipts.Writable(p); err != nil {
				msg := err.Error()
				var r *refusal.Error
				if errors.As(err, &r) {
					msg = r.Message()
				}
				runs := "a run"
				if keyLocksError(err) {
					// The ledger takes runs; its key locks do not.
					runs = "a run with an idempotency key"
				}
				who := " by this user"
				if errors.As(err, new(*kernelfs.Error)) {
					who = "" // by no user: /sys, /proc
				}
				o.warn(fmt.Sprintf("receipts ledger %s is not writable%s: %s given --ledger %s is refused ledger_write_failed (%s)%s; an archive read-only on purpose needs nothing", p, who, runs, p, msg, unsaidLedgerAdvice(err)))
			}
			roomWarning(o, p)
		}
	}
	if keep != nil {
		res.Attempts, res.Orphans = keep(res.Attempts), keep(res.Orphans)
	}
	type row struct {
		Intent  receipts.Intent   `json:"intent"`
		Outcome *receipts.Outcome `json:"outcome"`
		Ledger  string            `json:"ledger"`
		Line    int               `json:"line"`
		// Running, for an attempt without an outcome: true where its
		// writer holds its key's lock (the text's RUNNING), false for an
		// ORPHAN. --json had no word of it: a running attempt was one
		// of "orphans", as a crashed one is.
		Running *bool `json:"running,omitempty"`
	}
	rows := func(as []receipts.Attempt) []row {
		out := make([]row, 0, len(as))
		for _, a := range as {
			r := row{Intent: a.Intent, Outcome: a.Outcome, Ledger: a.Path, Line: a.Line}
			if a.Outcome == nil {
				running := orphanStatus(a) == "RUNNING"
				r.Running = &running
			}
			out = append(out, r)
		}
		return out
	}
	v := map[string]any{"ledgers": paths, "attempts": rows(res.Attempts), "orphans": rows(res.Orphans)}
	if scan {
		// Empty lists are [] (not null), as attempts and orphans are.
		v["torn"], v["corrupt"], v["unmatched"], v["tails"] = nonNil(res.Torn), nonNil(res.Corrupt), nonNil(res.Unmatched), nonNil(res.Tails)
		v["repairs"] = nonNil(res.Repairs)
	} else if tolerate {
		// What the tolerance passed over, as scan gives it.
		v["corrupt"], v["repairs"] = nonNil(res.Corrupt), refusedRepairs(res)
	}
	return o.emit("cruxprov.receipts."+c.Command.Name+"/v1", v, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "STARTED\tATTEMPT\tPROVIDER\tENTRYPOINT\tSTATUS\tEXIT\tKEY")
		for _, a := range res.Attempts {
			st, code := orphanStatus(a), "-"
			if a.Outcome != nil {
				st, code = a.Outcome.Status, exitText(a.Outcome)
				if a.Outcome.Replayed {
					st += " (replayed)"
				}
				if a.Outcome.ErrorCode == invoke.CodeCancelled {
					// Its status is error: the row said why nowhere.
					st += " (cancelled)"
				}
			}
			// A replay ran nothing: no limit went unheld.
			if len(a.Intent.Unenforced) > 0 && (a.Outcome == nil || !a.Outcome.Replayed) {
				st += " (no " + oneLine(strings.Join(a.Intent.Unenforced, ", ")) + " limits)"
			}
			// Every string of a row is shown escaped: a ledger is not
			// trusted text (a provider run without the sandbox can write
			// it, docs/executor.md), and a provider name holding a
			// terminal's escapes acted on the operator's terminal.
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Intent.StartedAt.Format("2006-01-02T15:04:05Z07:00"), a.Intent.AttemptID, oneLine(a.Intent.Provider), oneLine(a.Intent.Entrypoint), st, code, dash(oneLine(a.Intent.IdempotencyKey)))
		}
		tw.Flush()
		// Each finding on a line of its own, where it is: the refusal of
		// a corrupt ledger says to list its bad lines with a tolerant
		// scan, which counted them and said nowhere which (only --json
		// had them).
		if !scan {
			// list --tolerate-corrupt: what it passed over (a strict list
			// refuses it), as scan prints it.
			corruptFindings(w, res)
			return
		}
		corruptLines(w, res)
		for _, u := range res.Unmatched {
			fmt.Fprintf(w, "outcome without its intent: %s: line %d at byte offset %d: attempt %s\n", oneLine(u.Path), u.Line, u.Off, oneLine(u.Value.AttemptID))
		}
		for _, tr := range res.Torn {
			fmt.Fprintf(w, "torn row: %s: line %d: a fragment of %d bytes (%s) from byte offset %d, quarantined %s\n",
				oneLine(tr.Path), tr.Line, len(tr.Bytes), tr.SHA256, tr.Offset, tr.RepairedAt.UTC().Format(time.RFC3339))
		}
		for _, f := range res.Tails {
			fmt.Fprintf(w, "unterminated tail: %s at byte offset %d (%d bytes, %s): the next writer quarantines it as a torn row\n",
				oneLine(f.Path), f.Offset, len(f.Bytes), f.SHA256)
		}
		for _, r := range res.Repairs {
			if r.Reason != "" {
				repairLine(w, r)
			} else {
				fmt.Fprintf(w, "repair journal %s: a repair a writer was killed in; the next run finishes it\n", r.Journal)
			}
		}
		repairs := ""
		if len(res.Repairs) > 0 {
			repairs = ", " + count(len(res.Repairs), "unfinished repair")
		}
		fmt.Fprintf(w, "%s, %s, %s, %s, %s, %s%s in %s\n", count(len(res.Attempts), "attempt"), count(len(res.Orphans), "orphaned intent"),
			count(len(res.Unmatched), "outcome without its intent", "outcomes without their intent"), count(len(res.Torn), "torn row"),
			count(len(res.Corrupt), "corrupt line"), count(len(res.Tails), "unterminated tail"), repairs, count(len(paths), "ledger"))
	})
}

// roomWarning warns when the file system of the ledger at path cannot
// take the next run's receipt (receipts.RoomOf): each such run is refused
// ledger_write_failed at its intent while the ledger itself is sound, and
// a scan run as the executor's health check exited 0 without a word.
func roomWarning(o *opts, path string) {
	if k, _ := kernelfs.Of(path); k != "" {
		// /sys, /proc: no room, but no one writes there anyway, which
		// Writable's refusal said ("0 B free: free space on it").
		return
	}
	r, err := receipts.RoomOf(path)
	switch {
	case err != nil:
		o.warn(fmt.Sprintf("cannot measure the free space for receipts ledger %s: %v", path, err))
	case r.FreeBytes < r.NeedBytes:
		o.warn(fmt.Sprintf("the file system of receipts ledger %s has %s free, less than the %s a run's intent and outcome may take: a run whose receipt does not fit is refused ledger_write_failed; free space on it (or give --ledger a path on another)",
			path, humanBytes(int64(r.FreeBytes)), sizeText(int64(r.NeedBytes))))
	case r.Short():
		o.warn(fmt.Sprintf("the file system of receipts ledger %s has %s free, fewer than the %d a run makes there (the ledger and its directories where no run has made them, its key locks %s.inflight): a run that cannot make them is refused ledger_write_failed; free inodes on it (or give --ledger a path on another)",
			path, count(r.FreeInodes, "inode"), r.NeedInodes, path))
	}
}

// corruptLines prints each corrupt line a tolerant scan found, on a line
// of its own (receipts scan, list and show --tolerate-corrupt).
func corruptLines(w io.Writer, res *receipts.ScanResult) {
	for _, cl := range res.Corrupt {
		// A second row of an attempt in another ledger given (also_in)
		// says where the first is in its reason.
		fmt.Fprintf(w, "corrupt line: %s\n", oneLine((&receipts.CorruptError{CorruptLine: cl}).Error()))
	}
}

// repairLine prints a repair journal the next run refuses (r.Reason).
func repairLine(w io.Writer, r receipts.Repair) {
	fmt.Fprintf(w, "repair journal %s: the next run refuses it: %s\n", r.Journal, oneLine(r.Reason))
}

// refusedRepairs are the repair journals the next run refuses, which a
// tolerant scan returns where a strict one refuses them ([] for none).
func refusedRepairs(res *receipts.ScanResult) []receipts.Repair {
	out := []receipts.Repair{}
	for _, r := range res.Repairs {
		if r.Reason != "" {
			out = append(out, r)
		}
	}
	return out
}

// corruptFindings prints what receipts list and show --tolerate-corrupt
// passed over, which a strict read refuses, as scan prints it: each
// corrupt line and each repair journal the next run refuses.
func corruptFindings(w io.Writer, res *receipts.ScanResult) {
	corruptLines(w, res)
	for _, r := range refusedRepairs(res) {
		repairLine(w, r)
	}
}

// distinctLedgers is paths without those that name a file an earlier
// one names (the same path twice, a link to it): the scan reads such a
// ledger once, and the count ended "in 2 ledgers", with both paths in
// --json's "ledgers", for one file. A path that cannot be looked at is
// kept, for the scan to say why.
func distinctLedgers(paths []string) []string {
	out := make([]string, 0, len(paths)) // [] in --json, not null
	var seen []os.FileInfo
next:
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			for _, o := range seen {
				if os.SameFile(o, st) {
					continue next
				}
			}
			seen = append(seen, st)
		}
		out = append(out, p)
	}
	return out
}

// scanLedgers scans the --ledger paths (default: this host and user's;
// none there yet is an empty result, a named one missing a usage error).
func scanLedgers(c *cli.Context, tolerate bool) ([]string, *receipts.ScanResult, error) {
	paths, err := ledgerPaths(c, true)
	if err != nil {
		return nil, nil, err
	}
	if !c.IsSet("ledger") {
		// No run has written the default ledger yet: nothing to list, not
		// an error (a --ledger that is not there still is one).
		_, err := os.Stat(paths[0])
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if d := filepath.Dir(filepath.Dir(paths[0])); c.IsSet("state-dir") {
				if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
					return nil, nil, usagef("no state directory at %s: check --state-dir", d)
				}
			}
			paths = []string{}
		case errors.Is(err, syscall.ENOTDIR):
			// A file where a directory of the ledger's path must be: the
			// --state-dir named a file (a ledger, say), or a file stands
			// in the state directory. It exited 1 with "receipts: open
			// …: not a directory", saying neither.
			if d := filepath.Dir(filepath.Dir(paths[0])); c.IsSet("state-dir") {
				if st, err := os.Stat(d); err == nil && !st.IsDir() {
					return nil, nil, usagef("--state-dir %s is a file, not a directory: name the executor's state directory (run --state-dir DIR keeps its ledger in DIR/receipts/), or a ledger file with --ledger", d)
				}
			}
			return nil, nil, ownLedgerPathBlocked(c, paths[0])
		case errors.Is(err, fs.ErrPermission):
			// A directory above this user's own ledger that is not its
			// own (XDG_STATE_HOME naming another user's): no run of
			// another user's is at stake.
			return nil, nil, fmt.Errorf("cannot reach this user's ledger %s: permission denied on a directory above it; set XDG_STATE_HOME (or HOME) to a directory of this user's, or name a ledger with --ledger", paths[0])
		}
	}
	paths = distinctLedgers(paths)
	res, err := receipts.Scan(c.Context, paths, receipts.ScanOptions{TolerateCorrupt: tolerate})
	var pe *fs.PathError
	var nr *receipts.NotRegularError
	switch {
	case errors.As(err, &nr) && c.IsSet("ledger"):
		// A directory (the state directory, say) or a FIFO named as a
		// ledger is the caller's mistake, as a path that is not there
		// is: it exited 1 with "receipts: D is not a regular file".
		return nil, nil, ledgerNotAFile(nr, "receipts "+c.Command.Name+", without --ledger, reads")
	case errors.As(err, &nr):
		// This host and user's own, from --state-dir or $XDG_STATE_HOME:
		// every run is refused for it, as this says (it exited 1 with
		// "receipts: P is not a regular file").
		return nil, nil, ownLedgerNotAFile(c, nr)
	case errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist):
		return nil, nil, usagef("no ledger at %s: check the path (cruxprov receipts %s, without --ledger, reads this host and user's)", pe.Path, c.Command.Name)
	case errors.As(err, &pe) && errors.Is(err, fs.ErrPermission):
		return nil, nil, ledgerDenied(pe.Path)
	case err != nil:
		return nil, nil, err
	}
	return paths, res, nil
}

// listFilter is receipts list's --provider, --status and --last as one
// filter (nil: none given).
func listFilter(c *cli.Context) (func([]receipts.Attempt) []receipts.Attempt, error) {
	if c.Command.Name != "list" || (!c.IsSet("provider") && !c.IsSet("status") && !c.IsSet("last")) {
		return nil, nil
	}
	provider, status, last := c.String("provider"), c.String("status"), c.Int("last")
	switch status {
	case "", receipts.StatusOK, receipts.StatusError, receipts.StatusTimeout, receipts.StatusOutputLimit, receipts.StatusRefused, "orphan", "running":
	default:
		return nil, usagef("--status %q: one of ok, error, timeout, output_limit, refused, orphan, running", status)
	}
	if c.IsSet("last") && last < 1 {
		return nil, usagef("--last must be 1 or more")
	}
	return func(as []receipts.Attempt) []receipts.Attempt {
		out := make([]receipts.Attempt, 0, len(as))
		for _, a := range as {
			st := "orphan"
			if a.Outcome != nil {
				st = a.Outcome.Status
			} else if status != "" && orphanStatus(a) == "RUNNING" {
				st = "running"
			}
			if (provider == "" || a.Intent.Provider == provider) && (status == "" || st == status) {
				out = append(out, a)
			}
		}
		if last > 0 && len(out) > last {
			out = out[len(out)-last:]
		}
		return out
	}, nil
}

// receiptsShow prints one attempt's intent and outcome.
func receiptsShow(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() != 1 || c.Args().First() == "" {
		return usagef("receipts show takes one ATTEMPT (an attempt id, or a prefix of one)")
	}
	id := c.Args().First()
	tolerate := c.Bool("tolerate-corrupt")
	paths, res, err := scanLedgers(c, tolerate)
	if err != nil {
		return err
	}
	find := func(id string) []receipts.Attempt {
		var found []receipts.Attempt
		for _, a := range res.Attempts {
			if a.Intent.AttemptID == id {
				return []receipts.Attempt{a}
			}
			if strings.HasPrefix(a.Intent.AttemptID, id) {
				found = append(found, a)
			}
		}
		return found
	}
	found := find(id)
	if len(found) == 0 && !strings.HasPrefix(id, "att_") {
		// The id's hex without its att_ (copied from a log that cut it,
		// or typed from the digits): it found nothing, "no attempt
		// 1870d3fe…", beside the attempt att_1870d3fe… in the ledger.
		found = find("att_" + id)
	}
	// The list it advises reads the ledgers this show read: a bare
	// `cruxprov receipts list` after `show --ledger P` (or --state-dir D)
	// listed this host and user's own ledger, where the attempt was never
	// looked for.
	where, list, more := "this host and user's ledger", "cruxprov receipts list", " (--ledger names another ledger)"
	switch {
	case c.IsSet("ledger"):
		where, more = strings.Join(paths, ", "), ""
		for _, p := range c.StringSlice("ledger") {
			list += " --ledger " + shellQuote(p)
		}
	case c.IsSet("state-dir"):
		where, more = "the ledger of --state-dir "+c.String("state-dir"), ""
		list += " --state-dir " + shellQuote(c.String("state-dir"))
	}
	if tolerate {
		list += " --tolerate-corrupt"
	}
	passed := "" // the corrupt lines --tolerate-corrupt passed over, of which one may be its intent
	if n := len(res.Corrupt); n > 0 {
		passed = fmt.Sprintf(" (whose %s passed over may have held it)", count(n, "corrupt line"))
	}
	switch {
	case len(found) == 0:
		return fmt.Errorf("no attempt %s in %s%s; %s shows the attempts%s", oneLine(id), where, passed, list, more)
	case len(found) > 1:
		return usagef("%s is the start of %d attempts (%s, …): give more of it", id, len(found), found[0].Intent.AttemptID)
	}
	a := found[0]
	v := map[string]any{"intent": a.Intent, "outcome": a.Outcome, "ledger": a.Path, "line": a.Line}
	if a.Outcome == nil {
		// RUNNING or ORPHAN, as the text says it (list's rows too).
		v["running"] = orphanStatus(a) == "RUNNING"
	}
	if tolerate {
		// What the tolerance passed over, as scan gives it: a corrupt
		// line may be this attempt's outcome.
		v["corrupt"], v["repairs"] = nonNil(res.Corrupt), refusedRepairs(res)
	}
	return o.emit("cruxprov.receipts.show/v1", v, func(w io.Writer) {
		defer corruptFindings(w, res)
		in := a.Intent
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
		row("attempt", "%s (%s, line %d)", in.AttemptID, a.Path, a.Line)
		// Escaped, as list shows them: a ledger is not trusted text.
		row("run", "%s %s, backend %s, platform %s", oneLine(in.Provider), oneLine(in.Entrypoint), oneLine(in.Backend), oneLine(in.Platform))
		// A replay ran nothing: no limit went unheld.
		if len(in.Unenforced) > 0 && (a.Outcome == nil || !a.Outcome.Replayed) {
			how := "" // a local run without its namespaces was not asked to be
			if in.Backend == "container" {
				how = " (--unenforced-limits)"
			}
			row("limits", "ran without the %s limits%s", oneLine(strings.Join(in.Unenforced, ", ")), how)
		}
		row("started", "%s", in.StartedAt.Format(time.RFC3339Nano))
		if in.IdempotencyKey != "" {
			row("idempotency key", "%s", oneLine(in.IdempotencyKey))
		}
		row("implementation", "%s", in.ImplementationDigest)
		row("materialization", "%s", in.MaterializationDigest)
		if in.SealDigest != "" {
			row("seal", "%s", in.SealDigest)
		}
		row("input", "%s", in.InputDigest)
		row("tool", "%s, protocol %d", oneLine(in.Tool), in.ProtocolVersion)
		out := a.Outcome
		if out == nil {
			held, herr := receipts.KeyHeld(a.Path, in.IdempotencyKey)
			switch {
			case herr == nil && held:
				row("status", "RUNNING: no outcome yet; its writer holds the lock of its idempotency key, so the run is still going")
			case herr == nil && in.IdempotencyKey != "":
				// Its writer would hold the key's lock while it ran: it
				// said "or the run is still going" of a run that is not.
				row("status", "ORPHAN: no outcome; the executor died between intent and outcome (nobody holds its idempotency key's lock, so it is not running): it may have run (delivery is at-least-once)")
			case herr == nil:
				row("status", "ORPHAN: no outcome (the executor died between intent and outcome, or the run is still going: a run without an idempotency key holds no lock that tells)")
			default:
				row("status", "ORPHAN: no outcome (the executor died between intent and outcome, or the run is still going: its idempotency key's lock could not be looked at: %s)", oneLine(herr.Error()))
			}
			tw.Flush()
			return
		}
		st := out.Status
		if out.Replayed {
			st += " (replayed: the recorded ok outcome of " + out.ReplayOf + ")"
		}
		exit := "exit " + exitText(out)
		if out.ExitCode == -1 {
			exit = "no exit status"
		}
		row("status", "%s, %s, after %s", st, exit, out.EndedAt.Sub(in.StartedAt).Round(time.Millisecond))
		row("ended", "%s", out.EndedAt.Format(time.RFC3339Nano))
		row("output", "%d bytes on stdout, %d on stderr", out.StdoutBytes, out.StderrBytes)
		if out.ResultDigest != "" {
			row("result", "%s (the ledger keeps the digest, not the value)", out.ResultDigest)
		}
		if out.ErrorCode != "" || out.ErrorMessage != "" {
			// A refusal's message is the refusal's own line ("code: detail").
			row("error", "%s: %s", oneLine(out.ErrorCode), oneLine(strings.TrimPrefix(out.ErrorMessage, out.ErrorCode+": ")))
		}
		row("egress declared", "%s", dash(oneLine(strings.Join(out.EgressDeclared, " "))))
		obs := dash(oneLine(strings.Join(out.EgressObserved, " ")))
		if out.EgressObservedDropped > 0 {
			obs += fmt.Sprintf(" (and %d more the receipt does not keep)", out.EgressObservedDropped)
		}
		row("egress observed", "%s", obs)
		tw.Flush()
		if out.StderrTail != "" {
			fmt.Fprintln(w, "stderr (its end, secrets redacted):")
			for _, l := range strings.Split(strings.TrimRight(out.StderrTail, "\n"), "\n") {
				fmt.Fprintf(w, "  %s\n", escapeControls(l))
			}
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

// orphanStatus is what list and show call an attempt without an outcome:
// RUNNING when it has an idempotency key whose lock its writer holds
// (receipts.KeyHeld: it is running, as Begin would refuse a duplicate of
// it), else ORPHAN. A running attempt was listed ORPHAN, which the scan's
// help said to reconcile as a crash. One without a key takes no lock and
// cannot be told apart: ORPHAN.
func orphanStatus(a receipts.Attempt) string {
	if held, err := receipts.KeyHeld(a.Path, a.Intent.IdempotencyKey); err == nil && held {
		return "RUNNING"
	}
	return "ORPHAN"
}

// exitText is an outcome's exit code as a person reads it: "-" for the
// ledger's -1, a run that has none (refused before anything ran, or a
// container removed with its status: docs/receipts.md); and "0 (after
// SIGTERM)" for a status the process chose itself once the executor had
// stopped it (a timeout, or a cancelled run, whose harness caught the
// SIGTERM and exited): the receipt keeps the process's own status
// (docs/receipts.md, "A timeout's exit code"), and a bare 0 in EXIT read
// as a run that ended well. 128+N, a signal's death, is shown as it is.
// --json keeps the ledger's number.
func exitText(o *receipts.Outcome) string {
	code := o.ExitCode
	if code == -1 {
		return "-"
	}
	stopped := o.Status == receipts.StatusTimeout || o.ErrorCode == invoke.CodeCancelled
	if stopped && code >= 0 && !diedOfSignal(code) {
		return strconv.Itoa(code) + " (after SIGTERM)"
	}
	return strconv.Itoa(code)
}

// diedOfSignal reports an exit status that is 128+N for a signal N, as
// every backend records a process a signal killed (docs/executor.md):
// the rule invoke applies to the timeout's message.
func diedOfSignal(code int) bool {
	return code > 128 && code <= 128+64 && unix.SignalName(syscall.Signal(code-128)) != ""
}

// ledgerNotAFile is the usage error of a --ledger that is no regular
// file (a directory, a FIFO, a socket, a device), saying which;
// instead is what the command does without --ledger ("run, without
// --ledger, writes"). A FIFO was "not a regular file".
func ledgerNotAFile(nr *receipts.NotRegularError, instead string) error {
	what := nr.Kind()
	return usagef("--ledger %s is %s: name a ledger file (cruxprov %s this host and user's)", nr.Path, what, instead)
}

// ownLedgerNotAFile is the refusal of this host and user's ledger, the
// path run and receipts take from --state-dir DIR (DIR/receipts/…) or
// $XDG_STATE_HOME, when it names no regular file (a directory, a FIFO,
// a socket, a device: said which):
// the caller did not name that path, so it is no usage error but the
// state every run is refused for, ledger_write_failed, before anything
// runs, naming the path, where it came from and what to do. It was
// refused with "receipts: P is not a regular file" and no next step.
// The mv is its remedy, move_away, rendered as the "to fix:" line and
// carried by --json: it was only in the detail's words, where a pipeline
// reading the remedy found none.
func ownLedgerNotAFile(c *cli.Context, nr *receipts.NotRegularError) error {
	what := nr.Kind()
	if what != "not a regular file" {
		what += ", not a ledger file"
	}
	from := "the default, under $XDG_STATE_HOME or ~/.local/state"
	if d := c.String("state-dir"); d != "" {
		from = "from --state-dir " + d
	}
	return refusal.New(refusal.LedgerWriteFailed, "this host and user's receipts ledger %s (%s) is %s: move it away, and the next run makes a new ledger there; or name a ledger file with --ledger",
		nr.Path, from, what).WithRemedy(refusal.ActionMoveAway, nr.Path)
}

// ownLedgerPathBlocked refuses this host and user's own ledger at path
// when a file stands where a directory of its path must be (in the state
// directory, say, a file named receipts): every run is refused there as
// well. It names that file and what to do, as ownLedgerNotAFile does for
// the ledger's own name. A file at or above the state directory itself
// (--state-dir naming a path under a regular file) is no file to move
// away (it was advised to: mv /etc/hostname …): the state directory
// cannot be made there, which says so, with the remedy set_state_dir.
// Within the state directory, the file is moved away (its floors stay:
// another state directory would start them afresh).
func ownLedgerPathBlocked(c *cli.Context, path string) error {
	at := deniedat.NotDir(filepath.Dir(path))
	if at == "" {
		at = filepath.Dir(path)
	}
	from := "the default, under $XDG_STATE_HOME or ~/.local/state"
	if d := c.String("state-dir"); d != "" {
		from = "from --state-dir " + d
	}
	if sd := filepath.Dir(filepath.Dir(path)); !strings.HasPrefix(at, sd+string(filepath.Separator)) {
		return refusal.New(refusal.LedgerWriteFailed, "this host and user's receipts ledger %s (%s) cannot be made: its state directory %s cannot be made, %s on its path being a file, not a directory: give --state-dir a directory, or one that can be made; or name a ledger file with --ledger",
			path, from, sd, at).WithRemedy(refusal.ActionSetStateDir, at)
	}
	return refusal.New(refusal.LedgerWriteFailed, "this host and user's receipts ledger %s (%s) cannot be made: %s is a file where a directory of its path must be: move it away, and the next run makes a new ledger there; or name a ledger file with --ledger",
		path, from, at).WithRemedy(refusal.ActionMoveAway, at)
}

// ledgerDenied is the failure of a scan denied permission on path (a
// ledger, or its repair journal): it names the path that denied it, the
// first directory on the way this user may not enter, else the file,
// and what to do, which depends on whose it is. It blamed the ledger
// whatever denied it (its directory of 0700, the journal beside it),
// and sent a user denied its own journal to "the user whose runs wrote
// it".
func ledgerDenied(path string) error {
	what := "the ledger " + path
	if strings.HasSuffix(path, ".repair") {
		what = "the repair journal " + path
	}
	d := deniedat.Find(path)
	if d.Own() {
		return fmt.Errorf("cannot read %s: permission denied on %s, which is this user's own: give it read access (chmod u+rX %s)", what, d.At, shellQuote(d.At))
	}
	return fmt.Errorf("cannot read %s: permission denied on %s%s; run as the user whose runs wrote it, or have it give read access to %s", what, d.At, d.OwnerNote(), d.At)
}
