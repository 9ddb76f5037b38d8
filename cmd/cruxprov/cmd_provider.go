package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
)

func init() {
	register(&cli.Command{
		Name:        "provider",
		Usage:       "accepted providers: list, show, retire",
		UsageText:   "cruxprov provider list|show|retire …",
		Description: "Example:\n   cruxprov provider list\n   cruxprov provider show acme-echo --json",
		Subcommands: []*cli.Command{{
			Name:        "list",
			Usage:       "list the accepted pins",
			UsageText:   "cruxprov provider list [--json]",
			Description: "Example:\n   cruxprov provider list",
			Action: func(c *cli.Context) error {
				o, reg, err := readOnlyRegistry(c, 0)
				if err != nil {
					return err
				}
				pins, err := registry.CheckedPins(c.Context, reg)
				if err != nil {
					return err
				}
				return o.emit("cruxprov.provider.list/v1", map[string]any{"pins": pins}, func(w io.Writer) {
					tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "PROVIDER\tREVISION\tVERSION\tSPEC")
					for _, p := range pins {
						v := "(retired)"
						if ps := p.ProviderSpec(); ps != nil && ps.Package != nil {
							v = ps.Package.Version
						}
						fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", p.Provider, p.Revision, v, p.SpecDigest)
					}
					tw.Flush()
				})
			},
		}, {
			Name:        "show",
			Usage:       "show a provider's accepted pin",
			UsageText:   "cruxprov provider show NAME [--json]",
			Description: "Example:\n   cruxprov provider show acme-echo --json",
			Action: func(c *cli.Context) error {
				o, reg, err := readOnlyRegistry(c, 1)
				if err != nil {
					return err
				}
				p, err := registry.CheckedPin(c.Context, reg, c.Args().First())
				if err != nil {
					return err
				}
				// The keys trusted as approvers now: an approval by a key
				// untrusted since is shown as not counting (verify refuses
				// a pin short of the threshold for it).
				var approvers map[digest.Digest]bool
				if t, err := reg.Trust(c.Context); err == nil && t != nil {
					approvers = map[digest.Digest]bool{}
					for _, k := range t.Keys {
						if k.Role == registry.RoleApprover {
							approvers[k.Digest] = true
						}
					}
				}
				// What a retired provider ran until retired, which verify's
				// advice proposes again (--json: the spec's base).
				from := registry.RetiredChangeSet(c.Context, reg, p)
				return o.emit("cruxprov.provider.show/v1", p, func(w io.Writer) { printPin(w, p, approvers, from) })
			},
		}, {
			Name:        "retire",
			Usage:       "propose retiring a provider (a change-set)",
			UsageText:   "cruxprov provider retire NAME",
			Description: "Proposes a retire change-set; once approved, verify refuses the provider (pin_unapproved).\n\nExample:\n   cruxprov provider retire acme-echo",
			Action: func(c *cli.Context) error {
				o, reg, err := openRegistry(c, 1, storeToChange(refusal.PinUnapproved, "provider "+c.Args().First()+" has no accepted pin to retire"))
				if err != nil {
					return err
				}
				cs, already, err := reg.Propose(c.Context, registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: c.Args().First()}}, operator())
				if err != nil {
					return err
				}
				return o.emit("cruxprov.provider.retire/v1", map[string]any{"changeSet": cs, "already": already}, func(w io.Writer) {
					printProposed(w, o, "retiring "+c.Args().First(), cs, already)
				})
			},
		}},
	})
}

// printPin prints p; approvers, when known (nil: not read), are the keys
// trusted as approvers now, and an approval by any other key is marked
// as not counting.
func printPin(w io.Writer, p *registry.Pin, approvers map[digest.Digest]bool, retiredFrom *registry.ChangeSet) {
	fmt.Fprintf(w, "provider  %s\nrevision  %d\nspec      %s\naccepted  %s\n", p.Provider, p.Revision, p.SpecDigest, p.AcceptedAt.Format("2006-01-02T15:04:05Z"))
	switch {
	case retiredFrom != nil:
		pkg := retiredFrom.Spec.Changes[0].Provider.Package
		fmt.Fprintf(w, "retired   the pin of revision %d: %s %s %s (change-set %s); 'cruxprov verify %s' advises how to propose it again\n", retiredFrom.Spec.Revision, pkg.Name, pkg.Version, pkg.SHA256, retiredFrom.Metadata.ID, p.Provider)
	case p.Retired:
		fmt.Fprintln(w, "retired")
	}
	if ps := p.ProviderSpec(); ps != nil {
		if ps.Package != nil {
			fmt.Fprintf(w, "package   %s %s %s\n", ps.Package.Name, ps.Package.Version, ps.Package.SHA256)
		}
		for _, e := range ps.Entrypoints {
			fmt.Fprintf(w, "entrypoint %s %s %s %s\n", e.Name, e.Object, e.Interface.ID, e.ImplementationDigest)
		}
		for _, m := range ps.Materializations {
			// A container's image reference is what install's --image takes
			// to keep it (install's warning of an image dropped points here);
			// the digest alone named no repository or layout.
			img := ""
			if m.Image != "" {
				img = " image " + m.Image
			}
			fmt.Fprintf(w, "materialization %s %s %s%s\n", m.Backend, m.Platform, m.Digest, img)
		}
	}
	for _, a := range p.Approvals {
		exp := "never"
		if a.Expires != nil {
			exp = a.Expires.Format("2006-01-02T15:04:05Z")
		}
		gone := ""
		if approvers != nil && !approvers[a.Signer] {
			gone = "; its key is no longer trusted as an approver: it does not count"
		}
		fmt.Fprintf(w, "approved by %s (%s) at %s, expires %s%s\n", a.Name, a.Signer, a.At.Format("2006-01-02T15:04:05Z"), exp, gone)
	}
}
