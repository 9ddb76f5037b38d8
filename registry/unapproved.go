package registry

import (
	"bytes"
	"slices"
	"strings"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// neverAccepted is the pin_unapproved refusal of provider, whose pin the
// registry never accepted (no pin, and none in the history), with the
// next step its history says (proposalsOf): the approval of the one
// change-set of it proposed (ActionApprove, its id; the root of trust
// first, ActionTrustKey, in a registry that trusts no key yet), a review
// of those proposed where there are several (ActionReviewChangesets),
// or, where none is proposed, the proposal itself (ActionPropose, the
// provider's name its target: the operator names the wheel). It advised
// reviewing the change-sets whether or not one was proposed, and an
// operator who verified a provider never proposed was sent to an empty
// list. Where the history records proposals of other providers, a
// mistyped name is found among them (the review, after the proposal).
func neverAccepted(provider string, history []Entry) *refusal.Error {
	open, others, trusted := proposalsOf(history, provider)
	switch len(open) {
	case 0:
		also := ""
		if others {
			also = "; or, if the name is mistyped, find it among the providers the change-sets propose"
		}
		e := refusal.New(refusal.PinUnapproved, "provider %s has no accepted pin, and no change-set of it is proposed: propose it (install its package) and approve the change-set%s", provider, also).WithRemedy(refusal.ActionPropose, provider)
		if others {
			e.OrRemedy(refusal.ActionReviewChangesets, "")
		}
		return e
	case 1:
		if !trusted {
			// Its approval is refused until there is a key to approve it
			// with (noTrust): that comes first.
			return refusal.New(refusal.PinUnapproved, "provider %s has no accepted pin: its change-set %s is proposed, not yet approved, and the registry trusts no key yet: trust its root key first (the first key trusted is the root of trust, an approver), then approve the change-set with it", provider, open[0]).WithRemedy(refusal.ActionTrustKey, RoleApprover)
		}
		return refusal.New(refusal.PinUnapproved, "provider %s has no accepted pin: its change-set %s is proposed, not yet approved (a proposal takes effect once approved)", provider, open[0]).WithRemedy(refusal.ActionApprove, open[0].String())
	}
	ids := make([]string, len(open))
	for i, id := range open {
		ids[i] = id.String()
	}
	return refusal.New(refusal.PinUnapproved, "provider %s has no accepted pin: %d change-sets of it are proposed, none approved yet (%s): approve the one to accept (a proposal takes effect once approved)", provider, len(open), strings.Join(ids, ", ")).WithRemedy(refusal.ActionReviewChangesets, "")
}

// proposalsOf reads, from the history es of a registry that never
// accepted a pin of provider, the change-sets of provider it leaves
// proposed (proposed, and not rejected since; an approval short of the
// threshold leaves one proposed, and one that reached it would have
// accepted a pin), in the order proposed; whether it records a proposal
// of another provider; and whether it records a root of trust. The
// history, not the change-set files: Dir.Pin reads it on this path
// already, and `changeset list` asks the pin of every provider proposed
// and never accepted (loading every change-set each time took 130 ms
// with 300 of them, per provider).
func proposalsOf(es []Entry, provider string) (open []digest.Digest, others, trusted bool) {
	proposed := map[digest.Digest]bool{}
	for i := range es {
		e := &es[i]
		switch {
		case e.isRoot():
			trusted = true
		case e.Event == EventChangeSetProposed && e.Subject == provider:
			open = append(slices.DeleteFunc(open, e.is), e.Digest)
			proposed[e.Digest] = true
		case e.Event == EventChangeSetProposed && e.Subject != TrustScope:
			others = true
		case e.Event == EventChangeSetRejected && proposed[e.Digest]:
			open = slices.DeleteFunc(open, e.is)
		}
	}
	return open, others, trusted
}

// is reports whether id is e's digest.
func (e *Entry) is(id digest.Digest) bool { return e.Digest == id }

// proposalEntries decodes, of a checked chain's entry bytes, the entries
// proposalsOf reads (change-sets proposed and rejected, keys trusted),
// and only the lines that can be one, as governanceEntries does (any
// line with an escape is decoded too).
func proposalEntries(raws [][]byte) ([]Entry, error) {
	var out []Entry
	for i, raw := range raws {
		if !bytes.Contains(raw, []byte(`"event":"changeset-`)) && !bytes.Contains(raw, []byte(`"event":"key-trusted"`)) && bytes.IndexByte(raw, '\\') < 0 {
			continue
		}
		e, err := decodeEntry(raw, i)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
