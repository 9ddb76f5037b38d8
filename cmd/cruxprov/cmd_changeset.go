package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
)

func init() {
	register(&cli.Command{
		Name:        "changeset",
		Usage:       "proposed changes: list, show, diff, approve, reject",
		UsageText:   "cruxprov changeset list|show|diff|approve|reject …",
		Description: "Example:\n   cruxprov changeset diff <id>\n   cruxprov changeset approve <id> --key ops.key --expires 720h",
		Subcommands: []*cli.Command{{
			Name:      "list",
			Usage:     "list the change-sets",
			UsageText: "cruxprov changeset list [--json]",
			Description: "STATE is proposed, approved or rejected, or stale for a proposal whose base is no\n" +
				"longer current (approving it is refused changeset_stale: propose it again).\n\n" +
				"Example:\n   cruxprov changeset list",
			Action: func(c *cli.Context) error {
				o, reg, err := readOnlyRegistry(c, 0)
				if err != nil {
					return err
				}
				l, err := registry.CheckedChangeSets(c.Context, reg)
				if err != nil {
					return err
				}
				// A proposal whose base is no longer current (another
				// approval came first) is listed as stale: approving it
				// is refused changeset_stale. One pin file per scope
				// with open proposals, and the trust state, tell.
				type listed struct {
					*registry.ChangeSet
					Stale bool `json:"stale,omitempty"`
				}
				out := make([]listed, 0, len(l))
				cur := currentOf(reg)
				for _, cs := range l {
					stale, err := cur.stale(c.Context, cs)
					if err != nil {
						return err
					}
					out = append(out, listed{cs, stale})
				}
				return o.emit("cruxprov.changeset.list/v1", map[string]any{"changeSets": out}, func(w io.Writer) {
					tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tSTATE\tACTION\tSCOPE\tREVISION\tAPPROVALS\tPROPOSED")
					for _, x := range out {
						cs, state := x.ChangeSet, string(x.Status.State)
						if x.Stale {
							state = "stale"
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s by %s\n", cs.Metadata.ID.Hex()[:12], state, cs.Spec.Changes[0].Action, cs.Scope(), cs.Spec.Revision, len(cs.Status.Approvals), cs.Metadata.ProposedAt.Format("2006-01-02T15:04:05Z"), cs.Metadata.ProposedBy)
					}
					tw.Flush()
				})
			},
		}, {
			Name:        "show",
			Usage:       "print a change-set (its YAML document)",
			UsageText:   "cruxprov changeset show ID [--json]",
			Description: "ID is the full digest or a unique prefix of at least 8 hex digits.\n\nExample:\n   cruxprov changeset show <id>",
			Action: func(c *cli.Context) error {
				o, _, cs, err := openChangeSet(c)
				if err != nil {
					return err
				}
				y, err := registry.MarshalChangeSet(cs)
				if err != nil {
					return err
				}
				return o.emit("cruxprov.changeset.show/v1", cs, func(w io.Writer) { w.Write(y) })
			},
		}, {
			Name:      "diff",
			Usage:     "what approving a change-set would change, as a plan",
			UsageText: "cruxprov changeset diff ID [--json]",
			Description: "Compares the change-set with the accepted pin it replaces: packages added, removed,\n" +
				"upgraded, downgraded or hash-changed; digests old → new (the seal content digest carries\n" +
				"the interpreter's identity); secrets and egress added or removed; budgets raised.\n\n" +
				"Example:\n   cruxprov changeset diff <id>",
			Action: func(c *cli.Context) error {
				o, reg, cs, err := openChangeSet(c)
				if err != nil {
					return err
				}
				cur := currentOf(reg)
				b, err := cur.of(c.Context, cs.Scope())
				if err != nil {
					return err
				}
				plan := registry.Diff(b.pin, cs)
				// The plan is against what is current now: a governance
				// change from the trust state's revision, and a proposal
				// whose base is no longer current says so (its approval
				// would be refused: changeset_stale).
				plan.FromRevision = b.rev
				plan.Stale, _ = cur.stale(c.Context, cs)
				note := ""
				if !o.json && plan.Action == registry.ActionUpdate && cs.Status.State == registry.StateProposed && !plan.Stale && b.pin != nil && !b.pin.Retired && planChanges(plan) == 0 {
					note = noChangeNote(c.Context, o, reg, cs.Scope(), cs.Metadata.ID)
				}
				return o.emit("cruxprov.changeset.diff/v1", plan, func(w io.Writer) { printPlan(w, cs, plan, note) })
			},
		}, {
			Name:      "approve",
			Usage:     "sign a change-set with an approver key",
			UsageText: "cruxprov changeset approve ID --key KEY [--expires DURATION]",
			Description: "Signs {registry id, spec digest, provider, revision, expires} (docs/governance.md: an\n" +
				"approval counts only in the registry it was given in) with KEY (the\n" +
				"private key of a trusted approver; password from CRUXPROV_KEY_PASSWORD or a prompt).\n" +
				"Once the policy's threshold of distinct approver keys have signed, the accepted pin is\n" +
				"written (revision + 1) or the trust change applied. --expires 720h ends the approval's\n" +
				"validity (verify then refuses pin_expired). Approving the accepted pin's change-set\n" +
				"again with a key whose approval expired renews it: a new approval, with its new expiry.\n" +
				"A key whose approval stands (the same approve run again) is told \"approved already\"\n" +
				"without its password when KEY names its public key, as key generate writes it.\n\n" +
				"Example:\n   cruxprov changeset approve <id> --key ~/keys/alice.key --expires 2160h",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "key", Usage: "the private key `FILE`", Required: true},
				&cli.DurationFlag{Name: "expires", Usage: "the approval expires after `DURATION` (e.g. 720h) (default: never)"},
			},
			Action: func(c *cli.Context) error {
				var ref changeSetRef
				o, reg, err := openRegistry(c, 1, func(*opts) error {
					if c.IsSet("expires") && c.Duration("expires") <= 0 {
						return usagef("--expires must be a positive duration")
					}
					var err error
					ref, err = parseChangeSetRef(c.Args().First())
					return err
				}, storeToChange(refusal.ChangesetInvalid, "cannot approve change-set "+c.Args().First()))
				if err != nil {
					return err
				}
				id, err := ref.resolve(c.Context, reg)
				if err != nil {
					return err
				}
				if c.IsSet("expires") {
					if cs, err := reg.ChangeSet(c.Context, id); err == nil && cs.Scope() == registry.TrustScope {
						return usagef("--expires is for provider pins: a trust or policy change does not expire (approve it without --expires)")
					}
				}
				// What is refused whatever key signs (a change-set stale,
				// rejected, replaced since, unknown) is said before the
				// key is read and its password asked for.
				if err := reg.Approvable(c.Context, id); err != nil {
					return err
				}
				kb, own, err := keyFile("--key", c.String("key"))
				if err != nil {
					return err
				}
				// A key whose approval stands is told so before its
				// password is asked for, where the key file names its
				// public key and only this user can have written it
				// (docs/governance.md, "Keys"); the password opens the key
				// otherwise, and checks the name it gives.
				res, err := approvedAlready(c.Context, reg, id, kb, own)
				if err != nil {
					return err
				}
				withExpiry := c.IsSet("expires")
				if res == nil {
					// A registry this user may not change is said before
					// the password too.
					if err := reg.Writable(); err != nil {
						return err
					}
					signer, err := signerFrom(c.Context, o, "--key", c.String("key"), kb)
					if err != nil {
						return err
					}
					// The expiry counts from the signature, after the
					// password prompt, not from the command's start.
					var exp *time.Time
					if withExpiry {
						e := nowFunc().Add(c.Duration("expires"))
						exp = &e
					}
					if res, err = reg.Approve(c.Context, id, signer, exp); err != nil {
						return err
					}
				}
				// With --expires, the document says whether it was applied:
				// approving again with a key whose approval has not expired
				// changes nothing (Already), its expiry included.
				doc := struct {
					*registry.ApproveResult
					ExpiresApplied *bool `json:"expiresApplied,omitempty"`
				}{ApproveResult: res}
				if withExpiry {
					applied := !res.Already
					doc.ExpiresApplied = &applied
					if !applied && o.json {
						o.warn(expiresNotApplied)
					}
				}
				return o.emit("cruxprov.changeset.approve/v1", doc, func(w io.Writer) {
					if o.quiet { // the result alone: the change-set's state now
						fmt.Fprintln(w, res.ChangeSet.Status.State)
						return
					}
					switch {
					case res.Renewed && res.V1Form:
						fmt.Fprintf(w, "renewed %s: this key's approval was in the v1 form, which does not name the registry and does not count; its new approval counts (%d of %d approvals)\n", id, res.Approvals, res.Threshold)
					case res.Renewed:
						fmt.Fprintf(w, "renewed %s: this key's approval had expired; its new approval counts (%d of %d approvals unexpired)\n", id, res.Approvals, res.Threshold)
					case res.Already:
						fmt.Fprintf(w, "approved already %s, with this key's approval: nothing changed (%d of %d approvals unexpired)\n", id, res.Approvals, res.Threshold)
						if withExpiry {
							// Not renewed: this key's approval has not
							// expired, and stands as it was signed.
							fmt.Fprintln(w, expiresNotApplied)
						}
					default:
						fmt.Fprintf(w, "approved %s: %d of %d approvals\n", id, res.Approvals, res.Threshold)
					}
					if res.Replaced {
						fmt.Fprintln(w, "this key had approved it already: its new approval replaces the earlier one (a key counts once; another approver key must sign)")
					}
					switch {
					case res.Accepted && res.Pin != nil:
						fmt.Fprintf(w, "accepted: %s at revision %d\n", res.Pin.Provider, res.Pin.Revision)
					case res.Accepted:
						fmt.Fprintln(w, "accepted: the trust change applies")
					case res.Pin != nil:
						// Accepted once, but the approvals that count now
						// (unexpired, by keys trusted now) are short.
						fmt.Fprintf(w, "not runnable: %s revision %d has %d of %d unexpired approvals: each approver whose approval expired approves it again (a threshold raised since: propose it again and approve it)\n", res.Pin.Provider, res.Pin.Revision, res.Approvals, res.Threshold)
					default:
						// Say who signs next, and with what: the
						// approve command, with another approver's key.
						more, keys := res.Threshold-res.Approvals, "keys"
						if more == 1 {
							keys = "key"
						}
						fmt.Fprintf(w, "not accepted yet: %d more approver %s must sign: cruxprov changeset approve %s --key KEY%s\n", more, keys, res.ChangeSet.Metadata.ID.Hex()[:12], o.homeFlag())
					}
				})
			},
		}, {
			Name:        "reject",
			Usage:       "close a proposed change-set with a reason",
			UsageText:   "cruxprov changeset reject ID --reason TEXT",
			Description: "Example:\n   cruxprov changeset reject <id> --reason 'egress to an unknown host'",
			Flags:       []cli.Flag{&cli.StringFlag{Name: "reason", Usage: "why: `TEXT` recorded in the history", Required: true}},
			Action: func(c *cli.Context) error {
				var ref changeSetRef
				o, reg, err := openRegistry(c, 1, func(*opts) error {
					var err error
					ref, err = parseChangeSetRef(c.Args().First())
					return err
				}, storeToChange(refusal.ChangesetInvalid, "cannot reject change-set "+c.Args().First()))
				if err != nil {
					return err
				}
				id, err := ref.resolve(c.Context, reg)
				if err != nil {
					return err
				}
				cs, err := reg.Reject(c.Context, id, c.String("reason"), operator())
				if err != nil {
					return err
				}
				return o.emit("cruxprov.changeset.reject/v1", map[string]any{"changeSet": cs}, func(w io.Writer) {
					if o.quiet {
						return
					}
					fmt.Fprintf(w, "rejected %s: %s\n", id, c.String("reason"))
				})
			},
		}},
	})
}

// printPlan renders a plan as `terraform plan` does: + added, - removed,
// ~ changed.
// note is what an update that changes nothing is for (noChangeNote), or
// "" for any other change-set.
func printPlan(w io.Writer, cs *registry.ChangeSet, p *registry.Plan, note string) {
	if p.Stale {
		// Its revisions are the ones it was proposed at: the scope's
		// revision now is not what it would go from (it goes nowhere:
		// approving it is refused), and "revision 1 → 1" said nothing.
		fmt.Fprintf(w, "change-set %s: %s %s, revision %d → %d as proposed; %s is at revision %d now\n", cs.Metadata.ID, p.Action, p.Provider, cs.Spec.Revision-1, p.ToRevision, p.Provider, p.FromRevision)
	} else if cs.Status.State != registry.StateProposed {
		// Decided already: the plan is against what is current now, which
		// for the accepted pin's own change-set is itself ("revision 2 →
		// 2", with nothing said of its state).
		fmt.Fprintf(w, "change-set %s (%s, not open): %s %s at revision %d, against what is current now (revision %d)\n", cs.Metadata.ID, cs.Status.State, p.Action, p.Provider, p.ToRevision, p.FromRevision)
	} else {
		fmt.Fprintf(w, "change-set %s: %s %s, revision %d → %d\n", cs.Metadata.ID, p.Action, p.Provider, p.FromRevision, p.ToRevision)
	}
	if p.Stale {
		fmt.Fprintf(w, "  STALE: it replaces %s at revision %d, no longer current: approving it is refused (changeset_stale); propose it again\n", orDash(cs.Spec.Base.String()), cs.Spec.Revision-1)
	}
	if p.Provider == registry.TrustScope {
		switch {
		case p.Key != nil && p.Action == registry.ActionUntrustKey:
			fmt.Fprintf(w, "  - key %s %s (under every name it is trusted as)\n", p.Key.Name, orDash(p.Key.Digest.String()))
		case p.Key != nil:
			fmt.Fprintf(w, "  + key %s %s %s\n", p.Key.Name, p.Key.Role, p.Key.Digest)
		case p.Policy != nil:
			fmt.Fprintf(w, "  threshold → %d\n", p.Policy.Threshold)
		}
		return
	}
	n := 0
	for _, pc := range p.Packages {
		n++
		switch pc.Change {
		case "added":
			fmt.Fprintf(w, "  + %s %s %s (%s)\n", pc.Name, pc.New.Version, pc.New.SHA256, pc.Platform)
		case "removed":
			fmt.Fprintf(w, "  - %s %s (%s)\n", pc.Name, pc.Old.Version, pc.Platform)
		default:
			fmt.Fprintf(w, "  ~ %s %s → %s, %s → %s (%s, %s)\n", pc.Name, pc.Old.Version, pc.New.Version, pc.Old.SHA256, pc.New.SHA256, pc.Change, pc.Platform)
		}
	}
	for _, d := range append(append([]registry.ValueChange(nil), p.Digests...), p.Entrypoints...) {
		n++
		fmt.Fprintf(w, "  ~ %s: %s → %s\n", d.What, orDash(d.Old), orDash(d.New))
	}
	for _, s := range []struct {
		what string
		set  registry.SetChange
	}{{"secret", p.Secrets}, {"egress", p.Egress}} {
		for _, a := range s.set.Added {
			n++
			fmt.Fprintf(w, "  + %s %s\n", s.what, a)
		}
		for _, r := range s.set.Removed {
			n++
			fmt.Fprintf(w, "  - %s %s\n", s.what, r)
		}
	}
	for _, b := range p.Budgets {
		n++
		word := "lowered"
		switch {
		case b.Old == 0:
			word = "set"
		case b.New == 0:
			word = "removed: the executor's default applies"
		case b.Raised:
			word = "RAISED"
		}
		// No budget (0: the manifest gives none) is "-", as every other
		// value a pin does not have yet: a registration said "0 → 30000",
		// which read as a limit of zero.
		fmt.Fprintf(w, "  ~ budget %s: %s → %s (%s)\n", b.Name, budgetOrDash(b.Old), budgetOrDash(b.New), word)
	}
	if n == 0 && note != "" {
		fmt.Fprintf(w, "  nothing changes: %s\n", note)
	}
	fmt.Fprintf(w, "Plan: %s.\n", count(n, "change"))
}

// noChangeNote says what a provider update that changes nothing in the
// accepted pin is for: install run again proposes one, and its "Plan: 0
// changes." did not say whether to approve it. Approving it approves the
// pin again, which a pin that does not run now needs; why it does not
// is what verify finds (an approval expired, its key untrusted since, a
// threshold raised): the note blamed a threshold raised since whatever
// the reason, or when the pin ran as it was. An approval expired is
// renewed instead (verify's remedy, rendered for o's store), which needs
// no new revision.
func noChangeNote(ctx context.Context, o *opts, reg registry.Reader, provider string, id digest.Digest) string {
	const again = "approving it only approves the accepted pin again"
	// reject is the command that rejects this change-set: the note said
	// "reject it" and left the command (and its required --reason) to
	// be found.
	reject := fmt.Sprintf("cruxprov changeset reject %s --reason TEXT%s", id.Hex()[:12], o.homeFlag())
	_, err := registry.VerifyPin(ctx, reg, "", provider, nowFunc())
	if err == nil {
		return again + ", which runs as it is (nothing needs that): reject it: " + reject
	}
	detail := err.Error()
	var r *refusal.Error
	if errors.As(err, &r) {
		detail = string(r.Code) + ": " + r.Message()
	}
	if rem := refusal.RemedyOf(err); rem != nil && rem.Action == refusal.ActionRenewApproval {
		// Approvals expired (pin_expired): renewing them (verify's
		// advice, the same remedy) makes the accepted pin run again at
		// its revision. This change-set is not needed for that; the note
		// advised approving it, a new revision of the same pin.
		if refusal.CodeOf(err) == refusal.SignatureInvalid {
			// An approval in the v1 form (given by a cruxprov before
			// approvals named their registry), of the pin or of a trust
			// step: approved again, it is replaced, as an expired one is
			// renewed.
			return again + ", which does not run now: " + detail + ". Approve the change-set named again instead (the trust state's steps first, then the accepted pin's), which replaces its approval in the v1 form, and the accepted pin runs again as it is: " +
				renderRemedy(rem, o.homeArgs()) + "; and reject this change-set: " + reject
		}
		return again + ", which does not run now: " + detail + ". Renew the expired approval instead, which makes the accepted pin run again as it is: " +
			renderRemedy(rem, o.homeArgs()) + "; and reject this change-set: " + reject
	}
	if !registry.NotRunnable(err) {
		// Not a state of the pin but a break: approving changes nothing
		// of it, and verify's refusal says what does.
		return again + ", which does not verify (" + detail + "); otherwise reject it: " + reject
	}
	return again + ", which does not run now: " + detail + ". Approving this change-set with the keys trusted now, at the threshold in force, makes the pin run again; otherwise reject it: " + reject
}

// planChanges counts the changes printPlan lists for a provider plan.
func planChanges(p *registry.Plan) int {
	return len(p.Packages) + len(p.Digests) + len(p.Entrypoints) + len(p.Secrets.Added) + len(p.Secrets.Removed) +
		len(p.Egress.Added) + len(p.Egress.Removed) + len(p.Budgets)
}

// budgetOrDash is budget n, or "-" for none (0).
func budgetOrDash(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// current is what each scope's change-sets replace now, read once per
// scope: the accepted pin (its spec digest and revision) for a provider,
// the trust state's digest and revision for a governance change.
type current struct {
	reg   registry.Reader
	bases map[string]currentBase
}

type currentBase struct {
	pin  *registry.Pin // nil: none, or a governance scope
	base digest.Digest
	rev  int64
}

func currentOf(reg registry.Reader) *current {
	return &current{reg: reg, bases: map[string]currentBase{}}
}

func (c *current) of(ctx context.Context, scope string) (currentBase, error) {
	if b, ok := c.bases[scope]; ok {
		return b, nil
	}
	var b currentBase
	if scope == registry.TrustScope {
		t, err := c.reg.Trust(ctx)
		if err != nil {
			return b, err
		}
		if t != nil {
			b.base, b.rev = t.StateDigest(), t.Revision
		}
	} else {
		p, err := c.reg.Pin(ctx, scope)
		if err != nil && !errors.Is(err, refusal.PinUnapproved) {
			return b, err
		}
		if p != nil {
			b.pin, b.base, b.rev = p, p.SpecDigest, p.Revision
		}
	}
	c.bases[scope] = b
	return b, nil
}

// stale reports whether cs is proposed and its base is no longer what
// its scope holds (approving it is refused changeset_stale).
func (c *current) stale(ctx context.Context, cs *registry.ChangeSet) (bool, error) {
	if cs.Status.State != registry.StateProposed {
		return false, nil
	}
	b, err := c.of(ctx, cs.Scope())
	if err != nil {
		return false, err
	}
	return cs.Spec.Base != b.base || cs.Spec.Revision != b.rev+1, nil
}

// openChangeSet opens the registry and the change-set the command's one
// argument names (a full digest or a unique prefix).
func openChangeSet(c *cli.Context) (*opts, *registry.Dir, *registry.ChangeSet, error) {
	o, reg, err := readOnlyRegistry(c, 1) // show and diff only read
	if err != nil {
		return nil, nil, nil, err
	}
	id, err := changeSetID(c.Context, reg, c.Args().First())
	if err != nil {
		return nil, nil, nil, err
	}
	cs, err := registry.CheckedChangeSet(c.Context, reg, id)
	if err != nil {
		return nil, nil, nil, err
	}
	return o, reg, cs, nil
}

// printProposed says what a command proposed (already: the same request
// before, open still, nothing recorded now) and how to approve it; with
// --quiet, the change-set id alone (as install prints it), for a script.
func printProposed(w io.Writer, o *opts, what string, cs *registry.ChangeSet, already bool) {
	if o.quiet {
		fmt.Fprintln(w, cs.Metadata.ID)
		return
	}
	if already {
		fmt.Fprintf(w, "proposed already at %s: %s; nothing changed\nchange-set %s\napprove with: cruxprov changeset approve %s --key KEY%s\n", cs.Metadata.ProposedAt.UTC().Format(time.RFC3339), what, cs.Metadata.ID, cs.Metadata.ID.Hex()[:12], o.homeFlag())
		return
	}
	fmt.Fprintf(w, "proposed %s\nchange-set %s\napprove with: cruxprov changeset approve %s --key KEY%s\n", what, cs.Metadata.ID, cs.Metadata.ID.Hex()[:12], o.homeFlag())
}

// expiresNotApplied says why approve --expires changed nothing.
const expiresNotApplied = "--expires was not applied: this key's approval has not expired (an approval is renewed once it has expired)"
