package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
)

func init() {
	register(&cli.Command{
		Name:        "policy",
		Usage:       "the approval policy: how many distinct approver keys must sign",
		UsageText:   "cruxprov policy show|set …",
		Description: "Example:\n   cruxprov policy show\n   cruxprov policy set --threshold 2",
		Subcommands: []*cli.Command{{
			Name:        "show",
			Usage:       "show the threshold",
			UsageText:   "cruxprov policy show [--json]",
			Description: "Example:\n   cruxprov policy show",
			Action: func(c *cli.Context) error {
				o, reg, err := readOnlyRegistry(c, 0)
				if err != nil {
					return err
				}
				t, err := registry.CheckedTrust(c.Context, reg)
				if err != nil {
					return err
				}
				p := registry.Policy{Threshold: 1}
				var rev int64
				if t != nil {
					p, rev = t.Policy, t.Revision
				}
				return o.emit("cruxprov.policy.show/v1", map[string]any{"threshold": p.Threshold, "trustRevision": rev}, func(w io.Writer) {
					fmt.Fprintf(w, "threshold %d (distinct approver keys), trust revision %d\n", p.Threshold, rev)
				})
			},
		}, {
			Name:      "set",
			Usage:     "propose a new threshold (a change-set approved at the current threshold)",
			UsageText: "cruxprov policy set --threshold K",
			Description: "Proposes a set-policy change-set; it applies once the current threshold of approvers\n" +
				"approve it, so one writer cannot lower the threshold alone.\n\nExample:\n   cruxprov policy set --threshold 2",
			Flags: []cli.Flag{&cli.IntFlag{Name: "threshold", Usage: "`K` distinct approver keys", Required: true}},
			Action: func(c *cli.Context) error {
				k := c.Int("threshold")
				o, reg, err := openRegistry(c, 0, func(*opts) error {
					if k < 1 || k > 100 {
						return usagef("--threshold %d: want 1 to 100 distinct approver keys", k)
					}
					return nil
				}, storeToChange(refusal.SignerUntrusted, fmt.Sprintf("cannot set the threshold to %d", k)))
				if err != nil {
					return err
				}
				// The threshold in force already (a policy set run again
				// after its change-set was approved): nothing to propose,
				// as key trust of a key trusted already. It proposed a
				// change-set that changed nothing, whose approval would
				// make every other open trust proposal stale.
				t, err := reg.Trust(c.Context)
				if err != nil {
					return err
				}
				if t != nil && t.Policy.Threshold == k {
					return o.emit("cruxprov.policy.set/v1", map[string]any{"threshold": k, "trustRevision": t.Revision, "already": true}, func(w io.Writer) {
						fmt.Fprintf(w, "threshold %d already (trust revision %d): nothing changed\n", k, t.Revision)
					})
				}
				cs, already, err := reg.Propose(c.Context, registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: c.Int("threshold")}}, operator())
				if err != nil {
					return err
				}
				return o.emit("cruxprov.policy.set/v1", map[string]any{"changeSet": cs, "already": already}, func(w io.Writer) {
					printProposed(w, o, fmt.Sprintf("threshold %d", c.Int("threshold")), cs, already)
				})
			},
		}},
	})
}
