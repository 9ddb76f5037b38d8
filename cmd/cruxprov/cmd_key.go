package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

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
				"readable by cosign) and PREFIX.pub (PEM \"PUBLIC KEY\"). The password comes from\n" +
				"CRUXPROV_KEY_PASSWORD or a prompt on the terminal. Existing files are not overwritten;\n" +
				"a missing directory of PREFIX is made (mode 0700).\n\n" +
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
				for _, p := range []string{prefix + ".key", prefix + ".pub"} {
					if _, err := os.Lstat(p); err == nil || !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
						return fmt.Errorf("%s exists: not overwriting a key; give --out another prefix, or move the old pair away first", p)
					}
				}
				pw, err := keyPassword(o, true)
				if err != nil {
					return err
				}
				if len(pw) == 0 {
					return usagef("an empty key password: the private key is always encrypted (set CRUXPROV_KEY_PASSWORD to the password, or type one at the prompt)")
				}
				// The example's --out ~/keys/alice works on a new host: a
				// missing directory is made, private (it holds the key).
				if err := os.MkdirAll(filepath.Dir(prefix), 0o700); err != nil {
					return fmt.Errorf("--out %s: %w", prefix, err)
				}
				priv, pub, err := sign.Generate(pw)
				if err != nil {
					return err
				}
				if err := writeNew(prefix+".key", priv, 0o600); err != nil {
					return err
				}
				if err := writeNew(prefix+".pub", pub, 0o644); err != nil {
					// Half a pair is no key, and it would make the
					// command, run again, refuse to overwrite it.
					os.Remove(prefix + ".key")
					return err
				}
				pk, err := sign.ParsePublicKey(pub)
				if err != nil {
					return err
				}
				r := map[string]any{"private_key": prefix + ".key", "public_key": prefix + ".pub", "digest": pk.Digest()}
				return o.emit("cruxprov.key.generate/v1", r, func(w io.Writer) {
					if o.quiet { // the result alone: the key's digest
						fmt.Fprintln(w, pk.Digest())
						return
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
				cs, err := reg.Propose(c.Context, registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: c.Args().First()}}, operator())
				if err != nil {
					return err
				}
				return o.emit("cruxprov.key.untrust/v1", map[string]any{"changeSet": cs}, func(w io.Writer) {
					printProposed(w, o, "untrusting "+c.Args().First(), cs)
				})
			},
		}, {
			Name:        "list",
			Usage:       "list the trusted keys",
			UsageText:   "cruxprov key list [--json]",
			Description: "Example:\n   cruxprov key list --json",
			Action: func(c *cli.Context) error {
				o, reg, err := openRegistry(c, 0)
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

// writeNew writes a file that must not exist yet, with mode. A write that
// fails (a full disk) removes the file it created: left empty, it made the
// command, run again once there was room, refuse "exists: not overwriting
// a key" until the user removed it.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}
