package main

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/sign"
)

func timeNow() time.Time { return time.Now() }

func init() {
	register(&cli.Command{
		Name:        "key",
		Usage:       "signing keys: generate, trust, untrust, list",
		UsageText:   "cruxprov key generate|trust|untrust|list …",
		Description: "Example:\n   cruxprov key generate --out ops\n   cruxprov key trust ops.pub --name ops --role approver",
		Subcommands: []*cli.Command{{
			Name:      "generate",
			Usage:     "make an ECDSA P-256 key pair (PREFIX.key encrypted as cosign writes it, PREFIX.pub)",
			UsageText: "cruxprov key generate --out PREFIX",
			Description: "Writes PREFIX.key (mode 0600, \"ENCRYPTED SIGSTORE PRIVATE KEY\": scrypt + NaCl secretbox,\n" +
				"readable by cosign), then PREFIX.pub (PEM \"PUBLIC KEY\"), each whole or not at all. The\n" +
				"password comes from CRUXPROV_KEY_PASSWORD or a prompt on the terminal. Existing files\n" +
				"are not overwritten; a missing directory of PREFIX is made (mode 0700).\n\n" +
				"Interrupted (killed, a power loss), the same command run again finishes the pair: a\n" +
				"PREFIX.key (0600, this user's) without PREFIX.pub is opened with the password given\n" +
				"and its public key written (\"completed\": true in --json); a wrong password writes\n" +
				"nothing. The temp files of a killed run, .tmp-NAME.key-N and .tmp-NAME.pub-N beside\n" +
				"them, are no keys to use: the run again removes them. Runs writing in one directory\n" +
				"take turns (a lock on the directory): a second one waits, saying so.\n\n" +
				"Example:\n   CRUXPROV_KEY_PASSWORD=… cruxprov key generate --out ~/keys/alice\n   cruxprov key trust ~/keys/alice.pub",
			Flags: []cli.Flag{&cli.StringFlag{Name: "out", Usage: "file `PREFIX`", Required: true}},
			Action: func(c *cli.Context) error {
				o, err := globals(c)
				if err != nil {
					return err
				}
				if c.NArg() != 0 {
					return usagef("key generate takes no arguments")
				}
				prefix := c.String("out")
				pk, completed, err := keyPair(c.Context, o, prefix)
				if err != nil {
					return err
				}
				r := map[string]any{"private_key": prefix + ".key", "public_key": prefix + ".pub", "digest": pk.Digest()}
				if completed {
					r["completed"] = true
				}
				return o.emit("cruxprov.key.generate/v1", r, func(w io.Writer) {
					if o.quiet { // the result alone: the key's digest
						fmt.Fprintln(w, pk.Digest())
						return
					}
					if completed {
						fmt.Fprintf(w, "completed the pair of an interrupted key generate: %s.key kept as it was\n", prefix)
					}
					fmt.Fprintf(w, "private key %s.key (0600)\npublic key  %s.pub\ndigest      %s\n", prefix, prefix, pk.Digest())
				})
			},
		}, {
			Name:      "trust",
			Usage:     "trust a public key (the root of trust in an empty registry; a change-set after that)",
			UsageText: "cruxprov key trust PUB [--name N] [--role approver|builder]",
			Description: "The first key trusted in an empty registry becomes its root of trust (an approver)\n" +
				"at once. Every later key is proposed as a trust-key change-set that the current\n" +
				"threshold of approvers must approve (cruxprov changeset approve). A key trusted\n" +
				"already under this name and role (the same command run again) changes nothing\n" +
				"and says so (exit 0, \"already\": true in --json).\n\n" +
				"Example:\n   cruxprov key trust alice.pub\n   cruxprov key trust ci.pub --name ci --role builder",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "name", Usage: "the key's `NAME` (default: PUB's file name without .pub)"},
				&cli.StringFlag{Name: "role", Value: registry.RoleApprover, Usage: "`ROLE`: approver (counts toward approvals) or builder"},
			},
			Action: func(c *cli.Context) error {
				o, reg, err := openRegistry(c, 1)
				if err != nil {
					return err
				}
				pub, err := inputFile("key trust", c.Args().First(), 1<<20)
				if err != nil {
					return err
				}
				name := c.String("name")
				if name == "" {
					name = strings.ToLower(strings.TrimSuffix(filepath.Base(c.Args().First()), ".pub"))
				}
				// What the person typed is checked here, as usage: the
				// registry's refusals are for change-set documents.
				if !registry.ValidKeyName(name) {
					return usagef("key name %q: want 1 to 128 of lowercase letters, digits, '.', '_', '-', starting and ending with a letter or digit (give --name)", name)
				}
				if r := c.String("role"); r != registry.RoleApprover && r != registry.RoleBuilder {
					return usagef("--role %q: want approver or builder", r)
				}
				if _, err := sign.ParsePublicKey(pub); err != nil {
					var re *refusal.Error
					if errors.As(err, &re) {
						err = errors.New(re.Detail)
					}
					if strings.Contains(string(pub), "PRIVATE KEY-----") {
						return usagef("%s is a private key: trust its public key (the PREFIX.pub that key generate wrote beside it)", c.Args().First())
					}
					return usagef("%s is not a public key (PEM \"PUBLIC KEY\", ECDSA P-256, as key generate writes PREFIX.pub): %v", c.Args().First(), err)
				}
				res, err := reg.TrustKey(c.Context, registry.Key{Name: name, Role: c.String("role"), PEM: string(pub)}, operator())
				if err != nil {
					return err
				}
				return o.emit("cruxprov.key.trust/v1", res, func(w io.Writer) {
					if res.Already {
						if o.quiet {
							fmt.Fprintln(w, res.Key.Digest)
							return
						}
						root := ""
						if res.Root {
							root = ", the ROOT OF TRUST of this registry"
						}
						fmt.Fprintf(w, "trusted already %s (%s, %s)%s: nothing changed\n", res.Key.Name, res.Key.Role, res.Key.Digest, root)
						return
					}
					if res.Root {
						if o.quiet {
							fmt.Fprintln(w, res.Key.Digest)
							return
						}
						fmt.Fprintf(w, "trusted %s (%s, %s) as the ROOT OF TRUST of this registry\n", res.Key.Name, res.Key.Role, res.Key.Digest)
						return
					}
					printProposed(w, o, fmt.Sprintf("trusting %s (%s, %s)", res.Key.Name, res.Key.Role, res.Key.Digest), res.ChangeSet)
				})
			},
		}, {
			Name:        "untrust",
			Usage:       "propose untrusting a key (a change-set)",
			UsageText:   "cruxprov key untrust NAME",
			Description: "Proposes an untrust-key change-set; pins it approved stop verifying once it applies.\n\nExample:\n   cruxprov key untrust bob",
			Action: func(c *cli.Context) error {
				o, reg, err := openRegistry(c, 1)
				if err != nil {
					return err
				}
				name := c.Args().First()
				cs, err := reg.Propose(c.Context, registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: name}}, operator())
				if err != nil {
					return err
				}
				// The key material goes under every name it is trusted as:
				// say so of the others, which key list shows as keys apart.
				if tr, err := reg.Trust(c.Context); err == nil && tr != nil {
					var d digest.Digest
					for _, k := range tr.Keys {
						if k.Name == name {
							d = k.Digest
						}
					}
					var also []string
					for _, k := range tr.Keys {
						if k.Name != name && k.Digest == d {
							also = append(also, k.Name)
						}
					}
					if len(also) > 0 {
						o.warn(fmt.Sprintf("key %s is also trusted as %s (the same key): once approved, untrusting it removes it under every name", name, strings.Join(also, ", ")))
					}
				}
				return o.emit("cruxprov.key.untrust/v1", map[string]any{"changeSet": cs}, func(w io.Writer) {
					printProposed(w, o, "untrusting "+name, cs)
				})
			},
		}, {
			Name:        "list",
			Usage:       "list the trusted keys",
			UsageText:   "cruxprov key list [--json]",
			Description: "Example:\n   cruxprov key list --json",
			Action: func(c *cli.Context) error {
				o, reg, err := readOnlyRegistry(c, 0)
				if err != nil {
					return err
				}
				t, err := reg.Trust(c.Context)
				if err != nil {
					return err
				}
				keys := []registry.Key{}
				root := ""
				if t != nil {
					keys, root = t.Keys, t.Root.Name
				}
				return o.emit("cruxprov.key.list/v1", map[string]any{"keys": keys, "root": root}, func(w io.Writer) {
					tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tROLE\tDIGEST")
					for _, k := range keys {
						n := k.Name
						if n == root {
							n += " (root)"
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\n", n, k.Role, k.Digest)
					}
					tw.Flush()
				})
			},
		}},
	})
}

// keyPair writes PREFIX.key and PREFIX.pub for key generate, or finishes
// the pair an interrupted key generate left (completed). The private key
// is written first, then the public key, each with atomicfile.WriteNew
// (whole or missing, never over a file, the directory synced), so a run
// killed at any point leaves nothing, PREFIX.key alone, or the pair,
// besides temp files (.tmp-BASE.key-N, .tmp-BASE.pub-N). Run again, it
// finds:
//   - neither file: a new pair, the temp files removed (a private key
//     that never got its name was never given to anyone);
//   - PREFIX.key alone: opened with the password given, its public key
//     written as PREFIX.pub (a wrong password writes nothing);
//   - the pair, with a temp file that is a second name of PREFIX.pub
//     (killed between its link and the temp's removal): the password
//     checked to open PREFIX.key, PREFIX.pub checked to be its public
//     key, the temp files removed;
//   - the pair otherwise, or PREFIX.pub alone: refused, as ever: a key is
//     never overwritten.
//
// Runs in one directory take turns (lockKeyDir), so that no run removes
// the temp file of another still writing it.
func keyPair(ctx context.Context, o *opts, prefix string) (pub *sign.PublicKey, completed bool, err error) {
	// The pair's file operations in order on one thread: a tracer that
	// counts system calls per thread (strace's inject when=N, as
	// TestKeyGenerateKilled kills at each) sees them as the sequence
	// they are; the Go scheduler could otherwise split them between
	// threads, and the Nth would be no thread's Nth.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The example's --out ~/keys/alice works on a new host: a missing
	// directory is made, private (it holds the key), and locked.
	made, err := mkdirSynced(filepath.Dir(prefix), 0o700)
	if err != nil {
		return nil, false, fmt.Errorf("--out %s: %w", prefix, err)
	}
	defer func() {
		// A run that wrote no key (no password, Ctrl-C at the prompt)
		// leaves no directory it made: os.Remove takes only empty ones.
		if err != nil {
			for _, d := range made {
				os.Remove(d)
			}
		}
	}()
	unlock, err := lockKeyDir(ctx, o, filepath.Dir(prefix))
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	keyPath, pubPath := prefix+".key", prefix+".pub"
	there := func(p string) (fs.FileInfo, bool) {
		fi, err := os.Lstat(p)
		return fi, err == nil || !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission)
	}
	kfi, key := there(keyPath)
	pfi, pubThere := there(pubPath)
	// Unreadable, the directory has no temp files to see; what is
	// written next fails on its own.
	keyTemps, _ := atomicfile.Temps(keyPath)
	pubTemps, _ := atomicfile.Temps(pubPath)
	temps := append(keyTemps, pubTemps...)
	regular := key && kfi != nil && kfi.Mode().IsRegular()
	// What key generate writes: 0600, this user's. Another PREFIX.key was
	// not left by an interrupted run (a key readable by others, another
	// user's): it is refused as ever, not completed and called 0600.
	if regular {
		if st, ok := kfi.Sys().(*syscall.Stat_t); kfi.Mode().Perm() != 0o600 || ok && int(st.Uid) != os.Geteuid() {
			owner := ""
			if ok {
				owner = fmt.Sprintf(", owner uid %d", st.Uid)
			}
			return nil, false, fmt.Errorf("%s exists (mode %04o%s: not a key an interrupted key generate left, which is 0600 and its user's): not overwriting a key; give --out another prefix, or move the old key away first", keyPath, kfi.Mode().Perm(), owner)
		}
	}
	switch {
	case !key && !pubThere:
		pub, err := newKeyPair(o, prefix, temps)
		return pub, false, err
	case regular && !pubThere:
		priv, err := interruptedKey(o, keyPath, pubPath)
		if err != nil {
			return nil, false, err
		}
		removeAll(temps)
		if err := atomicfile.WriteNew(pubPath, priv.Public().PEM(), 0o644); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return nil, false, keyExists(pubPath)
			}
			return nil, false, fmt.Errorf("%s: %w (%s is kept: run the same command again)", pubPath, unwrapPath(err), keyPath)
		}
		return priv.Public(), true, nil
	case regular && pfi != nil && slices.ContainsFunc(pubTemps, func(t string) bool {
		fi, err := os.Lstat(t)
		return err == nil && os.SameFile(fi, pfi)
	}):
		priv, err := interruptedKey(o, keyPath, pubPath)
		if err != nil {
			return nil, false, err
		}
		if _, ok := samePublicKey(pubPath, priv.Public().PEM()); !ok {
			return nil, false, fmt.Errorf("%s is not the public key of %s: not overwriting a key; move the pair away, or give --out another prefix", pubPath, keyPath)
		}
		removeAll(temps)
		if err := atomicfile.SyncDir(filepath.Dir(pubPath)); err != nil {
			return nil, false, err
		}
		return priv.Public(), true, nil
	case key:
		return nil, false, keyExists(keyPath)
	}
	return nil, false, keyExists(pubPath)
}

// newKeyPair makes a key pair and writes it at prefix (keyPair), removing
// temps first.
func newKeyPair(o *opts, prefix string, temps []string) (*sign.PublicKey, error) {
	pw, err := keyPassword(o, true)
	if err != nil {
		return nil, err
	}
	if len(pw) == 0 {
		return nil, usagef("an empty key password: the private key is always encrypted (set CRUXPROV_KEY_PASSWORD to the password, or type one at the prompt)")
	}
	removeAll(temps)
	priv, pub, err := sign.Generate(pw)
	if err != nil {
		return nil, err
	}
	keyPath, pubPath := prefix+".key", prefix+".pub"
	if err := atomicfile.WriteNew(keyPath, priv, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) { // made meanwhile by another process
			return nil, keyExists(keyPath)
		}
		return nil, keyWriteFailed(keyPath, err)
	}
	if err := atomicfile.WriteNew(pubPath, pub, 0o644); err != nil {
		// Where the directory could not be locked (lockKeyDir), another
		// key generate of this PREFIX may have found PREFIX.key alone
		// meanwhile and completed the pair (removing this run's
		// temp file, or linking PREFIX.pub first): the pair is whole,
		// and the key is not this run's to take back.
		if pk, ok := samePublicKey(pubPath, pub); ok {
			return pk, nil
		}
		// Half a pair whose writing failed (a full disk: not a kill,
		// which the same command run again completes) is taken back:
		// this run made it and gave it to no one, and the retry with
		// room makes the pair. Not once PREFIX.pub is linked (the
		// directory's sync failed): that would leave it alone.
		if _, lerr := os.Lstat(pubPath); lerr != nil || errors.Is(err, fs.ErrExist) {
			os.Remove(keyPath)
			atomicfile.SyncDir(filepath.Dir(keyPath))
		}
		if errors.Is(err, fs.ErrExist) {
			return nil, keyExists(pubPath)
		}
		return nil, keyWriteFailed(pubPath, err)
	}
	return sign.ParsePublicKey(pub)
}

// keyWriteFailed says which file of the pair could not be written, and
// what to do (the error names only a temp file beside it).
func keyWriteFailed(path string, err error) error {
	hint := "give --out a prefix in a directory this user can write, with room"
	switch {
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		hint = "its file system is full: free space there, or give --out a prefix elsewhere"
	case errors.Is(err, syscall.EROFS):
		hint = "its file system is read-only: give --out a prefix elsewhere"
	}
	return fmt.Errorf("--out: cannot write %s: %w; %s, and run again", path, err, hint)
}

// keyExists is key generate's refusal to write over path.
func keyExists(path string) error {
	return fmt.Errorf("%s exists: not overwriting a key; give --out another prefix, or move the old pair away first", path)
}

// samePublicKey reports whether the file path holds the public key pub
// (PEM), and returns it parsed.
func samePublicKey(path string, pub []byte) (*sign.PublicKey, bool) {
	want, err := sign.ParsePublicKey(pub)
	if err != nil {
		return nil, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	got, err := sign.ParsePublicKey(b)
	if err != nil || got.Digest() != want.Digest() {
		return nil, false
	}
	return want, true
}

// interruptedKey opens keyPath, the private key an interrupted key
// generate left, with the password given (no confirmation: the key's
// decryption checks it). Neither a file that is not a PEM private key
// nor a wrong password changes anything: both say so and what to do.
func interruptedKey(o *opts, keyPath, pubPath string) (*sign.PrivateKey, error) {
	f, err := os.OpenFile(keyPath, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	f.Close()
	if err != nil {
		return nil, err
	}
	if blk, _ := pem.Decode(b); blk == nil || !strings.HasSuffix(blk.Type, "PRIVATE KEY") {
		return nil, fmt.Errorf("%s exists without %s and is not a PEM private key (an older cruxprov's key generate killed while writing it leaves it empty or cut short): move it away and run the same command again, or give --out another prefix", keyPath, pubPath)
	}
	pw, err := keyPassword(o, false)
	if err != nil {
		return nil, err
	}
	if len(pw) == 0 {
		return nil, usagef("an empty key password: %s, kept from an interrupted key generate, is encrypted (set CRUXPROV_KEY_PASSWORD to its password, or type it at the prompt)", keyPath)
	}
	k, err := sign.LoadPrivateKey(b, pw)
	if err != nil {
		return nil, fmt.Errorf("%s, kept from an interrupted key generate, does not open: %v; nothing was written: run the same command again with the password it was made with", keyPath, err)
	}
	return k, nil
}

// lockKeyDir takes an exclusive flock(2) on the directory dir for one
// key generate, waiting (and saying so once) while another holds it, until
// ctx ends: the temp files a run finds there are then a killed run's,
// which the kernel's release of its lock tells from a live one's, and
// removing them takes no file from a run still writing it. Where the lock
// cannot be had at all (a directory this user may search but not read,
// a file system without flock, NFS's emulation of it, which needs a file
// open for writing), the run goes on without it, as before there was one:
// the lock keeps two runs of one PREFIX from failing each other, and no
// key depends on it (each file is written whole or not at all, never
// over another). unlock releases it.
func lockKeyDir(ctx context.Context, o *opts, dir string) (unlock func(), err error) {
	d, err := os.Open(dir)
	if err != nil {
		return func() {}, nil
	}
	fd := int(d.Fd())
	said := false
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { d.Close() }, nil // closing releases the lock
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			d.Close()
			return func() {}, nil
		}
		if !said {
			o.line(fmt.Sprintf("key generate: another key generate is writing in %s; waiting for it to finish", dir))
			said = true
		}
		select {
		case <-ctx.Done():
			d.Close()
			return nil, fmt.Errorf("key generate: %w while waiting for another key generate in %s; nothing was written", context.Cause(ctx), dir)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// removeAll removes the temp files of an interrupted run, best effort:
// one left is only a file more.
func removeAll(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// mkdirSynced makes dir and its missing parents with perm and syncs the
// parent of each it made: the key files' directory survives a power loss
// with them. It returns those it made, deepest first.
func mkdirSynced(dir string, perm os.FileMode) ([]string, error) {
	var made []string
	for d := dir; filepath.Dir(d) != d; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return nil, err
	}
	for _, d := range made {
		if err := atomicfile.SyncDir(filepath.Dir(d)); err != nil {
			return made, err
		}
	}
	return made, nil
}
