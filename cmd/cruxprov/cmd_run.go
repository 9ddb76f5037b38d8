package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/internal/kernelfs"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/pinned"
	pcontainer "github.com/cruxible/cruxprov/pinned/container"
	"github.com/cruxible/cruxprov/podman"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/verify"
	vcontainer "github.com/cruxible/cruxprov/verify/container"
)

func init() {
	register(&cli.Command{
		Name:      "run",
		Usage:     "verify a provider's accepted pin, then run one entrypoint with its secrets on fd 3, recording a receipt",
		UsageText: "cruxprov run NAME ENTRYPOINT --input FILE|- [--secret REF=@FILE|REF=env:VAR]… [--timeout D] [--output-bytes N] [--sandbox bwrap] [--idempotency-key K] [--ledger PATH] [--allow-env NAME]… [--backend local|container [--ca-bundle F]] [--platform P]",
		Description: "Verifies the pin (as 'cruxprov verify' does; any drift refuses and nothing runs), then spawns\n" +
			"the env's harness (docs/executor.md): a replaced environment (only --allow-env names pass), a fresh\n" +
			"empty working directory removed afterwards (also its TMPDIR, unless --allow-env TMPDIR), the\n" +
			"secret bundle on fd 3 (each --secret resolved now), the manifest's timeout and output budget\n" +
			"(lowered, never raised, by --timeout and --output-bytes). An intent is written to the receipts\n" +
			"ledger before the spawn, the outcome after. Exit 0 for an ok result, 1 for an error, timeout\n" +
			"or output_limit outcome, 78 refused.\n\n" +
			"Example:\n   echo '{\"hello\": \"world\"}' | cruxprov run acme-echo echo --input - --secret acme/api-token=@token.txt\n" +
			"   cruxprov run acme-echo echo --input req.json --secret acme/api-token=env:ACME_TOKEN --idempotency-key order-42 --json\n" +
			"   cruxprov run acme-echo echo --input req.json --secret acme/api-token=@token.txt --backend container --ca-bundle registry-ca.pem",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Usage: "the request's input JSON `FILE`, or - for stdin"},
			&cli.StringSliceFlag{Name: "secret", Usage: "a secret `REF=@FILE` or REF=env:VAR, resolved at the run; repeatable"},
			&cli.DurationFlag{Name: "timeout", Usage: "lower the manifest's timeout to `D` (default: the manifest's); D also bounds the wait for the store (a gc holding it)"},
			&cli.Int64Flag{Name: "output-bytes", Usage: "lower the manifest's output budget to `N` bytes (default: the manifest's)"},
			&cli.StringFlag{Name: "sandbox", Usage: "a sandbox `LAUNCHER`: bwrap (no network; only the env, the interpreter and the workdir visible)"},
			&cli.StringFlag{Name: "idempotency-key", Usage: "replay a recorded ok outcome for the same key `K` and input (its result is not printed again, only its digest); refuse another input"},
			&cli.StringFlag{Name: "ledger", Usage: "the receipts ledger `PATH` (default $XDG_STATE_HOME/cruxprov/receipts/<host>-<uid>.jsonl)"},
			&cli.StringSliceFlag{Name: "allow-env", Usage: "an environment variable `NAME` the provider may see; repeatable"},
			&cli.StringFlag{Name: "platform", Usage: "the pinned `PLATFORM` id, or host (when several envs or images are pinned)"},
			&cli.StringFlag{Name: "backend", Value: "local", Usage: "`BACKEND`: local, or container (podman --runtime runc with cruxshim; the secret bundle by pipe on fd 3)"},
			caBundleRegistryFlag,
			&cli.BoolFlag{Name: "unenforced-limits", Usage: "container: run even where a rootless podman cannot apply the memory, CPU and pids limits (cgroups v1); the network, file system, capability and user confinement still holds"},
			&cli.StringFlag{Name: "secret-delivery", Value: "pipe", Usage: "how a container run gets its secrets, `MODE`: pipe (fd 3, --preserve-fds) or path (a private tmpfs; needs root)"},
			&cli.StringFlag{Name: "state-dir", Usage: "this executor's state `DIR`: its floors, and its ledger DIR/receipts/<host>-<uid>.jsonl unless --ledger names one (default $XDG_STATE_HOME/cruxprov)"},
			registryIDFlag,
		},
		Action: runAction,
	})
}

// stateHome is $XDG_STATE_HOME or ~/.local/state: the receipts ledger's
// default root (receipts.DefaultPath).
func stateHome() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return x, nil
	}
	h, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(h) {
		// A relative HOME put the ledger under the working directory
		// (receipts.DefaultPath now gives none for it).
		return "", usagef("no home directory for the receipts ledger: give --ledger PATH")
	}
	return filepath.Join(h, ".local", "state"), nil
}

// ledgerPaths are the ledgers named by --ledger (repeatable when multi),
// or the default one.
func ledgerPaths(c *cli.Context, multi bool) ([]string, error) {
	if multi {
		if ps := c.StringSlice("ledger"); len(ps) > 0 {
			return ps, nil
		}
	} else if p := c.String("ledger"); p != "" {
		return []string{p}, nil
	}
	host, _ := os.Hostname()
	if d := c.String("state-dir"); d != "" {
		// The executor's state directory holds its ledger beside its
		// floors (DESIGN §10): DefaultPath's name in DIR/receipts.
		d, err := filepath.Abs(d)
		if err != nil {
			return nil, usagef("--state-dir %q: %v", d, err)
		}
		return []string{filepath.Join(d, "receipts", filepath.Base(receipts.DefaultPath(d, host, os.Getuid())))}, nil
	}
	sh, err := stateHome()
	if err != nil {
		return nil, err
	}
	return []string{receipts.DefaultPath(sh, host, os.Getuid())}, nil
}

// secretResolver resolves --secret REF=@FILE and REF=env:VAR at the run.
func secretResolver(specs []string) (invoke.SecretResolver, error) {
	m := map[string]string{}
	for _, s := range specs {
		ref, src, ok := strings.Cut(s, "=")
		switch {
		case s == "":
			return nil, usagef("--secret is empty: want REF=@FILE or REF=env:VAR")
		case !ok:
			// No source at all: it read "REF=…", as if one had been given
			// and hidden.
			return nil, usagef("--secret %q names no source: want %s=@FILE or %s=env:VAR", s, s, s)
		case ref == "" || (!strings.HasPrefix(src, "@") && !strings.HasPrefix(src, "env:")):
			// What follows = is not shown: it may be the secret itself.
			return nil, usagef("--secret %q: want REF=@FILE or REF=env:VAR (what follows = is not shown, as it may be the secret itself)", ref+"=…")
		case src == "@" || src == "env:":
			// A source named by nothing (an unset shell variable, say:
			// --secret REF=@$F) holds no secret to hide. It ran, refused
			// secret_unresolved "stat : no such file or directory" with a
			// receipt, where REF= alone was a usage error.
			what := "file"
			if src == "env:" {
				what = "variable"
			}
			return nil, usagef("--secret %s=%s names no %s (an unset shell variable?): want %s=@FILE or %s=env:VAR", ref, src, what, ref, ref)
		}
		if _, twice := m[ref]; twice {
			// The last one was delivered, and which that was depended on
			// the order of the flags (a wrapper's and the job's own).
			return nil, usagef("--secret %s is given twice: give each secret once", ref)
		}
		m[ref] = src
	}
	return func(_ context.Context, ref string) (string, error) {
		src, ok := m[ref]
		if !ok {
			return "", refusal.New(refusal.SecretUnresolved, "no --secret given for %s, which the provider declares: give --secret %s=@FILE or %s=env:VAR", ref, ref, ref).WithRemedy(refusal.ActionNameSecret, ref)
		}
		if f, ok := strings.CutPrefix(src, "@"); ok {
			b, err := readInputFile(f, 64<<10)
			var large *tooLargeError
			if errors.As(err, &large) {
				// It could never fit the bundle (DESIGN §2): not a
				// secret that is missing, for which the advice is to
				// supply it.
				// What to do, besides why: "secret REF: F is larger
				// than 64 KiB" said only the second.
				return "", refusal.Wrap(refusal.SecretBundleTooLarge, err, "secret %s: %v (the most the secret bundle on fd 3 holds); give the provider a smaller value: a credential, or a path or URL naming the material, not the material itself", ref, err)
			}
			if err != nil {
				// What to do, besides why: "secret REF: stat F: no such
				// file or directory" said only the second.
				return "", refusal.Wrap(refusal.SecretUnresolved, err, "secret %s: %v; give --secret %s=@FILE a regular file this user can read (a symbolic link to one is followed), or %s=env:VAR", ref, err, ref, ref).WithRemedy(refusal.ActionNameSecret, ref)
			}
			if !utf8.Valid(b) {
				return "", notUTF8(ref, f)
			}
			return strings.TrimSuffix(string(b), "\n"), nil
		}
		name := strings.TrimPrefix(src, "env:")
		v, ok := os.LookupEnv(name)
		if !ok {
			return "", refusal.New(refusal.SecretUnresolved, "secret %s: %s is not set; set %s in this run's environment (an empty value is delivered as given), or give --secret %s=@FILE", ref, src, name, ref).WithRemedy(refusal.ActionNameSecret, ref)
		}
		if !utf8.ValidString(v) {
			return "", notUTF8(ref, src)
		}
		return v, nil
	}, nil
}

// notUTF8 refuses a secret whose source does not hold UTF-8 text, naming
// the source (invoke's own refusal names only the ref, which left the
// file or variable to be guessed) and what to do.
func notUTF8(ref, src string) error {
	return refusal.New(refusal.SecretUnresolved, "secret %s: %s is not valid UTF-8 text (the bundle on fd 3 is JSON text); give the value as text, binary data encoded (as base64 say)", ref, src)
}

// secretNotForwarded refuses an --allow-env naming the variable a --secret
// REF=env:VAR reads: the secret's value would reach the provider in its
// environment, besides fd 3, and a container run's in podman's record
// of the container (podman inspect shows it; a container an executor
// killed mid-run left keeps it until Prune). A secret goes on fd 3 alone
// (DESIGN §10).
func secretNotForwarded(secrets, allow []string) error {
	for _, s := range secrets {
		ref, src, _ := strings.Cut(s, "=")
		if v, ok := strings.CutPrefix(src, "env:"); ok && slices.Contains(allow, v) {
			return usagef("--allow-env %s: it holds the secret %s (--secret %s=env:%s), which reaches the provider on fd 3 only; drop --allow-env %s", v, ref, ref, v, v)
		}
	}
	return nil
}

// allowNamesOnly refuses an --allow-env NAME=VALUE: the allowlist names
// variables of this run's environment, and such an entry, no variable's
// name, was passed on as one and matched nothing, so --allow-env LANG=C
// ran the provider without LANG, and without a word. What follows = is
// not shown: it may be a secret. An empty name, or one with a space or a
// control character in it (--allow-env "LANG LC_ALL", two names in one),
// matched nothing either: it is refused too.
func allowNamesOnly(allow []string) error {
	for _, a := range allow {
		if k, _, ok := strings.Cut(a, "="); ok {
			return usagef("--allow-env %q: give a variable's NAME, not NAME=VALUE (what follows = is not shown): --allow-env %s passes %s with the value this run's environment gives it", k+"=…", k, k)
		}
		if a == "" || strings.IndexFunc(a, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return usagef("--allow-env %q is not a variable's name: give one NAME per --allow-env (--allow-env LANG --allow-env LC_ALL)", a)
		}
	}
	return nil
}

func runAction(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() != 2 {
		return usagef("run takes NAME ENTRYPOINT")
	}
	if b := c.String("backend"); b != "local" && b != "container" {
		return usagef("--backend %s: want local or container", b)
	}
	name, ep := c.Args().Get(0), c.Args().Get(1)
	// No core dump of this process, or of any it starts, holds a secret:
	// the limit, soft and hard, is inherited by every backend's processes
	// (the subprocess init shell sets it too; --sandbox bwrap, a machine
	// without /bin/sh and the podman client had the executor's own,
	// unlimited under many services). A failure leaves the limit as it
	// was, as before: nothing to refuse a run for.
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	// A limit that would be ignored (0, negative, under a millisecond)
	// would run with the manifest's: refused rather than failing open.
	if d := c.Duration("timeout"); c.IsSet("timeout") && d < time.Millisecond {
		return usagef("--timeout %v: give at least 1ms (for example --timeout 30s)", d)
	}
	if n := c.Int64("output-bytes"); c.IsSet("output-bytes") && n <= 0 {
		return usagef("--output-bytes %d: give a positive number of bytes", n)
	}
	if k := c.String("idempotency-key"); !utf8.ValidString(k) {
		// The ledger keeps keys as UTF-8: such a key would never match
		// itself, and would match its own U+FFFD spelling.
		return usagef("--idempotency-key: not valid UTF-8")
	}
	var input []byte
	switch in := c.String("input"); in {
	case "":
		return usagef("--input FILE or --input - is required")
	case "-":
		if term.IsTerminal(int(os.Stdin.Fd())) {
			// It waited without a word for what was typed.
			fmt.Fprintln(o.stderr, "reading the input from the terminal: type one JSON document, then Ctrl-D")
		}
		if input, err = io.ReadAll(io.LimitReader(os.Stdin, 64<<20+1)); err != nil {
			return usagef("--input -: %v", err)
		}
		if len(input) > 64<<20 {
			return usagef("--input -: larger than 64 MiB")
		}
	default:
		if input, err = inputFile("--input", in, 64<<20); err != nil {
			return err
		}
	}
	// Which --input, and why not: "--input: not one JSON document" said
	// neither, for an empty stdin (a job whose pipe gave nothing) as for a
	// typo in a file.
	if len(bytes.TrimSpace(input)) == 0 {
		return usagef("--input %s is empty: give one JSON document, {} for a request without input", c.String("input"))
	}
	if !json.Valid(input) {
		// Decoded only to say why (a copy of the input, on this path only).
		var doc json.RawMessage
		err := json.Unmarshal(input, &doc)
		return usagef("--input %s: not one JSON document (%v)", c.String("input"), err)
	}
	if !utf8.Valid(input) {
		// json.Valid takes any bytes inside a string: the harness could
		// not read the request (invoke refuses it input_invalid).
		return usagef("--input %s: not valid UTF-8 (JSON text is UTF-8; escape binary data, as base64 say)", c.String("input"))
	}
	resolve, err := secretResolver(c.StringSlice("secret"))
	if err != nil {
		return err
	}
	if err := secretNotForwarded(c.StringSlice("secret"), c.StringSlice("allow-env")); err != nil {
		return err
	}
	if err := allowNamesOnly(c.StringSlice("allow-env")); err != nil {
		return err
	}
	sd, err := stateDir(c)
	if err != nil {
		return err
	}
	lps, err := ledgerPaths(c, false)
	if err != nil {
		return err
	}
	local := c.String("backend") == "local"
	bwrap := false
	switch c.String("sandbox") {
	case "":
	case "bwrap":
		if !local {
			return usagef("--sandbox is for local runs: a container run is contained by podman")
		}
		bwrap = true
	default:
		return usagef("--sandbox %s: the sandbox is bwrap", c.String("sandbox"))
	}
	var secretMode string
	switch c.String("secret-delivery") {
	case "pipe":
	case "path":
		if local {
			return usagef("--secret-delivery path is for container runs: a local run gets its secrets by pipe")
		}
		secretMode = podman.SecretPath
	default:
		return usagef("--secret-delivery %s: want pipe or path", c.String("secret-delivery"))
	}
	if local && c.Bool("unenforced-limits") {
		return usagef("--unenforced-limits is for container runs (--backend container)")
	}
	if local && c.String("ca-bundle") != "" {
		return usagef("--ca-bundle is for container runs (--backend container): the pinned image's registry; a local run reads no registry")
	}
	// The image's registry trusts --ca-bundle's CAs, for the verify's
	// reads and the executor's manifest read, as install's did.
	ro, err := registryRemote(c)
	if err != nil {
		return err
	}
	// The ledger is opened before the pin is verified, not between the
	// verify and the spawn: Open reads the whole ledger where its
	// checkpoint is missing or stale (~1.3 s for 100,000 receipts on 2
	// cores, ~0.3 s from the checkpoint, which hashes the ledger), and the
	// env verified is the env run only as long as nothing changes it in
	// between. A ledger that cannot be opened is refused first, a pin
	// refused itself still leaves no receipt (nothing is appended), and
	// no ledger where there was none: one that does not exist yet is
	// created at the intent (CreateAtBegin; Open checks that its
	// directory can be made), so a refused run leaves no file behind.
	led, err := receipts.Open(c.Context, lps[0], receipts.Options{CreateAtBegin: true})
	var nr *receipts.NotRegularError
	switch {
	case errors.As(err, &nr) && c.IsSet("ledger"):
		// A directory (the state directory, say) or a FIFO named as the
		// ledger is the caller's mistake, as in receipts scan|list|show:
		// it was refused ledger_write_failed "… is not a regular file",
		// with no next step.
		return ledgerNotAFile(nr, "run, without --ledger, writes")
	case errors.As(err, &nr):
		// The ledger's path came from --state-dir or $XDG_STATE_HOME: the
		// same refusal said neither where that path came from nor what
		// to do about it.
		return ownLedgerNotAFile(c, nr)
	case err != nil && !c.IsSet("ledger"):
		return ownLedgerRefused(c, err, lps[0])
	}
	if err != nil {
		return withLedgerAdvice(err)
	}
	defer led.Close()
	reg, err := readRegistry(c, o, name)
	if err != nil {
		return err
	}
	plat, err := pinnedPlatform(c, o)
	if err != nil {
		return err
	}
	rid, err := registryID(c)
	if err != nil {
		return err
	}
	req := pinned.Request{
		Provider: name, Entrypoint: ep, Input: input, Resolve: resolve, IdempotencyKey: c.String("idempotency-key"),
		Limits:  invoke.Budgets{TimeoutMS: c.Duration("timeout").Milliseconds(), OutputBytes: c.Int64("output-bytes")},
		Environ: os.Environ(), Allow: c.StringSlice("allow-env"),
		Verify: verify.Options{Platform: plat, StateDir: sd, RegistryID: rid},
		// A --secret the pin's manifest does not declare draws a warning
		// once the pin is read, before the run.
		OnPin: func(spec *registry.Provider) { warnUndeclared(c, o, name, spec) },
	}
	// The pin says what runs: one call verifies it (any drift refuses and
	// is recorded, as the executor's first step) and runs it (package
	// pinned; docs/executor.md).
	var res *invoke.Result
	if local {
		// Each run's working directory in $TMPDIR (else /tmp), as a
		// program's temp files go: an executor whose /tmp is read-only
		// or small sets TMPDIR.
		var tmp string
		if tmp, err = filepath.Abs(os.TempDir()); err != nil { // a relative TMPDIR, made absolute before a sandbox binds it
			return usagef("TMPDIR %q: %v", os.TempDir(), err)
		}
		// The env is read from its verification to the run's end under
		// the store's lock, shared (pinned.HoldStore): gc --envs never
		// removes it under the run.
		res, err = pinned.Run(c.Context, reg, req, pinned.Local{
			Home: o.home, OnWait: o.storeWaits(), Bwrap: bwrap,
			Executor: invoke.Subprocess{Ledger: led, WorkdirParent: tmp},
		})
	} else {
		// podman pulls with the registry credentials this command's
		// environment names, as image build and verify read them.
		penv := []string{podman.DefaultPath}
		for _, k := range podman.AuthVars {
			if v := os.Getenv(k); v != "" {
				penv = append(penv, k+"="+v)
			}
		}
		// And podman's pull trusts them too.
		trust, cleanup, terr := podmanTrust(c)
		if terr != nil {
			return terr
		}
		defer cleanup()
		res, err = pcontainer.Run(c.Context, reg, req, pcontainer.Options{
			Verify:   vcontainer.Options{Image: image.VerifyOptions{Remote: ro}},
			Executor: podman.Executor{Ledger: led, SecretMode: secretMode, UnenforcedLimits: c.Bool("unenforced-limits"), Environ: append(penv, trust...), Remote: ro},
		})
		// An image refused for its registry's certificate: the run again
		// with --ca-bundle FILE (ca_bundle).
		caBundleRemedy(c, err)
	}
	var (
		rr *invoke.RecordedRefusal
		ve *pinned.VerifyError
	)
	if err != nil && res == nil {
		if errors.As(err, &ve) {
			// Refused before the pin named what would run: no receipt.
			return ve.Err
		}
		if errors.As(err, &rr) {
			// Refused after its intent: the ledger has the receipt, and
			// the refusal says where.
			return &withReceipt{err: err, attempt: rr.AttemptID, ledger: lps[0], show: receiptShow(c, rr.AttemptID, lps[0])}
		}
		return withLedgerAdvice(err)
	}
	// A Result with an error: the run happened, and its outcome could not
	// be written (the ledger keeps the intent, an orphan). Not a refusal:
	// the result is shown, and the exit is a failure.
	return emitRun(o, res, name, ep, lps[0], func(attempt string) string { return receiptShow(c, attempt, lps[0]) }, err)
}

// podmanTrust is what of podman's environment makes its pull trust the
// CAs this command's reads trust: podman reads the system pool as Go
// does, from SSL_CERT_FILE (else the system's bundle) and the
// directories of SSL_CERT_DIR (else /etc/ssl/certs and
// /etc/pki/tls/certs), so this command's SSL_CERT_FILE and SSL_CERT_DIR
// are passed on (podman ran with PATH and the registry credentials
// alone: the refusal's advice, a PEM file named by SSL_CERT_FILE, let
// the verify through and not the pull), and --ca-bundle's certificates
// are written alone into a directory of this run's, removed by cleanup,
// added to SSL_CERT_DIR's. Without it, podman pulled from a registry
// under a private CA with the system pool alone, after the verify had
// trusted --ca-bundle.
func podmanTrust(c *cli.Context) (env []string, cleanup func(), err error) {
	cleanup = func() {}
	if v := os.Getenv("SSL_CERT_FILE"); v != "" {
		env = append(env, "SSL_CERT_FILE="+v)
	}
	dirs := os.Getenv("SSL_CERT_DIR")
	f := c.String("ca-bundle")
	if f == "" {
		if dirs != "" {
			env = append(env, "SSL_CERT_DIR="+dirs)
		}
		return env, cleanup, nil
	}
	pem, err := inputFile("--ca-bundle", f, maxInputFile)
	if err != nil {
		return nil, cleanup, err
	}
	// A temporary directory that cannot be written is refused as a
	// layout that cannot be staged there is (container_unavailable,
	// set_tmpdir): the run again with TMPDIR naming one that can.
	unwritable := func(err error) error {
		return refusal.Wrap(refusal.ContainerUnavailable, err, "cannot write --ca-bundle's certificates for podman's pull into the temporary directory %s: give a TMPDIR this user may write", os.TempDir()).
			WithRemedy(refusal.ActionSetTempDir, "")
	}
	dir, err := os.MkdirTemp("", "cruxprov-ca-")
	if err != nil {
		return nil, cleanup, unwritable(err)
	}
	cleanup = func() { os.RemoveAll(dir) }
	if err := os.WriteFile(filepath.Join(dir, "ca-bundle.pem"), pem, 0o644); err != nil {
		cleanup()
		return nil, func() {}, unwritable(err)
	}
	if dirs == "" {
		dirs = "/etc/ssl/certs:/etc/pki/tls/certs"
	}
	return append(env, "SSL_CERT_DIR="+dirs+":"+dir), cleanup, nil
}

// receiptShow is the command that shows attempt's receipt.
func receiptShow(c *cli.Context, attempt, ledger string) string {
	show := "cruxprov receipts show " + attempt
	if c.IsSet("ledger") || c.IsSet("state-dir") {
		show += " --ledger " + ledger
	}
	return show
}

// withAdvice is a refusal with what to do about it where its cause does
// not say (app.go appends it to the refused line and the --json detail).
type withAdvice struct {
	err    error
	advice string
}

func (e *withAdvice) Error() string { return e.err.Error() }
func (e *withAdvice) Unwrap() error { return e.err }

// withLedgerAdvice adds ledgerAdvice to a ledger that refused to open or
// to take a run's intent (ledger_write_failed, nothing ran): a full file
// system said only "short write", a read-only one "read-only file
// system", with nothing of what to do, where an outcome's said it.
func withLedgerAdvice(err error) error {
	if refusal.CodeOf(err) != refusal.LedgerWriteFailed {
		return err
	}
	grantWrite(err)
	if a := unsaidLedgerAdvice(err); a != "" {
		return &withAdvice{err: err, advice: a}
	}
	return err
}

// grantWrite gives a ledger_write_failed refusal with no remedy, of a
// file or directory this user owns and may not write for its mode (a
// ledger kept read-only, a state directory of mode 0555), the remedy
// grant_write: chmod u+w PATH. Its words said to make it writable, and
// no "to fix:" line said how, though for one's own file it is one
// command. Another user's file, or one writable by its mode (an
// immutable attribute, a security module), gets none.
func grantWrite(err error) {
	var (
		re *refusal.Error
		pe *fs.PathError
	)
	if !errors.As(err, &re) || re.Remedy != nil || !errors.Is(err, syscall.EACCES) || !errors.As(err, &pe) || keyLocksError(err) {
		return
	}
	st, serr := os.Stat(pe.Path)
	if serr != nil {
		return
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || int(sys.Uid) != os.Geteuid() || st.Mode().Perm()&0o200 != 0 || !(st.Mode().IsRegular() || st.IsDir()) {
		return
	}
	re.WithRemedy(refusal.ActionGrantWrite, pe.Path)
}

// ownLedgerRefused is the refusal of this host and user's own ledger
// (its path from --state-dir DIR or $XDG_STATE_HOME: the caller named
// no ledger) that the file system would not make or open: a file where
// a directory of its path must be says which (ownLedgerPathBlocked);
// a state directory that is not there and cannot be made (under /proc,
// in a directory this user may not write, on a read-only or full file
// system) carries the remedy set_state_dir, another state directory.
// It said only the file system's error, with no remedy. One that is
// there keeps its floors, which another would start afresh: its
// refusal says what to mend, as before.
func ownLedgerRefused(c *cli.Context, err error, path string) error {
	if errors.Is(err, syscall.ENOTDIR) {
		return ownLedgerPathBlocked(c, path)
	}
	if stateDirOnKernelFS(err) {
		return err
	}
	var (
		re *refusal.Error
		pe *fs.PathError
	)
	if _, serr := os.Stat(filepath.Dir(filepath.Dir(path))); serr == nil {
		return withLedgerAdvice(err)
	}
	if errors.As(err, &re) && re.Code == refusal.LedgerWriteFailed && re.Remedy == nil && errors.As(err, &pe) && !keyLocksError(err) {
		for _, e := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOSPC, syscall.EDQUOT, syscall.ENOENT, syscall.ELOOP, syscall.ENAMETOOLONG} {
			if errors.Is(err, e) {
				re.WithRemedy(refusal.ActionSetStateDir, pe.Path)
				break
			}
		}
	}
	return withLedgerAdvice(err)
}

// stateDirOnKernelFS gives err, the refusal of this host and user's own
// ledger (its path from --state-dir DIR or $XDG_STATE_HOME), the remedy
// set_state_dir where the ledger's path is on a file system of the
// kernel's (/sys, /proc: a *kernelfs.Error), and reports whether it is.
// A state directory there, whether it is there or not, keeps no floors,
// and no one can mend it: it was told to make /sys writable by this
// user, or to lift an immutable attribute from /proc/self.
func stateDirOnKernelFS(err error) bool {
	var (
		re *refusal.Error
		ke *kernelfs.Error
	)
	if !errors.As(err, &re) || re.Code != refusal.LedgerWriteFailed || !errors.As(err, &ke) {
		return false
	}
	if re.Remedy == nil {
		re.WithRemedy(refusal.ActionSetStateDir, ke.Path)
	}
	return true
}

// withReceipt is a run's refusal that its ledger records: the error line
// and the --json document name the receipt (app.go).
type withReceipt struct {
	err                   error
	attempt, ledger, show string
}

func (e *withReceipt) Error() string { return e.err.Error() }
func (e *withReceipt) Unwrap() error { return e.err }

// holdStore takes the store's lock shared for a read of an env (verify,
// env verify; a run takes it in pinned.Run): pinned.HoldStore, saying
// on stderr when it waits.
func holdStore(ctx context.Context, o *opts) (func(), error) {
	return pinned.HoldStore(ctx, o.home, o.storeWaits())
}

// undeclaredSecrets are the refs of the --secret flags the pin's manifest
// does not declare (warnUndeclared): the name_secret remedy leaves them
// out of the run it advises, since they are not delivered. It kept them,
// and a run refused for the declared secret a typo missed printed a fix
// with the typo still in it, which drew the same warning again.
var undeclaredSecrets []string

// warnUndeclared warns of each --secret for a ref the pin's manifest does
// not declare (a typo of a ref, most likely): only the declared secrets
// are delivered, and another was passed over without a word.
func warnUndeclared(c *cli.Context, o *opts, name string, spec *registry.Provider) {
	for _, s := range c.StringSlice("secret") {
		if ref, _, _ := strings.Cut(s, "="); !slices.Contains(spec.Secrets, ref) {
			undeclaredSecrets = append(undeclaredSecrets, ref)
			declared := "none"
			if len(spec.Secrets) > 0 {
				declared = strings.Join(spec.Secrets, ", ")
			}
			o.warn(fmt.Sprintf("--secret %s: %s declares no such secret (it declares %s); it is not delivered", ref, name, declared))
		}
	}
}

// emitRun prints a run's result (both backends).
// show is the command that shows an attempt's receipt.
func emitRun(o *opts, res *invoke.Result, name, ep, ledger string, show func(attempt string) string, unrecorded error) error {
	type receiptError struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	out := struct {
		*invoke.Result
		Provider     string        `json:"provider"`
		Entrypoint   string        `json:"entrypoint"`
		Ledger       string        `json:"ledger"`
		ReceiptError *receiptError `json:"receipt_error,omitempty"`
	}{res, name, ep, ledger, nil}
	lost := ""
	if unrecorded != nil {
		code, detail := refusal.LedgerWriteFailed, unrecorded.Error()
		var r *refusal.Error
		if errors.As(unrecorded, &r) {
			code, detail = r.Code, r.Message()
		}
		out.ReceiptError = &receiptError{Code: string(code), Detail: oneLine(detail)}
		// The ledger at its path shows the attempt as an orphan, unless
		// the file was moved or replaced during the run: the intent is
		// then in the file moved away, and the one there has no trace.
		orphan := "which shows the attempt as an orphan"
		if me := (*receipts.MovedError)(nil); errors.As(unrecorded, &me) {
			orphan = "and the attempt's intent, an orphan, is in the file that was moved away from " + me.Path + ", not in the one there now"
		}
		lost = fmt.Sprintf("; its outcome could not be written to the ledger (%s: %s), %s%s", code, detail, orphan, unsaidLedgerAdvice(unrecorded))
	}
	if err := o.emit("cruxprov.run/v1", out, func(w io.Writer) {
		if res.Replayed {
			// The ledger keeps the result's digest, not its value.
			// AttemptID is this replay's own attempt, not the earlier
			// one that ran (its outcome's replay_of names that one).
			// It names the attempt that ran and how to see its receipt:
			// the line named only this replay's attempt, whose receipt
			// is a copy.
			fmt.Fprintf(o.stderr, "replayed: attempt %s returned the recorded ok outcome of attempt %s, the earlier run under this idempotency key and input; its result (%s) is not kept, only its digest, in %s; what ran: %s\n",
				res.AttemptID, res.ReplayOf, res.ResultDigest, ledger, show(res.ReplayOf))
			return
		}
		if res.Status == invoke.StatusOK {
			w.Write(append(res.Value, '\n'))
		}
	}); err != nil {
		return err
	}
	if res.Status != invoke.StatusOK {
		msg := string(res.Status)
		if e := res.Error; e != nil {
			if e.Code != msg { // "timeout: killed after…", not "timeout: timeout: …"
				msg += ": " + e.Code
			}
			msg += ": " + invoke.Clip(e.Message, invoke.ReceiptMessage)
		}
		return &reportedError{code: exitFailure, err: fmt.Errorf("the run of %s %s ended %s (attempt %s, receipt in %s; its stderr and egress: %s)%s", name, ep, msg, res.AttemptID, ledger, show(res.AttemptID), lost)}
	}
	if unrecorded != nil {
		return &reportedError{code: exitFailure, err: fmt.Errorf("the run of %s %s ended ok (attempt %s)%s; the result above is the run's", name, ep, res.AttemptID, lost)}
	}
	return nil
}

// unsaidLedgerAdvice is ledgerAdvice of err, or "" where err's words
// say it already (its first clause, up to any ", or"): receipts' refusal
// of a ledger it cannot open says what to do itself, for a Go executor,
// and the line said it twice.
func unsaidLedgerAdvice(err error) string {
	a := ledgerAdvice(err)
	head, _, _ := strings.Cut(strings.TrimPrefix(a, "; "), ", or ")
	if a == "" || strings.Contains(err.Error(), head) {
		return ""
	}
	return a
}

// keyLocksError reports whether err is about a ledger's key locks (its
// in-flight lock file, <ledger>.inflight), which only a run with an
// idempotency key takes.
func keyLocksError(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.HasSuffix(pe.Path, ".inflight")
}

// ledgerAdvice is what to do about an outcome the ledger could not take,
// where its cause says nothing of that itself: a full file system, or a
// mode or mount that stopped the writes (a file moved or replaced says
// it in its own words).
func ledgerAdvice(err error) string {
	if fe := (*registry.FloorError)(nil); errors.As(err, &fe) {
		// A verifier's floors: their refusal says what to do itself
		// (another state directory, not the ledger's).
		return ""
	}
	var pe *fs.PathError
	errors.As(err, &pe)
	switch {
	case errors.As(err, new(*kernelfs.Error)):
		// A ledger on /sys or /proc: its refusal says what to do itself
		// (another file system), where the error's own advice (make the
		// directory writable, lift an immutable attribute) is no one's
		// to follow.
		return ""
	case keyLocksError(err):
		// The in-flight lock file's refusal says what to do itself
		// (receipts.openKeyLocks: one not a regular file, one this user
		// may not write).
		return ""
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "; free space on the ledger's file system (or raise its quota)"
	case errors.Is(err, syscall.EROFS):
		return "; its file system is mounted read-only: remount it read-write, or give --ledger a path on another"
	case errors.Is(err, syscall.EACCES):
		// A ledger not made yet: its directories are made in the nearest
		// one there, which is what must be writable (a state directory
		// of mode 0555, say); the ledger and its directory are not there.
		if pe != nil && pe.Op == "access" {
			if st, serr := os.Stat(pe.Path); serr == nil && st.IsDir() {
				return "; make the directory " + shellQuote(pe.Path) + " writable by this user (a run makes what is missing of the ledger's path in it)"
			}
		}
		return "; make the ledger and its directory writable by this user"
	case errors.Is(err, syscall.EPERM):
		return "; an immutable attribute (lsattr) or a security module stops writes to the ledger: lift it"
	}
	return ""
}
