package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/aside"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/sign"
)

func init() {
	register(&cli.Command{
		Name:        "registry",
		Usage:       "the governance registry's hash-chained history: log, repair",
		UsageText:   "cruxprov registry log|repair …",
		Description: "Example:\n   cruxprov registry log --verify\n   cruxprov registry repair",
		Subcommands: []*cli.Command{{
			Name:      "log",
			Usage:     "print the history (every mutation, hash-chained)",
			UsageText: "cruxprov registry log [--verify] [--json]",
			Description: "Prints every history entry: interface registered, key trusted or untrusted, policy\n" +
				"changed, change-set proposed, approved or rejected, pin accepted or retired. The chain is\n" +
				"always checked (registry_corrupt when an entry was rewritten, reordered or deleted);\n" +
				"--verify also replays the trust state and checks every accepted pin's signatures; a pin\n" +
				"whose approval expired, below a threshold raised since, or approved by a key untrusted\n" +
				"since, is listed as not runnable (runs refuse it) and the audit holds: it fails only on\n" +
				"what breaks the history, the trust state or a pin.\n\n" +
				"Example:\n   cruxprov registry log\n   cruxprov registry log --verify --json",
			Flags: []cli.Flag{&cli.BoolFlag{Name: "verify", Usage: "also check the trust state and every accepted pin"}},
			Action: func(c *cli.Context) error {
				o, reg, err := readOnlyRegistry(c, 0)
				if err != nil {
					return err
				}
				var (
					log         []registry.Entry
					notRunnable []registry.Unrunnable
				)
				if c.Bool("verify") {
					log, notRunnable, err = registry.Audit(c.Context, reg, nowFunc())
				} else {
					log, err = reg.Log(c.Context)
				}
				if err != nil {
					return err
				}
				// The JSON carries each entry's chain (prev, hash) and the
				// registry's identity, its first entry's hash, which a
				// verifier that must not trust on first use pins.
				type chained struct {
					registry.Entry
					Prev digest.Digest `json:"prev"`
					Hash digest.Digest `json:"hash"`
				}
				lines := make([]chained, len(log))
				var id digest.Digest
				for i, e := range log {
					lines[i] = chained{e, e.Prev, e.Hash}
				}
				if len(log) > 0 {
					id = log[0].Hash
				}
				out := map[string]any{"registry_id": id, "entries": lines, "verified": false}
				if c.Bool("verify") {
					out["verified"], out["not_runnable"] = true, notRunnable
				}
				return o.emit("cruxprov.registry.log/v1", out, func(w io.Writer) {
					if len(log) > 0 {
						fmt.Fprintf(w, "registry id %s\n", id)
					}
					tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "SEQ\tAT\tEVENT\tSUBJECT\tDIGEST\tREV\tHASH")
					for _, e := range log {
						fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", e.Seq, e.At.Format("2006-01-02T15:04:05Z"), e.Event, e.Subject, short(e.Digest), e.Revision, short(e.Hash))
					}
					tw.Flush()
					if c.Bool("verify") {
						fmt.Fprintf(w, "history chain, trust state and accepted pins verified (%s)\n", count(len(log), "entry", "entries"))
						for _, u := range notRunnable {
							fmt.Fprintf(w, "not runnable: %s revision %d (%s: %s)\n", u.Provider, u.Revision, u.Code, u.Detail)
						}
					}
				})
			},
		}, {
			Name:      "repair",
			Usage:     "write again the registry files its history says otherwise (a pin file put back, interfaces.json, trust.json lost)",
			UsageText: "cruxprov registry repair [--root-key PUB] [--json]",
			Description: "A pin file put back from before (an older, validly signed pin) or lost is refused\n" +
				"by verify and by every change of its provider. repair writes it again, under the\n" +
				"registry's lock, from the change-set the history accepted (or retired) last for that\n" +
				"provider, when it is still in changesets/. An interfaces.json that is not what the\n" +
				"history registered (an interface's digest edited) is refused wherever it decides\n" +
				"something; repair writes it again from the history's registrations. A trust.json\n" +
				"lost (deleted) is made again from the history's governance steps, each from its\n" +
				"approved change-set in changesets/, replayed as verify replays it; the root of trust's\n" +
				"public key, which only trust.json held, is given with --root-key (the PUB its first\n" +
				"key trust was given). A trust.json edited or put back is refused: restore it.\n" +
				"It adds nothing to the history, and leaves a pin file newer than the history's as it is.\n\n" +
				"Example:\n   cruxprov registry repair\n   cruxprov registry repair --root-key ~/keys/alice.pub",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "root-key", Usage: "the root of trust's public key `PUB`, for a trust.json lost"},
			},
			Action: func(c *cli.Context) error {
				// A --home that names nothing has nothing to repair: it
				// is said so (noStore), as registry log says it; repair
				// made <home>/registry there and answered "nothing to
				// repair", exit 0, for a mistyped --home.
				o, reg, err := openRegistryAs(c, 0, nil, func(ctx context.Context, root string) (*registry.Dir, error) {
					if err := noStore(filepath.Dir(root)); err != nil {
						return nil, err
					}
					return registry.OpenDir(ctx, root)
				})
				if err != nil {
					return err
				}
				var opts registry.RepairOptions
				if c.IsSet("root-key") {
					if opts.RootKey, err = inputFile("--root-key", c.String("root-key"), 1<<20); err != nil {
						return err
					}
					if _, err := sign.ParsePublicKey(opts.RootKey); err != nil {
						return usagef("--root-key %s is not a public key (PEM \"PUBLIC KEY\", as key generate writes PREFIX.pub)", c.String("root-key"))
					}
				}
				r, err := reg.RepairWith(c.Context, opts)
				if err != nil {
					return err
				}
				// A registry an older cruxprov approved: what was lost is
				// written, and its approvers' next step is said with the
				// command that takes it (verify would refuse it so).
				doc := struct {
					*registry.Repaired
					Next map[string]any `json:"next,omitempty"`
				}{Repaired: r}
				var next string
				if r.ApproveAgain != nil {
					doc.Next = refusedDocFor(r.ApproveAgain, o.homeArgs())
					next = "next: " + oneLine(string(refusal.CodeOf(r.ApproveAgain))+": "+messageOf(r.ApproveAgain))
					if _, cmdline, or := renderRemedies(refusal.RemedyOf(r.ApproveAgain), o.homeArgs()); cmdline != "" {
						next += "; to do it: " + cmdline + or
					}
				}
				return o.emit("cruxprov.registry.repair/v1", doc, func(w io.Writer) {
					if r.Trust {
						fmt.Fprintln(w, "trust.json written again from the history and its approved change-sets")
					}
					if r.Interfaces {
						fmt.Fprintln(w, "interfaces.json written again from the history")
					}
					for _, p := range r.Pins {
						fmt.Fprintf(w, "pin of %s written again from the change-set the history accepted last\n", p)
					}
					if !r.Trust && !r.Interfaces && len(r.Pins) == 0 {
						fmt.Fprintln(w, "nothing to repair: trust.json, the pin files and interfaces.json are what the history says")
					}
					if next != "" {
						fmt.Fprintln(w, next)
					}
				})
			},
		}},
	})
}

// nowFunc is the clock of the governance commands.
var nowFunc = timeNow

// openRegistry opens <home>/registry to change it and checks nargs
// positional args, then the command line's own checks (usage errors:
// what was typed, read without the store), before the open: opening
// makes the store where there is none, so a mistake on the command
// line run at a mistyped --home made a store there ("key trust x.pub"
// of a missing file, "install W" with no --platform), and the commands
// that only read found one at that path.
func openRegistry(c *cli.Context, nargs int, checks ...func(*opts) error) (*opts, *registry.Dir, error) {
	return openRegistryAs(c, nargs, checks, func(ctx context.Context, root string) (*registry.Dir, error) {
		// A --home that is a file is no store to change, as the store's
		// own open says; the registry refused it registry_corrupt.
		home := filepath.Dir(root)
		if at := homeNotDir(home); at != "" {
			return nil, fmt.Errorf("cannot use %s as the store: %s is a file, not a directory; give --home (or CRUXPROV_HOME) a directory you can write", home, at)
		}
		return registry.OpenDir(ctx, root)
	})
}

// storeToChange is openRegistry's check for the commands that only a
// store with a registry could do (key untrust, provider retire, policy
// set, changeset approve and reject: a registry that trusts no key yet,
// accepted no pin and holds no change-set refuses each): where --home names no store (nothing there, or a directory of
// other things) they refuse code, what is refused said as the read
// commands say there is no store, rather than make a store there only to
// refuse in it, which the read commands at a mistyped --home then found.
// A --home that is a file is left to openRegistry ("cannot use DIR as the
// store").
func storeToChange(code refusal.Code, what string) func(*opts) error {
	return func(o *opts) error {
		if homeNotDir(o.home) != "" {
			return nil
		}
		if err := noStore(o.home); err != nil {
			return refusal.Wrap(code, err, "%s", what)
		}
		return nil
	}
}

// readOnlyRegistry is openRegistry for the commands that only read (the
// lists, show, diff, registry log): it makes nothing, neither the store
// nor the registry's directories, and a --home that names nothing is
// said so (noStore) rather than answered as an empty store.
func readOnlyRegistry(c *cli.Context, nargs int) (*opts, *registry.Dir, error) {
	return openRegistryAs(c, nargs, nil, func(ctx context.Context, root string) (*registry.Dir, error) {
		if err := noStore(filepath.Dir(root)); err != nil {
			return nil, err
		}
		return registry.OpenDirReadOnly(ctx, root)
	})
}

func openRegistryAs(c *cli.Context, nargs int, checks []func(*opts) error, open func(context.Context, string) (*registry.Dir, error)) (*opts, *registry.Dir, error) {
	o, err := globals(c)
	if err != nil {
		return nil, nil, err
	}
	if c.NArg() != nargs {
		return nil, nil, usagef("%s takes %s, got %d", c.Command.Name, count(nargs, "argument"), c.NArg())
	}
	for _, check := range checks {
		if err := check(o); err != nil {
			return nil, nil, err
		}
	}
	reg, err := open(c.Context, filepath.Join(o.home, "registry"))
	if err != nil {
		return nil, nil, err
	}
	return o, reg, nil
}

// operator names who proposes: the user name.
func operator() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return fmt.Sprintf("uid %d", os.Getuid())
}

func short(d digest.Digest) string {
	if d.IsZero() {
		return "-"
	}
	return d.String()[:19]
}

// changeSetRef is a change-set id as typed, its form checked
// (parseChangeSetRef): a full digest, or a hex prefix (lower case) that
// resolve looks up in the registry.
type changeSetRef struct {
	full   digest.Digest
	prefix string
}

// parseChangeSetRef checks that s can name a change-set (sha256:<hex>,
// <hex>, or a hex prefix of at least 8 digits), without the registry: the
// commands that change it check so before they open it (openRegistry),
// then resolve what it returns; show and diff, which only read, do both
// after the open (changeSetID).
func parseChangeSetRef(s string) (changeSetRef, error) {
	s = strings.TrimPrefix(s, digest.Prefix)
	if d, err := digest.ParseHex(s); err == nil {
		return changeSetRef{full: d}, nil
	}
	if len(s) < 8 {
		return changeSetRef{}, usagef("change-set id %q: give at least 8 hex digits", s)
	}
	s = strings.ToLower(s)
	if strings.Trim(s, "0123456789abcdef") != "" {
		return changeSetRef{}, usagef("change-set id %q: not hex digits (a typo?): cruxprov changeset list shows the ids", s)
	}
	return changeSetRef{prefix: s}, nil
}

// resolve is the change-set id r names: its full digest, or the one
// change-set whose id starts with its prefix.
func (r changeSetRef) resolve(ctx context.Context, reg registry.Reader) (digest.Digest, error) {
	if r.prefix == "" {
		return r.full, nil
	}
	all, err := reg.ChangeSets(ctx)
	if err != nil {
		return digest.Digest{}, err
	}
	var found []digest.Digest
	for _, cs := range all {
		if strings.HasPrefix(cs.Metadata.ID.Hex(), r.prefix) {
			found = append(found, cs.Metadata.ID)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return digest.Digest{}, refusal.New(refusal.ChangesetInvalid, "no change-set %s", r.prefix).WithRemedy(refusal.ActionReviewChangesets, "")
	}
	return digest.Digest{}, usagef("change-set id %s is ambiguous (%d match): give more digits (cruxprov changeset list shows the ids)", r.prefix, len(found))
}

// changeSetID resolves ID (sha256:<hex>, <hex>, or a unique hex prefix of
// at least 8 digits) to a change-set id: its form checked, then resolved.
func changeSetID(ctx context.Context, reg registry.Reader, s string) (digest.Digest, error) {
	r, err := parseChangeSetRef(s)
	if err != nil {
		return digest.Digest{}, err
	}
	return r.resolve(ctx, reg)
}

// keyPassword reads the private key password from CRUXPROV_KEY_PASSWORD,
// or prompts on the terminal without echo; it refuses when neither is
// available. confirm asks twice (key generate), unless nothing was typed
// the first time.
func keyPassword(o *opts, confirm bool) ([]byte, error) {
	if p, ok := os.LookupEnv("CRUXPROV_KEY_PASSWORD"); ok {
		return []byte(p), nil
	}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return nil, usagef("no key password: set CRUXPROV_KEY_PASSWORD or run on a terminal to be prompted")
	}
	fmt.Fprint(o.stderr, "key password: ")
	p, err := readPassword(fd)
	fmt.Fprintln(o.stderr)
	if err != nil {
		return nil, err
	}
	// Nothing typed is refused at once (the key is always encrypted:
	// the caller says so); asking "again:" first only delayed it.
	if confirm && len(p) > 0 {
		fmt.Fprint(o.stderr, "again: ")
		q, err := readPassword(fd)
		fmt.Fprintln(o.stderr)
		if err != nil {
			return nil, err
		}
		if string(p) != string(q) {
			return nil, usagef("the passwords differ: run it again and type the same password twice")
		}
	}
	return p, nil
}

// readPassword reads a password from the terminal fd without echo. The
// terminal keeps ISIG, so Ctrl-C at the prompt is a SIGINT, which the
// command's signal context takes and term.ReadPassword never sees: it
// would read on. So the prompt gives up on SIGINT or SIGTERM, restoring
// the terminal's echo, and the command ends as interrupted.
func readPassword(fd int) ([]byte, error) {
	st, err := term.GetState(fd)
	if err != nil {
		return nil, err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	type read struct {
		p   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		p, err := readLineNoEcho(fd)
		done <- read{p, err}
	}()
	select {
	case r := <-done:
		return r.p, r.err
	case <-sig:
		term.Restore(fd, st)
		return nil, errors.New("interrupted at the password prompt: nothing was signed")
	}
}

// readLineNoEcho reads one line from the terminal fd with its echo off
// (canonical mode and signals kept: the terminal edits the line, Ctrl-C
// is a SIGINT), restoring the terminal's settings after. A read of
// nothing (Ctrl-D at the empty prompt: the end of input) ends it with an
// error; term.ReadPassword reads on at that, and the prompt hung.
func readLineNoEcho(fd int) ([]byte, error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ECHO
	t.Lflag |= unix.ICANON | unix.ISIG
	t.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &t); err != nil {
		return nil, err
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
	var line []byte
	var b [256]byte
	for {
		n, err := unix.Read(fd, b[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			if len(line) == 0 {
				return nil, usagef("end of input at the password prompt: no key password given (set CRUXPROV_KEY_PASSWORD, or type it and press Enter)")
			}
			return line, nil // Ctrl-D after some text, twice: what was typed
		}
		line = append(line, b[:n]...)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			return line[:i], nil
		}
	}
}

// loadSigner reads and decrypts the private key file path, given as flag
// (--key, --sign-key: the name a mistake is reported under).
func loadSigner(ctx context.Context, o *opts, flag, path string) (*sign.PrivateKey, error) {
	b, err := inputFile(flag, path, 1<<20)
	if err != nil {
		return nil, err
	}
	return signerFrom(ctx, o, flag, path, b)
}

// keyFile reads the private key file path, given as flag, as inputFile
// does, and says whether it is this user's own: owned by the effective
// user and writable by neither group nor others (key generate writes it
// 0600), so that what it says before its password (the public key it
// names) is no one else's word.
func keyFile(flag, path string) (b []byte, own bool, err error) {
	b, fi, err := readInputFileInfo(path, 1<<20)
	if err != nil {
		return nil, false, inputErr(flag, path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return b, ok && int(st.Uid) == os.Geteuid() && fi.Mode().Perm()&0o022 == 0, nil
}

// approvedAlready is what approving change-set id with the key file kb
// (this user's own, when own) says without its password: the registry's
// "approved already" where the file names its public key and that key's
// approval stands; nil where the key has to sign, or its file names no
// public key (a key file of an earlier cruxprov, or cosign's), or another
// user could have written it. A name that is not a public key is refused
// here, before the password, and so is the key it names where the
// registry refuses its approval (not trusted, a builder key, a change-set
// no longer proposed that it did not approve): an approver who gave the
// wrong key typed its password to be told no.
func approvedAlready(ctx context.Context, reg *registry.Dir, id digest.Digest, kb []byte, own bool) (*registry.ApproveResult, error) {
	pub, err := sign.CarriedPublicKey(kb)
	if err != nil || pub == nil || !own {
		return nil, err
	}
	res, err := reg.ApprovedAlready(ctx, id, pub.Digest())
	if re := (*refusal.Error)(nil); errors.As(err, &re) && re.Code != refusal.RegistryCorrupt && re.Code != refusal.RegistryUnreadable {
		// Which key it is came from the file's header, not from the
		// key it seals (the password opens that): say so.
		said := *re
		said.Detail = "for the key the file's Cruxprov-Public-Key header names, before its password: " + re.Detail
		return nil, &said
	}
	return res, err
}

// signerFrom decrypts the private key file b read from path (flag's),
// with the password keyPassword gives. The decryption (scrypt, about a
// second of CPU) does not look at ctx: a signal during it ended changeset
// approve only once it was done, 1.4 s after the signal on a loaded host
// (scripts/interrupt-stress.py); ctx's end returns at once (aside.Run).
func signerFrom(ctx context.Context, o *opts, flag, path string, b []byte) (*sign.PrivateKey, error) {
	// The wrong file is a mistake in the command line, as key trust's
	// mirror mistake (a private key to trust) is.
	switch blk, _ := pem.Decode(b); {
	case blk == nil:
		return nil, usagef("%s %s is not a PEM private key (PREFIX.key, as key generate writes it)", flag, path)
	case blk.Type == "PUBLIC KEY":
		return nil, usagef("%s %s is a public key: sign with the private key (the PREFIX.key beside it)", flag, path)
	}
	pw, err := keyPassword(o, false)
	if err != nil {
		return nil, err
	}
	if len(pw) == 0 {
		// A CI variable defined with no value (a secret the job does not
		// get) or Enter at the prompt: it failed "the private key is
		// encrypted and no password was given", exit 1, naming neither
		// the key nor what to do, where no variable at all is a usage
		// error.
		return nil, usagef("%s %s: the key password is empty (CRUXPROV_KEY_PASSWORD set to nothing, or nothing typed at the prompt), and the key is encrypted: give the password it was made with in CRUXPROV_KEY_PASSWORD (in CI, from a secret this job gets), or type it at the prompt", flag, path)
	}
	k, err := aside.Run(ctx, func() (*sign.PrivateKey, error) { return sign.LoadPrivateKey(b, pw) })
	if errors.Is(err, sign.ErrWrongPassword) {
		// It said "cannot decrypt the private key (wrong password?)" and
		// no more: neither which key nor what to do.
		return nil, fmt.Errorf("%s %s: %w: run the same command again with the password it was made with (CRUXPROV_KEY_PASSWORD, or typed at the prompt)", flag, path, err)
	}
	return k, err
}
