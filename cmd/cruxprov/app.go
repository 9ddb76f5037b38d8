package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/store"
)

// Exit codes (DESIGN §2).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 64
	exitRefused = 78
)

// commands is filled by register() from each cmd_*.go file's init, so that
// every command lives in its own file.
var commands []*cli.Command

func register(c *cli.Command) { commands = append(commands, c) }

// usageError is a mistake in the command line: exit 64.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// reportedError is a failure whose output the command already wrote (a
// --json document carrying "refused", say): run() adds nothing on stdout,
// prints the one stderr line, and exits with code.
type reportedError struct {
	code int
	err  error
}

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

var globalFlags = []cli.Flag{
	&cli.StringFlag{Name: "home", Usage: "the store `DIR` (default ~/.local/share/cruxprov)", EnvVars: []string{"CRUXPROV_HOME"}},
	&cli.BoolFlag{Name: "json", Usage: "print one JSON document on stdout and nothing else there"},
	&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only results and errors"},
	&cli.BoolFlag{Name: "no-progress", Usage: "never draw progress bars (they only appear on a TTY anyway)"},
}

// flagString is urfave/cli's flag line without a "(default: …)" that
// says nothing (false, or any on a required flag) or that the usage text
// already gave in its own words ("(default: the CPUs) (default: 0)").
func flagString(f cli.Flag) string {
	s := defaultFlagStringer(f)
	s = strings.TrimSuffix(s, " (default: false)")
	// A required flag has no default ("--threshold K … (default: 0)").
	if _, ok := requiredFlags.Load(f); ok {
		if i := strings.LastIndex(s, " (default: "); i >= 0 && strings.HasSuffix(s, ")") {
			s = s[:i]
		}
	}
	if strings.Count(s, "(default") > 1 {
		if i := strings.LastIndex(s, " (default: "); i >= 0 {
			if j := strings.Index(s[i:], ")"); j >= 0 {
				s = s[:i] + s[i+j+1:]
			}
		}
	}
	return s
}

var defaultFlagStringer = cli.FlagStringer

// requiredFlags holds the flags requireFlags checks itself (their
// Required is cleared, so the help cannot tell them from the others).
var requiredFlags sync.Map

func init() { cli.FlagStringer = flagString }

func newApp(stdout, stderr io.Writer) *cli.App {
	cmds := append([]*cli.Command(nil), commands...)
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	// No "help" subcommand anywhere: urfave/cli lists one in every group's
	// help, and the command line (reorder.go) reads help as --help only,
	// so "cruxprov env help create" was an unknown command.
	var hide func([]*cli.Command)
	hide = func(cs []*cli.Command) {
		for _, c := range cs {
			c.HideHelpCommand = true
			hide(c.Subcommands)
		}
	}
	hide(cmds)
	app := &cli.App{
		Name:  "cruxprov",
		Usage: "govern third-party Python providers on exact, approved pins",
		Description: "Resolve a provider's embedded pylock.toml for an explicit platform, fetch each wheel\n" +
			"from a pinned index, materialize a sealed environment, propose it as a change-set an\n" +
			"operator approves with a signature, and verify the accepted pin before every run.\n\n" +
			"Exit codes: 0 ok, 1 failure, 64 usage error, 78 refused (see docs/refusals.md).\n\n" +
			"Example:\n   cruxprov install provider.whl --platform host --index http://127.0.0.1:8080/simple/\n   cruxprov verify acme-echo --deep",
		Flags:                  globalFlags,
		Commands:               cmds,
		Writer:                 stdout,
		ErrWriter:              stderr,
		Metadata:               map[string]any{},
		HideHelpCommand:        true,
		UseShortOptionHandling: false,
		ExitErrHandler:         func(*cli.Context, error) {}, // run() maps errors to exit codes
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			// The flag package names a flag with one dash; the help and
			// the docs give two.
			msg := strings.Replace(err.Error(), " for flag -", " for flag --", 1)
			if strings.HasPrefix(msg, "invalid boolean value ") {
				// A boolean flag's says "for -deep", without "flag".
				msg = strings.Replace(msg, " for -", " for flag --", 1)
			}
			if strings.HasSuffix(msg, ": parse error") {
				// flag's "parse error" says nothing of what it wants.
				flags := globalFlags // the root's own
				if c != nil && c.Command != nil && len(c.Command.Flags) > 0 {
					flags = c.Command.Flags
				}
				msg += valueHint(msg, flags)
			}
			return &usageError{msg}
		},
	}
	var setUsage func([]*cli.Command)
	setUsage = func(cs []*cli.Command) {
		for _, c := range cs {
			c.OnUsageError = app.OnUsageError
			requireFlags(c)
			setUsage(c.Subcommands)
		}
	}
	setUsage(cmds)
	return app
}

// requireFlags makes c's required flags a usage error (exit 64, one line,
// the JSON error document with --json) checked by its action: the
// library's own check exits 1 and prints the help on stdout.
func requireFlags(c *cli.Command) {
	var names []string
	for _, f := range c.Flags {
		if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
			switch f := f.(type) {
			case *cli.StringFlag:
				f.Required = false
			case *cli.IntFlag:
				f.Required = false
			default:
				panic(fmt.Sprintf("requireFlags: %T", f)) // a programming error, caught by every test
			}
			names = append(names, f.Names()[0])
			requiredFlags.Store(f, true)
		}
	}
	if len(names) == 0 || c.Action == nil {
		return
	}
	action := c.Action
	c.Action = func(ctx *cli.Context) error {
		for _, n := range names {
			if !ctx.IsSet(n) {
				return usagef("--%s is required", n)
			}
		}
		return action(ctx)
	}
}

// signalGrace bounds how long a command whose child process failed waits
// for a signal that may be why (awaitSignal).
const signalGrace = 250 * time.Millisecond

// awaitSignal waits up to signalGrace for ctx to be cancelled when err comes
// from a child process that failed (the interpreter probe, the bytecode
// compilers: materialize_failed). Ctrl-C signals the whole process group:
// the child dies of it, and its failure can come back before the signal has
// cancelled ctx (a goroutine does that), so a Ctrl-C at the probe was
// refused materialize_failed ("name a working CPython interpreter", exit 78)
// instead of reported as the interruption it was. Only failing commands of
// that kind wait, and only when no signal came.
func awaitSignal(ctx context.Context, err error) {
	var ee *exec.ExitError
	if ctx.Err() != nil || !errors.As(err, &ee) {
		return
	}
	// Only a child that a terminal's signal killed: any other failure
	// is reported at once.
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT && ws.Signal() != syscall.SIGTERM && ws.Signal() != syscall.SIGHUP && ws.Signal() != syscall.SIGQUIT {
		return
	}
	t := time.NewTimer(signalGrace)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// buildsTree says whether the command at path writes an env or image tree,
// the commands hugeHeap is for.
func buildsTree(path []string) bool {
	switch strings.Join(path, " ") {
	case "env create", "install", "image build":
		return true
	}
	return false
}

// run parses args (after reordering them, DESIGN §13), runs the command and
// maps its error to an exit code, printing the one-line error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	out := &errWriter{w: stdout}
	app := newApp(out, stderr)
	reordered, path, err := reorder(app, args)
	if err == nil && buildsTree(path) && !helpAsked(reordered) {
		hugeHeap()
	}
	asJSON := hasFlag(args, "json")
	schema := "cruxprov.error/v1"
	if len(path) > 0 {
		schema = schemaName(path...)
	}
	ir := interruptsOf(ctx)
	if asJSON {
		ir.expect(map[string]any{"schema": schema, "error": map[string]string{"kind": "interrupted", "message": forcedMessage}})
	}
	if err == nil && ctx.Err() != nil {
		// A signal came while the process started (it is caught from the
		// package inits on): the command does nothing, and says it was
		// interrupted. Run, one that never looks at its context (version,
		// a list) went on as if no signal had come.
		err = ctx.Err()
	} else if err == nil && asJSON && helpAsked(reordered) {
		// --help --json: the help text inside the one document stdout
		// may carry, not the text alone (DESIGN §13).
		var help bytes.Buffer
		app.Writer = &help
		if err = app.RunContext(ctx, reordered); err == nil {
			writeJSON(out, map[string]any{"schema": "cruxprov.help/v1", "command": strings.Join(path, " "), "help": help.String()})
		}
	} else if err == nil {
		err = app.RunContext(ctx, reordered)
	}
	ir.settle()
	if err == nil && out.err != nil {
		// The result is lost (stdout on a full disk, say): not a success.
		fmt.Fprintf(stderr, "error: cannot write the output: %s; the command's work is done, run it again with stdout where it can be written\n", oneLine(out.err.Error()))
		return exitFailure
	}
	if err == nil {
		return exitOK
	}
	var r *refusal.Error
	var u *usageError
	var done *reportedError
	awaitSignal(ctx, err)
	if ctx.Err() != nil && !errors.As(err, &u) && !errors.As(err, &done) {
		// A signal stopped the command: whatever error the work returned
		// (context canceled, a killed probe) is a consequence of it.
		msg := interruptedMessage(path, err)
		fmt.Fprintf(stderr, "error: %s\n", msg)
		if asJSON {
			writeJSON(stdout, failedDoc(app, path, map[string]any{"schema": schema, "error": map[string]string{"kind": "interrupted", "message": msg}}))
		}
		return exitFailure
	}
	switch {
	case errors.As(err, &done):
		if errors.As(err, &r) {
			// The document on stdout was written already (with the
			// remedy); the line says what to do next as any refusal's.
			line := oneLine(r.Error())
			if _, cmdline, or := renderRemedies(refusal.RemedyOf(err), args); cmdline != "" {
				line += "; to fix: " + cmdline + or
			}
			fmt.Fprintf(stderr, "refused: %s\n", line)
		} else {
			fmt.Fprintf(stderr, "error: %s\n", oneLine(err.Error()))
		}
		return done.code
	case errors.As(err, &r):
		line := oneLine(r.Error())
		var adv *withAdvice
		detail := oneLine(r.Message())
		if errors.As(err, &adv) {
			// The words first, then the command: a ledger's advice came
			// after "; to fix: …" where its refusal had a remedy too.
			line += adv.advice
			detail += adv.advice
		}
		rem, cmdline, or := renderRemedies(refusal.RemedyOf(err), args)
		if cmdline != "" {
			line += "; to fix: " + cmdline + or
		}
		var rec *withReceipt
		if errors.As(err, &rec) {
			line += "; its receipt: " + rec.show
		}
		fmt.Fprintf(stderr, "refused: %s\n", line)
		if asJSON {
			ref := map[string]any{"code": string(r.Code), "detail": detail}
			if cmdline != "" {
				ref["remedy"] = remedyJSON(rem, cmdline, args)
			}
			if rec != nil {
				ref["attempt_id"], ref["ledger"] = rec.attempt, rec.ledger
			}
			writeJSON(stdout, failedDoc(app, path, map[string]any{"schema": schema, "refused": ref}))
		}
		return exitRefused
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "usage: %s (see 'cruxprov %s--help')\n", oneLine(u.msg), strings.Join(append(path, ""), " "))
		if asJSON {
			writeJSON(stdout, failedDoc(app, path, map[string]any{"schema": schema, "error": map[string]string{"kind": "usage", "message": oneLine(u.msg)}}))
		}
		return exitUsage
	default:
		fmt.Fprintf(stderr, "error: %s\n", oneLine(err.Error()))
		if asJSON {
			writeJSON(stdout, failedDoc(app, path, map[string]any{"schema": schema, "error": map[string]string{"kind": "failure", "message": oneLine(err.Error())}}))
		}
		return exitFailure
	}
}

// helpAsked reports whether reordered (reorder's argv) asks for a
// command's help: reorder ends it with --help then, with no positional
// arguments (so no "--").
func helpAsked(reordered []string) bool {
	return len(reordered) > 0 && reordered[len(reordered)-1] == "--help" && !slices.Contains(reordered, "--")
}

// maxInputFile bounds a text file named on the command line (a lock, a
// manifest, a platform, a CA bundle).
const maxInputFile = 64 << 20

// openInputFile opens a file named on the command line for reading. It
// must be a regular file: a FIFO would block and a device never end,
// SIGINT or not.
func openInputFile(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	// O_NONBLOCK and a second look: a FIFO put there since must not
	// block the command either.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

// readInputFile reads a file named on the command line, a regular file
// (openInputFile) of at most max bytes (no limit when max <= 0).
func readInputFile(path string, max int64) ([]byte, error) {
	b, _, err := readInputFileInfo(path, max)
	return b, err
}

// readInputFileInfo is readInputFile, and the file's stat as it was
// opened and read (its owner and mode: a key file's).
func readInputFileInfo(path string, max int64) ([]byte, fs.FileInfo, error) {
	f, err := openInputFile(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if max > 0 && st.Size() > max {
		return nil, nil, &tooLargeError{path, max}
	}
	var r io.Reader = f
	if max > 0 {
		r = io.LimitReader(f, max+1)
	}
	b, err := io.ReadAll(r)
	if err == nil && max > 0 && int64(len(b)) > max {
		err = &tooLargeError{path, max}
	}
	return b, st, err
}

// tooLargeError is a file named on the command line that is larger than
// its command takes.
type tooLargeError struct {
	path string
	max  int64
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s", e.path, sizeText(e.max))
}

// valueHint is what a flag's parse error lacks: the kind of value the
// flag takes (a duration, a whole number, true or false), from its type
// among flags, those of the command whose flags were parsed ("" for a
// flag of no such kind). "invalid value \"x\" for flag --jobs: parse
// error" said nothing of what was wanted.
func valueHint(msg string, flags []cli.Flag) string {
	_, rest, ok := strings.Cut(msg, " for flag --")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, ":")
	i := slices.IndexFunc(flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), name) })
	if i < 0 {
		return ""
	}
	switch flags[i].(type) {
	case *cli.DurationFlag:
		return ": give a duration with its unit, for example 30s, 15m or 720h"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return ": give a whole number"
	case *cli.BoolFlag:
		return ": give true or false, or the flag alone (--" + name + ")"
	}
	return ""
}

// sizeText is a limit in MiB or KiB, whichever is whole.
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// errWriter remembers the first error writing to w.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// oneLine is s as one line for a terminal: each run of white space is one
// space, and what a terminal would act on rather than show (C0 and C1
// controls, DEL, Unicode's bidirectional controls, bytes that are not
// UTF-8) is written as an escape (\x1b, \u202e). Error details carry
// what others wrote (a provider's error message, a file name), which must
// not move the cursor, recolour the screen or reorder the line.
func oneLine(s string) string {
	return escapeControls(strings.Join(strings.Fields(s), " "))
}

// escapeControls is s with what a terminal would act on written as
// escapes, as oneLine does, keeping its spaces and tabs (a line of a
// provider's stderr keeps its indentation).
func escapeControls(s string) string {
	clean := true
	for _, r := range s {
		if !shown(r) && r != '\t' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case shown(r) || r == '\t':
			b.WriteString(s[i : i+n])
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

// shown says whether a terminal shows r as itself.
func shown(r rune) bool {
	return r != utf8.RuneError && !unicode.IsControl(r) && !unicode.Is(unicode.Bidi_Control, r)
}

func hasFlag(args []string, name string) bool {
	for _, a := range args[1:] {
		if a == "--" {
			return false
		}
		if a == "--"+name || a == "-"+name {
			return true
		}
		for _, p := range []string{"--" + name + "=", "-" + name + "="} {
			if v, ok := strings.CutPrefix(a, p); ok {
				b, err := strconv.ParseBool(v)
				return err == nil && b
			}
		}
	}
	return false
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// schemaMajors holds the commands whose --json document is past v1
// (DESIGN §13: "cruxprov.<command>/v1"), by command path. A document's
// major moves when a key a consumer reads is renamed or removed, so that
// a pipeline checking "schema" sees the change instead of a missing key
// (or a value of another form):
//   - install: its change-set moved from "changeset" to "changeSet", the
//     key every other command that proposes or approves one uses;
//   - index.build: its files' sha256 and metadata_sha256 are sha256:<hex>,
//     as every other document writes a sha256, not bare hex.
var schemaMajors = map[string]int{"install": 2, "index.build": 2}

// schemaName is the schema of the --json document (result, refusal or
// error alike) of the command at path: "cruxprov.env.create/v1".
func schemaName(path ...string) string {
	p := strings.Join(path, ".")
	major := 1
	if m, ok := schemaMajors[p]; ok {
		major = m
	}
	return fmt.Sprintf("cruxprov.%s/v%d", p, major)
}

// opts is what every command reads from the global flags.
type opts struct {
	home       string
	json       bool
	quiet      bool
	noProgress bool
	stdout     io.Writer
	stderr     io.Writer
	bars       atomic.Pointer[progress] // the progress bars on stderr, while they are drawn

	mu       sync.Mutex
	warnings []string // what warn said, for the --json document's "warnings"

	homeGiven bool // --home (or CRUXPROV_HOME) named the store
}

// homeFlag is " --home DIR" when the store was named (--home or
// CRUXPROV_HOME), for a next command the output advises: run as printed
// in another shell, it acts on this store, not the default one.
func (o *opts) homeFlag() string {
	if !o.homeGiven {
		return ""
	}
	return " --home " + shellQuote(o.home)
}

// homeArgs is a command line naming the store this command acts on as
// it was given (--home, when given), for renderRemedy to render a remedy
// met outside a refusal (a note) for that store.
func (o *opts) homeArgs() []string {
	if !o.homeGiven {
		return []string{"cruxprov"}
	}
	return []string{"cruxprov", "--home", o.home}
}

// line prints s on stderr: above the progress bars while they are drawn
// (a line written under them would be drawn over). The bars' container
// writes such a line only when it draws a bar: while it draws none (a
// warm store, nothing to download) the line goes to stderr itself; it
// was dropped.
func (o *opts) line(s string) {
	if pr := o.bars.Load(); pr != nil && pr.drawing() {
		if _, err := fmt.Fprintln(pr.p, s); err == nil {
			return
		}
	}
	fmt.Fprintln(o.stderr, s)
}

// optsKey is the cli.App Metadata key under which globals keeps every
// *opts it makes.
const optsKey = "cruxprov.opts"

// failedDoc is a --json document run writes for a command that failed
// (refused, a usage error, a failure): with the warnings said before it,
// which --json kept off stderr and the command's own document would have
// carried, when there are any, and always ([] when none) for the
// commands whose documents always carry theirs (inspect, lock resolve:
// a refused inspect --json had none, a refused lock resolve --json
// "warnings": []).
func failedDoc(app *cli.App, path []string, doc map[string]any) map[string]any {
	ws := []string{}
	all, _ := app.Metadata[optsKey].([]*opts)
	for _, o := range all {
		o.mu.Lock()
		ws = append(ws, o.warnings...)
		o.mu.Unlock()
	}
	switch strings.Join(path, " ") {
	case "inspect", "lock resolve":
		doc["warnings"] = ws
	default:
		if len(ws) > 0 {
			doc["warnings"] = ws
		}
	}
	return doc
}

func globals(c *cli.Context) (*opts, error) {
	o := &opts{
		home:       c.String("home"),
		homeGiven:  c.IsSet("home"),
		json:       c.Bool("json"),
		quiet:      c.Bool("quiet"),
		noProgress: c.Bool("no-progress"),
		stdout:     c.App.Writer,
		stderr:     c.App.ErrWriter,
	}
	if m := c.App.Metadata; m != nil {
		// run finds what warn said here, for a document it writes itself.
		prev, _ := m[optsKey].([]*opts)
		m[optsKey] = append(prev, o)
	}
	if o.home == "" {
		h, err := defaultHome()
		if err != nil {
			return nil, usagef("no --home and no home directory: %v", err)
		}
		o.home = h
	}
	return o, nil
}

// defaultHome is the store a command uses where neither --home nor
// CRUXPROV_HOME names one.
func defaultHome() (string, error) {
	h, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(h, ".local", "share", "cruxprov"), nil
}

// openStore opens the store at --home, saying what to do when it cannot.
func (o *opts) openStore() (*store.Store, error) {
	st, err := store.Open(o.home)
	if err != nil {
		return nil, fmt.Errorf("cannot use %s as the store: %w; give --home (or CRUXPROV_HOME) a directory you can write", o.home, err)
	}
	o.sayWaits(st)
	return st, nil
}

// notAStoreToMake refuses fetch and env create a store in home when it
// is a directory of other things that holds no store (no .lock,
// config.yaml or directory of the layout): a --home mistyped as the
// wheels' directory, or the user's own home, was filled with a store's
// layout (.lock, .gate, blobs/, envs/, oci/, receipts/, registry/, tmp/),
// even by an --offline fetch then refused offline_miss, as gc did before
// it asked (noStore). A directory that is not there, or is empty (but for
// lost+found, a file system made for the store), is made one. The
// registry's writers (install, key trust, interface register) still make
// a store beside other files: operators keep their keys and schemas in
// the store's directory.
func notAStoreToMake(home string) error {
	if otherThings(home) {
		return fmt.Errorf("cannot use %s as the store: the directory holds other things and none of a store's files (.lock, blobs/, envs/, registry/, …); check --home (or CRUXPROV_HOME): give it the operator's store, or an empty or new directory to make one in", home)
	}
	return nil
}

// otherThings reports whether home is a directory that holds no store
// and is not empty: something else's directory, not to be made a store
// nor answered for as an empty one. lost+found alone (a file system made
// for the store) is empty.
func otherThings(home string) bool {
	fi, err := os.Stat(home)
	if err != nil || !fi.IsDir() || store.Holds(home) {
		return false
	}
	ents, err := os.ReadDir(home)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name() != "lost+found" {
			return true
		}
	}
	return false
}

// sayWaits has st's lock calls that wait say so on stderr, once each,
// with what they wait for (store.md, "Locking"): behind a gc that waits
// for the store, a run, fetch or install otherwise waited without a
// word for as long as the gc waited. Said whatever --quiet and --json
// (stdout keeps the one document): a command that seems to hang says why.
func (o *opts) sayWaits(st *store.Store) { st.OnWait(o.waitSayer(st.Home())) }

// storeWaits is sayWaits for a store at --home that a library opens
// (pinned.HoldStore): it names the store as store.Store.Home does.
func (o *opts) storeWaits() func(store.Wait, []int) {
	home, err := filepath.Abs(o.home)
	if err != nil {
		home = o.home // the store cannot be opened either, nor waited for
	}
	return o.waitSayer(home)
}

// waitSayer is what sayWaits has the lock calls of the store at home call.
func (o *opts) waitSayer(home string) func(store.Wait, []int) {
	return func(w store.Wait, pids []int) {
		// Which processes, where /proc/locks says (a few of them).
		who := ""
		if len(pids) > 0 {
			var ps []string
			for _, p := range pids[:min(len(pids), 5)] {
				ps = append(ps, strconv.Itoa(p))
			}
			who = "pid " + strings.Join(ps, ", ")
			if len(pids) > 1 {
				who = "pids " + strings.Join(ps, ", ")
			}
			if len(pids) > 5 {
				who += ", …"
			}
		}
		gc, users := "", ""
		if who != "" {
			gc, users = "; "+who, who+": "
		}
		var why string
		switch w {
		case store.WaitForGC:
			why = "a gc (or env remove" + gc + ") is using it"
		case store.WaitBehindGC:
			why = "a gc --wait (or env remove" + gc + ") waits for it and goes first, once the processes using the store now are done"
		default:
			why = "the processes using it (" + users + "runs, verifies, fetches, env creates, installs, image builds, or another gc) are to finish first"
		}
		o.line(fmt.Sprintf("waiting for the store %s: %s; Ctrl-C stops waiting", home, why))
	}
}

// emit prints a command's result: with --json, v plus its schema as one
// document; otherwise human() writes the human form (unless nil).
func (o *opts) emit(schema string, v any, human func(w io.Writer)) error {
	if o.json {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		m := map[string]any{}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber() // int64 values (sizes, inodes, ns times) stay exact
		if err := dec.Decode(&m); err != nil {
			return fmt.Errorf("json output of %s is not an object: %w", schema, err)
		}
		m["schema"] = schema
		o.mu.Lock()
		if len(o.warnings) > 0 {
			// What stderr would have said, where a pipeline reads it;
			// after a document's own warnings (inspect's, lock
			// resolve's: lines too).
			own, _ := m["warnings"].([]any)
			for _, w := range o.warnings {
				own = append(own, w)
			}
			m["warnings"] = own
		}
		o.mu.Unlock()
		writeJSON(o.stdout, m)
		return nil
	}
	if human != nil {
		human(o.stdout)
	}
	return nil
}

// warn prints a warning on stderr (not with --quiet or --json); with
// --json, the document's "warnings" list carries it (emit).
func (o *opts) warn(msg string) {
	if o.keepWarning(msg) {
		// Above the progress bars while they are drawn (line): a damaged
		// cache entry is found while they are (it was written under them,
		// where the next redraw wiped it).
		o.line("warning: " + oneLine(msg))
	}
}

// keepWarning adds msg to the --json document's warnings and reports
// whether it is also to be shown on stderr (neither --quiet nor --json),
// for a caller that writes it there itself (above progress bars).
func (o *opts) keepWarning(msg string) bool {
	o.mu.Lock()
	o.warnings = append(o.warnings, oneLine(msg))
	o.mu.Unlock()
	return !o.quiet && !o.json
}

// progressOn reports whether progress bars may be drawn: a TTY on stderr,
// and neither --json, --quiet nor --no-progress.
func (o *opts) progressOn() bool {
	if o.json || o.quiet || o.noProgress {
		return false
	}
	f, ok := o.stderr.(*os.File)
	if !ok {
		return false
	}
	// A terminal, not any character device: with 2>/dev/null the bars
	// were drawn into /dev/null.
	return term.IsTerminal(int(f.Fd()))
}

// renderRemedies is the remedy of a refusal to advise, its command line,
// and "; or: " and the command line of each other remedy it has
// (Remedy.Or, in turn), where the refusal has several: the first is rem,
// or, where the command cannot carry it out (a command without
// --no-cache), the next it can; one it cannot is left out.
func renderRemedies(rem *refusal.Remedy, args []string) (*refusal.Remedy, string, string) {
	if rem == nil {
		return nil, "", ""
	}
	var first *refusal.Remedy
	var cmdline, or string
	seen := map[*refusal.Remedy]bool{}
	for r := rem; r != nil && !seen[r]; r = r.Or {
		seen[r] = true
		line := renderRemedy(r, args)
		switch {
		case line == "":
		case first == nil:
			first, cmdline = r, line
		default:
			or += "; or: " + line
		}
	}
	if first == nil {
		return rem, "", ""
	}
	return first, cmdline, or
}

// remedyJSON is a --json "refused" object's "remedy": the action, its
// command line, and those of the remedy's fields it has. A remedy with
// no target (offline_miss's fetch) has no "target", as refusal.Remedy's
// own JSON omits it: it carried "target": "".
func remedyJSON(rem *refusal.Remedy, cmdline string, args []string) map[string]any {
	jr := map[string]any{"action": string(rem.Action), "command": cmdline}
	if rem.Target != "" {
		jr["target"] = rem.Target
	}
	if len(rem.Images) > 0 {
		jr["images"] = rem.Images
	}
	if rem.Name != "" {
		jr["name"] = rem.Name
	}
	if len(rem.Platforms) > 0 {
		jr["platforms"] = rem.Platforms
	}
	if rem.Python != "" {
		// refusals.md says propose adds it with its platforms; it was
		// rendered into the command only.
		jr["python"] = rem.Python
	}
	if rem.Backend != "" {
		jr["backend"] = rem.Backend
	}
	if rem.Package != "" {
		jr["package"] = rem.Package
	}
	if rem.NoBytecode && (rem.Package != "" || rem.Action == refusal.ActionPropose) {
		// snake_case, as every other multi-word key the refusal's JSON
		// has; "noBytecode", the key it was, stays beside it while the
		// documents are at v1 (a key a pipeline reads is removed only
		// with a new major: docs/ci.md).
		jr["no_bytecode"] = true
		jr["noBytecode"] = true
	}
	// The next remedy the command can carry out (one it cannot, as
	// renderRemedies leaves it out).
	for or, n := rem.Or, 0; or != nil && or != rem && n < 8; or, n = or.Or, n+1 {
		if line := renderRemedy(or, args); line != "" {
			jr["or"] = remedyJSON(or, line, args)
			break
		}
	}
	return jr
}

// renderRemedy is the command line that carries out rem ("" for none).
// Every command rendered here is run by a test after the refusal that
// advised it (TestRemediesRun).
//
// args is the refused command line (argv): ActionFetch renders it again
// without --offline (and without --json, for a person to run).
func renderRemedy(rem *refusal.Remedy, args []string) string {
	return withEpoch(renderRemedyLine(rem, args), args)
}

// withEpoch is r, a remedy rendered for the refused command line args,
// with the SOURCE_DATE_EPOCH an image build ran under before the image
// build it renders again: every timestamp of the image is that epoch,
// and the command run without it (a shell that does not have the CI's
// variable) built and pushed another image, of epoch 0, than the one
// the job and its other runners build (TestImageBuildRemedyKeepsEpoch).
func withEpoch(r string, args []string) string {
	e := os.Getenv("SOURCE_DATE_EPOCH")
	if e == "" || r == "" || !isCommand(args, "image", "build") {
		return r
	}
	i := strings.Index(r, "cruxprov ")
	if i < 0 || (i > 0 && r[i-1] != ' ') || !isCommand(strings.Fields(r[i:]), "image", "build") {
		return r
	}
	return r[:i] + "SOURCE_DATE_EPOCH=" + shellQuote(e) + " " + r[i:]
}

// renderRemedyLine is renderRemedy without the image build's epoch.
func renderRemedyLine(rem *refusal.Remedy, args []string) string {
	if rem == nil {
		return ""
	}
	// The refused command's --index may carry a user and password:
	// rendered again verbatim, the advice printed them (DESIGN §14).
	given := args
	args = withoutIndexCredentials(args)
	t := shellQuote(rem.Target)
	// The commands that act on a store act on the refused command's: its
	// --home, which they would otherwise not name (CRUXPROV_HOME is in the
	// environment they run in).
	home := homeArg(args)
	switch rem.Action {
	case refusal.ActionReplaceEnv, refusal.ActionRebuildEnv, refusal.ActionListEnvs:
		if parent := filepath.Dir(rem.Target); filepath.Base(parent) == store.EnvsDir {
			// The env is in the store whose envs/ holds it, and --replace
			// rebuilds it there only: env verify PATH names no store, or
			// another one (env verify --home A B/envs/HEX advised
			// --home A, which built the env in A and left B's broken).
			home = " --home " + shellQuote(filepath.Dir(parent))
		}
	}
	switch rem.Action {
	case refusal.ActionReplaceEnv:
		return "cruxprov env create --replace " + t + home
	case refusal.ActionRebuildEnv:
		// The seal cannot name the env's inputs: the accepted pin that
		// names the env does (verify NAME), or the operator names them.
		r := "cruxprov env create --replace --wheel WHEEL --platform PLATFORM --python PYTHON"
		if pkg, sha, ok := strings.Cut(rem.Package, "@sha256:"); ok && len(rem.Platforms) == 1 && rem.Python != "" {
			r = "cruxprov env create --replace " + shellQuote(pkg) + " --sha256 " + shellQuote(sha) +
				" --platform " + shellQuote(rem.Platforms[0]) + " --python " + shellQuote(rem.Python)
			if rem.NoBytecode {
				r += " --no-compile"
			}
		}
		// The rebuild takes the index from the env's store's config.yaml
		// when that names one: verify NAME, which reads no index, advised
		// --index URL all the same (env verify PATH loads it itself).
		if !indexFromConfig && !envStoreNamesIndex(rem.Target) {
			r += " --index URL"
		}
		return r + home
	case refusal.ActionFetch:
		var again []string
		for _, a := range args[1:] {
			if a != "--offline" && a != "--json" && !strings.HasPrefix(a, "--offline=") && !strings.HasPrefix(a, "--json=") {
				again = append(again, shellQuote(a))
			}
		}
		if !indexFromConfig && !slices.Contains(args, "--index") && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--index=") }) {
			again = append(again, "--index", "URL")
		}
		return "cruxprov " + strings.Join(again, " ")
	case refusal.ActionWheelFile:
		return wheelFileAgain(args)
	case refusal.ActionGC:
		// Plain gc removes only blobs nothing names: after a create short
		// of space, mostly the wheels it just fetched, which its retry
		// fetches again; sealed envs are what fill a store.
		return "cruxprov gc --envs --dry-run" + home
	case refusal.ActionListEnvs:
		if parent := filepath.Dir(rem.Target); filepath.Base(parent) == store.EnvsDir {
			if _, err := os.Stat(parent); err != nil {
				return "" // no store there, no env to list
			}
		}
		return "cruxprov env list" + home
	case refusal.ActionNoBytecode:
		// Only where the command can leave bytecode out, and has not: an
		// env rebuilt from its seal (env create --replace ENV) keeps the
		// seal's bytecode (--no-compile is a usage error there).
		if !commandTakes(args, "no-compile") || hasFlag(args, "no-compile") || replacesFromSeal(args) {
			return ""
		}
		return again(args, "--no-compile")
	case refusal.ActionNoCache:
		// Only where the command has the caches to leave out (env
		// create, install, image build), and not with them left out.
		if !commandTakes(args, "no-cache") || hasFlag(args, "no-cache") {
			return ""
		}
		return again(args, "--no-cache")
	case refusal.ActionEmbed:
		// The target is the wheel's file name; the refused command named
		// its path (wheels/X.whl, dist/X.whl), which is what works here.
		src := rem.Target
		for _, a := range args[1:] {
			a = strings.TrimPrefix(a, "--wheel=")
			if a != rem.Target && filepath.Base(a) == rem.Target {
				src = a
				break
			}
		}
		// The embedded wheel goes beside it (dist/embedded/ for
		// dist/X.whl): embedded/ in the project's root, where an author
		// runs this, is one more top-level directory to setuptools'
		// flat-layout discovery, and the provider's next build failed
		// ("Multiple top-level packages discovered in a flat-layout");
		// dist/ is one it leaves out.
		out := filepath.Join(filepath.Dir(src), "embedded") + "/"
		if syscall.Access(filepath.Dir(src), 2 /* W_OK */) != nil {
			// A wheel in a directory this user may not write (a system's
			// /usr/share/python-wheels): the line as printed failed
			// ("permission denied"); dist/embedded/ where it is run.
			out = "dist/embedded/"
		}
		return "cruxprov package embed " + shellQuote(src) + " --manifest provider.toml --lock pylock.toml -o " + shellQuote(out)
	case refusal.ActionReviewChangesets:
		return "cruxprov changeset list" + home
	case refusal.ActionRepairRegistry:
		if rem.Target != "" { // trust.json lost: the root of trust's public key (of that digest) is needed
			return "cruxprov registry repair --root-key PUB" + home
		}
		return "cruxprov registry repair" + home
	case refusal.ActionRenewApproval:
		return "cruxprov changeset approve " + t + " --key KEY" + home // an approver key whose approval expired; --expires as the first time
	case refusal.ActionPropose:
		pkg, sha, ok := strings.Cut(rem.Target, "@sha256:")
		if !ok {
			pkg, sha = "WHEEL", ""
		}
		r := "cruxprov install " + shellQuote(pkg)
		if sha != "" {
			r += " --sha256 " + shellQuote(sha)
		}
		if len(rem.Platforms) > 0 {
			// The pin's own: the install proposes the envs and images it
			// names (a pin of images and no env names no interpreter).
			r += " --platform " + shellQuote(strings.Join(rem.Platforms, ","))
			if rem.Python != "" {
				r += " --python " + shellQuote(rem.Python)
			}
		} else {
			r += " --platform PLATFORM --python PYTHON"
		}
		if rem.NoBytecode {
			// The pin's envs were made without bytecode, which their
			// digests cover: an install with it proposed other envs.
			r += " --no-compile"
		}
		if len(rem.Images) > 0 || rem.Backend == registry.BackendContainer {
			// The pin's images: an install without them proposes a
			// change-set that drops them (its diff shows them going).
			r += " --backend container"
			for _, img := range rem.Images {
				r += " --image " + shellQuote(img)
			}
			if rem.Backend == registry.BackendContainer {
				// The image to add, which only the operator knows
				// (its platform among --platform's).
				r += " --image REF@sha256:DIGEST"
			}
		}
		// The install takes the index from the store's config.yaml when
		// it names one; verify and run, which read no index, did not
		// know it and asked for --index URL all the same.
		if !indexFromConfig && !configNamesIndex(args) {
			r += " --index URL"
		}
		return r + home
	case refusal.ActionUnenforcedLimits:
		return again(args, "--unenforced-limits")
	case refusal.ActionSecretPipe:
		// A container run's secrets by pipe, where path mode cannot
		// mount its tmpfs (not root): a --secret-delivery given replaced.
		if !commandTakes(args, "secret-delivery") {
			return ""
		}
		return rerun(args, "secret-delivery", func(string) string { return "" }, "--secret-delivery", "pipe")
	case refusal.ActionSetStateDir:
		// A verifier's floors that cannot be written: the command again
		// with a state directory the operator names (a --state-dir
		// given replaced); the detail says what refused.
		if !commandTakes(args, "state-dir") {
			return ""
		}
		return rerun(args, "state-dir", func(string) string { return "" }, "--state-dir", "DIR")
	case refusal.ActionOtherHome:
		// env create again in a store the operator names (a --home
		// given replaced): not install's or image build's, whose store
		// holds the registry they propose into.
		if !isCommand(args, "env", "create") {
			return ""
		}
		return rerun(args, "home", func(string) string { return "" }, "--home", "DIR")
	case refusal.ActionSetTempDir:
		// The run stages a layout in the temp directory, whose path
		// podman takes as an image name: the operator names one it can.
		return "TMPDIR=DIR " + rerun(args, "", func(v string) string { return v })
	case refusal.ActionNamePlatform:
		// The target, one of the pin's platforms (each its own remedy,
		// the others after it), or where it names none, one of
		// rem.Platforms (the detail names them), which the operator
		// chooses; a --platform given is replaced.
		if !commandTakes(args, "platform") {
			return ""
		}
		return rerun(args, "platform", func(string) string { return "" }, "--platform", targetOr(rem, "PLATFORM"))
	case refusal.ActionNamePython:
		// Only where the command names its interpreter: env create
		// --replace takes the seal's (--python is a usage error there).
		if !commandTakes(args, "python") || hasFlag(args, "replace") {
			return ""
		}
		return rerun(args, "python", func(string) string { return "" }, "--python", "PYTHON")
	case refusal.ActionNameEntrypoint:
		if commandTakes(args, "entrypoint") { // verify NAME --entrypoint E
			return rerun(args, "entrypoint", func(string) string { return "" }, "--entrypoint", "ENTRYPOINT")
		}
		// run NAME ENTRYPOINT: the argument that named it, where one
		// alone did (not run echo echo).
		if rem.Target == "" || strings.HasPrefix(rem.Target, "-") {
			return ""
		}
		at := -1
		for i, a := range args[1:] {
			if a == rem.Target {
				if at >= 0 {
					return ""
				}
				at = i + 1
			}
		}
		if at < 0 {
			return ""
		}
		named := slices.Clone(args)
		named[at] = "ENTRYPOINT"
		return rerun(named, "", func(v string) string { return v })
	case refusal.ActionDisallowEnv:
		if rem.Target == "" {
			return ""
		}
		// --allow-env takes NAME,NAME too: only this name goes.
		r := rerun(args, "allow-env", func(v string) string {
			var keep []string
			for _, n := range strings.Split(v, ",") {
				if strings.TrimSpace(n) != rem.Target {
					keep = append(keep, n)
				}
			}
			return strings.Join(keep, ",")
		})
		if r == rerun(args, "allow-env", func(v string) string { return v }) {
			return "" // no --allow-env named it: the same command would be refused again
		}
		return r
	case refusal.ActionScanLedger:
		// receipts list and show, refused at a corrupt line, list (show)
		// the valid rows again with --tolerate-corrupt, and the bad lines
		// after them: they advised a scan, which lists the attempts but
		// shows none. One given it already and refused all the same is
		// sent to the scan.
		if _, path, err := reorder(newApp(io.Discard, io.Discard), args); err == nil && len(path) == 2 && path[0] == "receipts" &&
			(path[1] == "list" || path[1] == "show") && !hasFlag(args, "tolerate-corrupt") {
			return rerun(args, "", func(v string) string { return v }, "--tolerate-corrupt")
		}
		return "cruxprov receipts scan --tolerate-corrupt --ledger " + t
	case refusal.ActionPlatformList:
		return "cruxprov platform list"
	case refusal.ActionTrustKey:
		r := "cruxprov key trust PUB"
		if rem.Name != "" {
			r += " --name " + shellQuote(rem.Name)
		}
		return r + " --role " + targetOr(rem, "approver") + home
	case refusal.ActionUntrustKey:
		return "cruxprov key untrust " + targetOr(rem, "NAME") + home
	case refusal.ActionListKeys:
		return "cruxprov key list" + home
	case refusal.ActionSetThreshold:
		return "cruxprov policy set --threshold " + targetOr(rem, "K") + home
	case refusal.ActionRetire:
		return "cruxprov provider retire " + targetOr(rem, "NAME") + home
	case refusal.ActionApprove:
		return "cruxprov changeset approve " + targetOr(rem, "ID") + " --key KEY" + home
	case refusal.ActionRegisterInterface:
		return "cruxprov interface register " + targetOr(rem, "ID") + " --schema FILE" + home
	case refusal.ActionRestoreLayout:
		// LAYOUT: a copy of the layout (the CI's artifact, where it was
		// built), whole; "/." copies its contents into the directory,
		// made when missing.
		if rem.Target == "" {
			return ""
		}
		return "cp -R LAYOUT/. " + t
	case refusal.ActionGrantWrite:
		// This user's own file or directory, its mode made read-only.
		if rem.Target == "" {
			return ""
		}
		return "chmod u+w " + t
	case refusal.ActionMoveAway:
		// Kept beside it for a look, not removed: the next run makes
		// what belongs there anew.
		if rem.Target == "" {
			return ""
		}
		return "mv " + t + " " + shellQuote(rem.Target+".moved")
	case refusal.ActionGrantRead:
		// Run by the path's owner (the detail names its uid): a file
		// 0644, a directory 0755, as a store's are.
		if rem.Target == "" {
			return ""
		}
		return "chmod a+rX " + t
	case refusal.ActionRunAsOwner:
		// The refused command again as the user who owns the registry
		// (the target: its uid), its store named (sudo leaves out
		// CRUXPROV_HOME, and the owner's default home is another).
		if rem.Target == "" {
			return ""
		}
		who := shellQuote("#" + rem.Target)
		if u, err := user.LookupId(rem.Target); err == nil {
			who = shellQuote(u.Username)
		}
		same := func(v string) string { return v }
		if _, ok := homeGiven(args); !ok {
			if h := storeHome(args); h != "" {
				return "sudo -u " + who + " " + rerun(args, "", same, "--home", h)
			}
		}
		return "sudo -u " + who + " " + rerun(args, "", same)
	case refusal.ActionNameSecret:
		// FILE: one holding the secret's value; a --secret given for
		// the reference (which had none) is replaced, one for a
		// reference the manifest does not declare (a typo of it, not
		// delivered) dropped, the others kept.
		if !commandTakes(args, "secret") || rem.Target == "" {
			return ""
		}
		return rerun(args, "secret", func(v string) string {
			if ref, _, _ := strings.Cut(v, "="); ref == rem.Target || slices.Contains(undeclaredSecrets, ref) {
				return ""
			}
			return v
		}, "--secret", shellQuote(rem.Target+"=@FILE"))
	case refusal.ActionCABundle:
		// FILE: the PEM of the CA that signed the server's certificate;
		// a bundle given (which did not) is replaced.
		if !commandTakes(args, "ca-bundle") {
			return ""
		}
		return rerun(args, "ca-bundle", func(string) string { return "" }, "--ca-bundle", "FILE")
	case refusal.ActionNameNetrc:
		// FILE: a netrc this user can read with a machine entry for
		// the index's host (after sudo -u, HOME, and so ~/.netrc, is
		// still the other user's).
		return "NETRC=FILE " + rerun(args, "", func(v string) string { return v })
	case refusal.ActionIndexScheme:
		// The --index given again with the scheme its port speaks, the
		// port kept; none where the command line gave no --index (the
		// config's index URL is corrected there).
		if !slices.ContainsFunc(args, func(a string) bool {
			return a == "--index" || a == "-index" || strings.HasPrefix(a, "--index=") || strings.HasPrefix(a, "-index=")
		}) {
			return ""
		}
		return rerun(args, "index", func(v string) string { return index.WithScheme(v, rem.Target) })
	case refusal.ActionIndexCredentials:
		// The --index given again with USER:PASSWORD for its user
		// information (withoutIndexCredentials), for the operator to
		// fill in; none where the command line gave no --index with
		// credentials (the config's index URL holds them).
		if slices.Equal(given, args) {
			return ""
		}
		return rerun(args, "", func(v string) string { return v })
	}
	return ""
}

// targetOr is rem's target quoted for a shell, or placeholder where it
// has none (the operator names it).
func targetOr(rem *refusal.Remedy, placeholder string) string {
	if rem.Target == "" {
		return placeholder
	}
	return shellQuote(rem.Target)
}

// configNamesIndex reports whether the config.yaml of the store the
// command line args acts on (its --home, else CRUXPROV_HOME, else the
// default) names an index, which a command run there takes as --index.
func configNamesIndex(args []string) bool {
	home := storeHome(args)
	if home == "" {
		return false
	}
	cfg, err := loadConfig(home)
	return err == nil && cfg.Index != ""
}

// storeHome is the store the command line args acts on: its --home, else
// CRUXPROV_HOME, else the default ("" where there is none).
func storeHome(args []string) string {
	home, ok := homeGiven(args)
	if !ok {
		home = os.Getenv("CRUXPROV_HOME")
	}
	if home == "" {
		var err error
		if home, err = defaultHome(); err != nil {
			return ""
		}
	}
	return home
}

// envStoreNamesIndex reports whether the config.yaml of the store whose
// envs/ holds env names an index (false for a path in no store).
func envStoreNamesIndex(env string) bool {
	parent := filepath.Dir(env)
	if filepath.Base(parent) != store.EnvsDir {
		return false
	}
	cfg, err := loadConfig(filepath.Dir(parent))
	return err == nil && cfg.Index != ""
}

// homeArg is " --home DIR" for the --home the command line args gave,
// or "" when it gave none.
func homeArg(args []string) string {
	if home, ok := homeGiven(args); ok {
		return " --home " + shellQuote(home)
	}
	return ""
}

// homeGiven is the --home the command line args gave (the last, as the
// flag parser takes it), and whether it gave one.
func homeGiven(args []string) (home string, given bool) {
	for i := 1; i < len(args); i++ {
		for _, f := range []string{"--home", "-home"} {
			if args[i] == f && i+1 < len(args) {
				home, given = args[i+1], true
			} else if v, ok := strings.CutPrefix(args[i], f+"="); ok {
				home, given = v, true
			}
		}
	}
	return home, given
}

// again is the refused command line args run again with flag added
// (without --json, for a person to run).
func again(args []string, flag string) string {
	out := []string{"cruxprov"}
	for _, a := range args[1:] {
		if a != "--json" && !strings.HasPrefix(a, "--json=") && a != flag {
			out = append(out, shellQuote(a))
		}
	}
	return strings.Join(append(out, flag), " ")
}

// wheelFileAgain is the refused command line args again (without
// --json) with the root wheel given as its file, WHEEL, which the
// operator names, instead of NAME==VERSION: as the argument of a command
// that takes a wheel so (install, which checks it against --sha256
// still), else as --wheel WHEEL (env create, image build), where
// --sha256 goes with NAME==VERSION only and is left out. "" where no
// argument names the root wheel so.
func wheelFileAgain(args []string) string {
	app := newApp(io.Discard, io.Discard)
	_, path, err := reorder(app, args)
	if err != nil || len(path) == 0 {
		return ""
	}
	var leaf *cli.Command
	for cs := app.Commands; len(path) > 0; path, cs = path[1:], leaf.Subcommands {
		if leaf = findCommand(cs, path[0]); leaf == nil {
			return ""
		}
	}
	local, global := flagIndex(leaf.Flags), flagIndex(app.Flags)
	byFlag := local["wheel"]
	out := []string{"cruxprov"}
	found := false
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			dash := len(out)
			out = append(out, "--")
			for _, p := range rest[i+1:] {
				if !found && namesPackage(p) {
					found = true
					if byFlag { // before "--", after which it is an argument
						out = slices.Insert(out, dash, "--wheel", "WHEEL")
						continue
					}
					p = "WHEEL"
				}
				out = append(out, shellQuote(p))
			}
			break
		}
		if len(a) > 1 && a[0] == '-' {
			name, hasValue := flagName(a)
			if name == "json" {
				continue
			}
			n := 1 // the flag and its value, where it takes one apart
			if !hasValue && takesValue(name, local, global) && i+1 < len(rest) {
				n = 2
			}
			if !(byFlag && name == "sha256") {
				for _, v := range rest[i : i+n] {
					out = append(out, shellQuote(v))
				}
			}
			i += n - 1
			continue
		}
		if !found && namesPackage(a) {
			found = true
			if byFlag {
				out = append(out, "--wheel")
			}
			out = append(out, "WHEEL")
			continue
		}
		out = append(out, shellQuote(a))
	}
	if !found {
		return ""
	}
	return strings.Join(out, " ")
}

// replacesFromSeal reports whether args is env create --replace ENV: an
// env rebuilt from its seal, which keeps the seal's platform, interpreter
// and bytecode (not --replace NAME==VERSION, nor --wheel or --lock).
func replacesFromSeal(args []string) bool {
	if !hasFlag(args, "replace") {
		return false
	}
	out, path, err := reorder(newApp(io.Discard, io.Discard), args)
	if err != nil || strings.Join(path, " ") != "env create" {
		return false
	}
	i := slices.Index(out, "--")
	return i >= 0 && len(out) == i+2 && !namesPackage(out[i+1])
}

// namesPackage reports whether the argument a names a root wheel as
// NAME==VERSION (not a wheel file): rootPackage's test, and the remedies'.
func namesPackage(a string) bool {
	return strings.Contains(a, "==") && !strings.HasSuffix(a, ".whl")
}

// commandTakes reports whether the command args run defines the flag.
func commandTakes(args []string, flag string) bool {
	app := newApp(io.Discard, io.Discard)
	_, path, err := reorder(app, args)
	if err != nil || len(path) == 0 {
		return false
	}
	var c *cli.Command
	for cs := app.Commands; len(path) > 0; path, cs = path[1:], c.Subcommands {
		if c = findCommand(cs, path[0]); c == nil {
			return false
		}
	}
	return hasFlagDef(&cli.Context{Command: c}, flag)
}

// isCommand reports whether args run the command path (env create,
// image build).
func isCommand(args []string, path ...string) bool {
	_, p, err := reorder(newApp(io.Discard, io.Discard), args)
	return err == nil && slices.Equal(p, path)
}

// rerun is the refused command line args again (without --json, for a
// person to run) with each value v of the flag name (--name v, --name=v,
// or with one dash; none where name is "") given as keep(v) instead, the
// flag left out where keep returns "", and add appended before any "--"
// (after it, a flag is an argument).
func rerun(args []string, name string, keep func(string) string, add ...string) string {
	out := []string{"cruxprov"}
	value := func(a, v string) {
		if v = keep(v); v != "" {
			out = append(out, a, shellQuote(v))
		}
	}
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			out = append(out, add...)
			add = nil
			for _, p := range rest[i:] {
				out = append(out, shellQuote(p))
			}
			break
		}
		if a == "--json" || strings.HasPrefix(a, "--json=") {
			continue
		}
		if name == "" {
			out = append(out, shellQuote(a))
			continue
		}
		if (a == "--"+name || a == "-"+name) && i+1 < len(rest) {
			value("--"+name, rest[i+1])
			i++
			continue
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			value("--"+name, v)
			continue
		}
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			value("--"+name, v)
			continue
		}
		out = append(out, shellQuote(a))
	}
	return strings.Join(append(out, add...), " ")
}

// withoutIndexCredentials is args with the user information of an
// --index URL (https://user:pass@host/simple/) replaced by USER:PASSWORD
// (USER alone where the URL names a user only, a token), for the
// operator to fill in: a command rendered again from args must not print
// them. args is returned as it is where no --index carries any.
func withoutIndexCredentials(args []string) []string {
	var out []string
	set := func(i int, v string) {
		if out == nil {
			out = slices.Clone(args)
		}
		out[i] = v
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if (a == "--index" || a == "-index") && i+1 < len(args) {
			if v, ok := placeholderCredentials(args[i+1]); ok {
				set(i+1, v)
			}
			i++
			continue
		}
		for _, p := range []string{"--index=", "-index="} {
			if v, ok := strings.CutPrefix(a, p); ok {
				if v, ok := placeholderCredentials(v); ok {
					set(i, p+v)
				}
			}
		}
	}
	if out == nil {
		return args
	}
	return out
}

// placeholderCredentials is u with its user information replaced by
// USER:PASSWORD (or USER), and whether it had any.
func placeholderCredentials(u string) (string, bool) {
	p, err := url.Parse(u)
	if err != nil {
		// Unparseable, but it may still carry a secret: never echoed
		// (index.Redact says so the same way).
		if strings.Contains(u, "@") {
			return "URL", true
		}
		return u, false
	}
	if p.User == nil {
		if strings.Contains(u, "@") && (p.Opaque != "" || p.Host == "") {
			return "URL", true // a user:password@ in the opaque part or the path
		}
		return u, false
	}
	if _, has := p.User.Password(); has {
		p.User = url.UserPassword("USER", "PASSWORD")
	} else {
		p.User = url.User("USER")
	}
	return p.String(), true
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:@,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// interruptedMessage is what a command stopped by a signal says: nothing
// partial was kept, what of its work finished before the signal stays
// done (named for the commands that keep some), and running it again
// completes it. A command stopped while it waited for the store's lock
// (err a *store.WaitError) says so: it had done nothing under it, and a
// gc removed nothing (it said that what it removed stays removed).
func interruptedMessage(path []string, err error) string {
	var we *store.WaitError
	waited := errors.As(err, &we)
	cmd := strings.Join(path, " ")
	if waited && cmd == "gc" {
		return "interrupted by a signal while gc waited for the store (other processes held it); gc removed nothing: run it again once they are done, or without --wait, which fails at once while the store is in use"
	}
	how := "interrupted by a signal"
	var lw *image.LayoutWaitError
	switch {
	case waited:
		how += " while it waited for the store (other processes held it)"
	case errors.As(err, &lw):
		how += " while it waited for the layout " + lw.Dir + " (another image build was writing into it), which is as it was"
	}
	kept, partial := "", "; nothing partial was kept"
	switch cmd {
	case "fetch", "env create", "install":
		kept = "; the wheels fetched before it stay in the store, and the run again does not fetch them twice"
	case "gc":
		kept = "; what gc removed before it stays removed"
	case "image build":
		// Only a push that began leaves anything: a build stopped before
		// it (or one with no --push) said blobs it never pushed stay.
		// Those blobs are partial, and what it pushed is all it leaves:
		// it said "nothing partial was kept" before naming them.
		if errors.Is(err, image.ErrPushInterrupted) {
			// The image's tag is moved last, never by a stopped push;
			// the cosign tags of its signature and attestations are
			// written before it: "it moved no tag" and "untagged" were
			// untrue of a registry listing sha256-<hex>.sig.
			how += " while it pushed (it did not move the image's tag)"
			partial, kept = "", "; what it pushed before it stays in the registry: blobs, and the .sig and .att tags where it had written them, which name the image's signature and attestations, not the image"
		}
		// With --output too, the layout was written before the push
		// began: the image is there, under its tag. It said nothing
		// partial was kept, and nothing of the layout.
		if pe := (*image.PushInterruptedError)(nil); errors.As(err, &pe) && pe.Layout != "" {
			kept += "; " + pe.InLayout()
		}
	case "index build":
		kept = "; the previous index, if there was one, is unchanged"
	}
	return how + partial + kept + ": run the command again to complete it"
}
