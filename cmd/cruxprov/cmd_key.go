package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/deniedat"
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
				"readable by cosign, naming its public key in a PEM header), then PREFIX.pub (PEM\n" +
				"\"PUBLIC KEY\"), each whole or not at all. The password comes from CRUXPROV_KEY_PASSWORD\n" +
				"or a prompt on the terminal. Existing files are not overwritten; a missing directory of\n" +
				"PREFIX is made (mode 0700).\n\n" +
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
				if err := checkKeyPrefix(prefix); err != nil {
					return err
				}
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
				var (
					pub  []byte
					name string
				)
				o, reg, err := openRegistry(c, 1, func(o *opts) error {
					var err error
					if pub, err = inputFile("key trust", c.Args().First(), 1<<20); err != nil {
						return err
					}
					if name, err = trustArgs(c, pub); err != nil {
						return err
					}
					// A builder key cannot be a store's first (its root of
					// trust is an approver's): where --home names no store
					// the trust can only refuse, and it made the registry
					// there first, which the read commands and gc then
					// found at the mistyped --home (operator.md §7).
					if c.String("role") != registry.RoleApprover {
						return storeToChange(refusal.ChangesetInvalid, "cannot trust builder key "+name+": a store's first key is its root of trust, an approver's")(o)
					}
					return nil
				})
				if err != nil {
					return err
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
					printProposed(w, o, fmt.Sprintf("trusting %s (%s, %s)", res.Key.Name, res.Key.Role, res.Key.Digest), res.ChangeSet, res.Proposed)
				})
			},
		}, {
			Name:        "untrust",
			Usage:       "propose untrusting a key (a change-set)",
			UsageText:   "cruxprov key untrust NAME",
			Description: "Proposes an untrust-key change-set; pins it approved stop verifying once it applies.\n\nExample:\n   cruxprov key untrust bob",
			Action: func(c *cli.Context) error {
				name := c.Args().First()
				o, reg, err := openRegistry(c, 1, storeToChange(refusal.SignerUntrusted, "cannot untrust key "+name))
				if err != nil {
					return err
				}
				cs, already, err := reg.Propose(c.Context, registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: name}}, operator())
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
				return o.emit("cruxprov.key.untrust/v1", map[string]any{"changeSet": cs, "already": already}, func(w io.Writer) {
					printProposed(w, o, "untrusting "+name, cs, already)
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
				t, err := registry.CheckedTrust(c.Context, reg)
				if err != nil {
					return err
				}
				keys := []registry.Key{}
				root := ""
				var rootDigest digest.Digest
				if t != nil {
					keys = t.Keys
					// The root of trust is a key, not a name, and is
					// reported while that key is trusted under its name:
					// once untrusted, --json still named it root though
					// no key listed was (another key trusted since under
					// the root's name was marked root, by name).
					for _, k := range t.Keys {
						if k.Name == t.Root.Name && k.Digest == t.Root.Digest {
							root, rootDigest = k.Name, k.Digest
						}
					}
				}
				return o.emit("cruxprov.key.list/v1", map[string]any{"keys": keys, "root": root, "rootDigest": rootDigest}, func(w io.Writer) {
					tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tROLE\tDIGEST")
					for _, k := range keys {
						n := k.Name
						if n == root && k.Digest == rootDigest {
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
// the pair an interrupted key generate left (completed): sign.WritePair,
// with the password from CRUXPROV_KEY_PASSWORD or the terminal, and its
// refusals said with what to do.
func keyPair(ctx context.Context, o *opts, prefix string) (*sign.PublicKey, bool, error) {
	pub, completed, err := sign.WritePair(ctx, prefix, sign.PairOptions{
		Password: func(newKey bool) ([]byte, error) { return keyPassword(o, newKey) },
		Waiting: func(dir string) {
			o.line(fmt.Sprintf("key generate: another key generate is writing in %s; waiting for it to finish", dir))
		},
	})
	var pe *sign.PairError
	if !errors.As(err, &pe) {
		return pub, completed, err
	}
	switch pe.Kind {
	case sign.PairExists:
		return nil, false, fmt.Errorf("%v; give --out another prefix, or move the old pair away first", pe)
	case sign.PairForeign:
		return nil, false, fmt.Errorf("%v; give --out another prefix, or move the old key away first", pe)
	case sign.PairMismatch:
		return nil, false, fmt.Errorf("%v; move the pair away, or give --out another prefix", pe)
	case sign.PairDamaged:
		return nil, false, fmt.Errorf("%v: move it away and run the same command again, or give --out another prefix", pe)
	case sign.PairWrongPassword:
		return nil, false, fmt.Errorf("%v: run the same command again with the password it was made with", pe)
	case sign.PairEmptyPassword:
		if pe.Path != "" {
			return nil, false, usagef("%v (set CRUXPROV_KEY_PASSWORD to its password, or type it at the prompt)", pe)
		}
		return nil, false, usagef("%v (set CRUXPROV_KEY_PASSWORD to the password, or type one at the prompt)", pe)
	case sign.PairDirFailed:
		return nil, false, keyDirFailed(prefix, pe.Path, pe.Err)
	case sign.PairWriteFailed:
		if pe.Other != "" { // the completion's public key
			return nil, false, fmt.Errorf("%v: run the same command again", pe)
		}
		return nil, false, keyWriteFailed(pe.Path, pe.Err)
	}
	return nil, false, err
}

// checkKeyPrefix refuses an --out that names a directory, not a file
// name in one: "DIR/", "DIR/." or "DIR/..". The pair was written as the
// hidden DIR/.key and DIR/.pub (or DIR/..key), which key trust could not
// name (a key named ""), where the operator meant DIR/NAME.
func checkKeyPrefix(prefix string) error {
	switch base := filepath.Base(prefix); {
	case strings.HasSuffix(prefix, "/") || base == "." || base == "..":
		return usagef("--out %s ends in a directory, not a file name: give --out DIR/NAME (e.g. ~/keys/alice), which writes NAME.key and NAME.pub in DIR", prefix)
	}
	return nil
}

// keyDirFailed says why the directory of the pair could not be made, and
// what to do (it said only "mkdir DIR: not a directory").
func keyDirFailed(prefix, dir string, err error) error {
	hint := "give --out a prefix in a directory this user can write"
	switch {
	case errors.Is(err, syscall.ENOTDIR):
		if at := deniedat.NotDir(dir); at != "" {
			hint = at + " is a file, not a directory: give --out a prefix in a directory (DIR/NAME)"
		}
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		hint = "its file system is full: free space there, or give --out a prefix elsewhere"
	case errors.Is(err, syscall.EROFS):
		hint = "its file system is read-only: give --out a prefix elsewhere"
	}
	return fmt.Errorf("--out %s: cannot make its directory %s: %w; %s, and run again", prefix, dir, err, hint)
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

// trustArgs checks key trust's command line, PUB's bytes read: the key's
// name (PUB's file name without .pub unless --name), its role and that
// PUB is a public key. What the person typed is checked here, as usage,
// before the registry is opened: the registry's refusals are for
// change-set documents.
func trustArgs(c *cli.Context, pub []byte) (string, error) {
	name := c.String("name")
	if name == "" {
		name = strings.ToLower(strings.TrimSuffix(filepath.Base(c.Args().First()), ".pub"))
	}
	if !registry.ValidKeyName(name) {
		// "(give --name)" only where the name is PUB's file
		// name: it said so of a --name given.
		if c.IsSet("name") {
			return "", usagef("--name %q is no key name: want 1 to 128 of lowercase letters, digits, '.', '_', '-', starting and ending with a letter or digit", name)
		}
		return "", usagef("key name %q: want 1 to 128 of lowercase letters, digits, '.', '_', '-', starting and ending with a letter or digit (give --name)", name)
	}
	if r := c.String("role"); r != registry.RoleApprover && r != registry.RoleBuilder {
		return "", usagef("--role %q: want approver or builder", r)
	}
	if _, err := sign.ParsePublicKey(pub); err != nil {
		var re *refusal.Error
		if errors.As(err, &re) {
			err = errors.New(re.Detail)
		}
		if strings.Contains(string(pub), "PRIVATE KEY-----") {
			return "", usagef("%s is a private key: trust its public key (the PREFIX.pub that key generate wrote beside it)", c.Args().First())
		}
		return "", usagef("%s is not a public key (PEM \"PUBLIC KEY\", ECDSA P-256, as key generate writes PREFIX.pub): %v", c.Args().First(), err)
	}
	return name, nil
}
