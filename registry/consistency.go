package registry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// The files a Dir keeps beside its history (pins/*.json, interfaces.json)
// say again what the history says: which pin the history accepted last
// for each provider, which interfaces it registered with which digest.
// A file put back from before (an older pin, validly signed), or edited,
// disagrees with the history, and nothing is decided from it: verify
// refuses it (matchHistory), every mutation that reads a provider's pin
// refuses it (checkPin) rather than build a change on it, and the
// interfaces are checked wherever they are read to decide (checkIfaces).

// lastPinEvent is provider's last pin-accepted or pin-retired entry in
// the history (nil when none).
func (s *state) lastPinEvent(provider string) *Entry {
	for i := len(s.log) - 1; i >= 0; i-- {
		if isPinEvent(s.log[i].e, provider) {
			e := s.log[i].e
			e.Hash = s.log[i].hash
			return &e
		}
	}
	return nil
}

// checkPin checks provider's pin file against the history's last pin
// entry for it, as VerifyPin does: a mutation that reads the pin (a
// proposal takes its base and revision from it, an approval checks its
// base against it) must not build on a pin file below the history's
// (put back from before: two pins at one revision, revisions going
// down) nor on a lost one (a registration again at revision 1). The refusal names the pin the
// history holds and, when its approved change-set is still there, the
// remedy: Repair writes the pin file again from it.
func (s *state) checkPin(provider string) error {
	last := s.lastPinEvent(provider)
	p := s.pins[provider]
	var err error
	switch {
	case p != nil && last != nil && p.Revision == last.Revision && matchHistory(p, last) == nil:
		// The pin the history accepted: with the approvals and the
		// time it recorded (not covered by the signatures), or edited.
		if err = s.matchRecorded(p, last); err == nil {
			return nil
		}
	case last == nil, p != nil && p.Revision >= last.Revision:
		// Not behind the history: a change on it continues above every
		// revision the history accepted. (A pin file the history did not
		// accept last — its last entries cut off by hand — is refused
		// by verify, whose advice is to propose and approve it again.)
		return nil
	case p == nil:
		err = lostPin(provider, last)
	default:
		err = matchHistory(p, last)
	}
	if err == nil {
		return nil
	}
	_, ok := s.restorablePin(provider)
	return behindHistory(err, provider, last, ok, "; no change is made on it")
}

// lostPin is the refusal of a provider with no pin file whose history
// accepted (or retired) a pin of it last at entry last: registry damage,
// not a pin never approved. Verify said pin_unapproved ("a proposal takes
// effect once approved") for it while every mutation and gc refused it
// registry_corrupt; now each says registry_corrupt, and behindHistory
// adds what brings it back.
func lostPin(provider string, last *Entry) *refusal.Error {
	return refusal.New(refusal.RegistryCorrupt, "provider %s has no pin file (pins/%s.json), but the registry's history %s its pin at revision %d (spec %s, entry %d): the pin file was lost", provider, provider, strings.TrimPrefix(last.Event, "pin-"), last.Revision, last.Digest, last.Seq)
}

// behindHistory is err, the refusal of provider's pin file (lost, put back
// from below the history's last pin entry last, or edited), with what
// brings it back: repair, when the change-set the history accepted is
// there to write the pin again from (restorable), else a copy of the
// registry. A mutation (checkPin) and VerifyPin say the same; verify
// called a lost pin file unapproved, advising the change-set list, and
// an older one put back a rollback with no advice.
func behindHistory(err error, provider string, last *Entry, restorable bool, also string) error {
	var r *refusal.Error
	if !errors.As(err, &r) {
		return err
	}
	if restorable {
		return refusal.New(r.Code, "%s%s. The change-set the history accepted (%s) is in changesets/: repairing the registry writes that pin file again from it", r.Detail, also, last.Digest).WithRemedy(refusal.ActionRepairRegistry, "")
	}
	return refusal.New(r.Code, "%s%s, and the change-set the history accepted (%s) is not in changesets/ to restore it from: restore pins/%s.json and changesets/ from a copy of the registry taken after entry %d", r.Detail, also, last.Digest, provider, last.Seq)
}

// restores reports whether cs is the approved change-set the history's
// last pin entry last accepted (or retired) for provider, from which
// Repair writes its pin file again.
func restores(cs *ChangeSet, provider string, last *Entry) bool {
	return cs != nil && cs.Metadata.ID == last.Digest && cs.Status.State == StateApproved && cs.Scope() == provider && cs.Spec.Revision == last.Revision &&
		(cs.Spec.Changes[0].Action == ActionRetire) == (last.Event == EventPinRetired)
}

// restorablePin is the pin the history's last pin entry for provider
// names, rebuilt from its approved change-set, when the pin file is lost
// or older than it (put back) and the change-set is there, approved at
// that revision: the pin accept wrote, as it wrote it.
func (s *state) restorablePin(provider string) (*Pin, bool) {
	last := s.lastPinEvent(provider)
	if last == nil {
		return nil, false
	}
	if p := s.pins[provider]; p != nil && p.Revision >= last.Revision &&
		(p.Revision > last.Revision || matchHistory(p, last) != nil || s.matchRecorded(p, last) == nil) {
		return nil, false // the same, or not a pin put back or edited: nothing to restore from the history
	}
	cs := s.changesets[last.Digest]
	if !restores(cs, provider, last) {
		return nil, false
	}
	p := &Pin{
		Format: PinFormat, Provider: provider, Revision: cs.Spec.Revision,
		SpecDigest: cs.Metadata.ID, Spec: cs.Spec, Approvals: cs.Status.Approvals,
		AcceptedAt: last.At.UTC().Truncate(time.Second), Retired: last.Event == EventPinRetired,
	}
	if s.matchRecorded(p, last) != nil {
		return nil, false // its change-set's approvals are not the recorded ones either
	}
	return p, true
}

// matchRecorded is matchRecorded against the state's history.
func (s *state) matchRecorded(p *Pin, last *Entry) error {
	return matchRecorded(p, last, approvedSince(entries(s.log), last.Digest))
}

// Repaired says what Repair wrote again.
type Repaired struct {
	// Pins names each provider whose pin file was written again from the
	// change-set the history accepted last for it.
	Pins []string `json:"pins"`
	// Interfaces is true when interfaces.json was written again from the
	// history's interface-registered entries (each names the id, the
	// digest and the time interfaces.json records).
	Interfaces bool `json:"interfaces"`
	// Trust is true when trust.json, lost, was made again from the
	// history's root of trust and the approved governance change-sets in
	// changesets/ (RepairOptions.RootKey).
	Trust bool `json:"trust"`
	// ApproveAgain is, for a registry an older cruxprov approved, what
	// still keeps its trust state from replaying once the repair is
	// written: a governance step approved in the v1 form, which its
	// approvers approve again (signature_invalid, with the remedy
	// renew_approval naming the change-set; the steps in order, then the
	// pins). Repair checks those approvals over the v1 form and writes
	// what was lost; it cannot give them again. nil otherwise.
	ApproveAgain error `json:"-"`
}

// RepairOptions are what a repair is given beside the registry.
type RepairOptions struct {
	// RootKey is the public key (PEM) of the registry's root of trust,
	// for a trust.json that was lost. The history records the root's
	// name, role and digest, and each later key is in the approved
	// change-set that trusted it, but the root's key itself only
	// trust.json held (unless a change-set trusted it again since). It
	// must be the key of the digest the history records; it is not read
	// while trust.json is there.
	RootKey []byte
}

// repair writes again interfaces.json when it is not what the history
// registered, and each pin file that is lost or older than the pin the
// history accepted last, from that pin's approved change-set. A pin
// file it cannot give back so is refused as checkPin refuses it, and
// then nothing is written.
func (s *state) repair(opts RepairOptions) (*Repaired, error) {
	out := &Repaired{Pins: []string{}}
	if s.trust == nil {
		// Lost (missing; one that is there and not the history's is
		// refused below, with what differs): its steps are the history's
		// and their change-sets', replayed from its root.
		t, err := s.rebuildTrust(opts.RootKey)
		if err != nil {
			return nil, err
		}
		if t != nil {
			s.trust, s.dirty.trust, out.Trust = t, true, true
		}
	}
	// What repair cannot write again is refused rather than reported as
	// "nothing to repair" while verify refuses the registry: a trust
	// document put back or edited (restore it), a pin file the history
	// never accepted (newer than it: propose it again and approve it).
	// A step approved in the v1 form is no such thing: its approvers
	// approve it again, which takes the trust document repair writes
	// (before, repair refused to write it until they did, and their
	// approval was refused until it was written).
	if err := s.checkTrustWith(true); err != nil {
		return nil, err
	}
	if err := s.checkTrust(); refusal.RemedyOf(err) != nil && refusal.RemedyOf(err).Action == refusal.ActionRenewApproval {
		out.ApproveAgain = err
	} else if err != nil {
		return nil, err
	}
	if checkIfaces(s.interfaces(), entries(s.log)) != nil {
		s.ifaces = map[string]Interface{}
		for _, r := range s.log {
			if e := r.e; e.Event == EventInterfaceRegistered {
				s.ifaces[e.Subject] = Interface{ID: e.Subject, Digest: e.Digest, RegisteredAt: e.At.UTC()}
			}
		}
		s.dirty.ifaces, out.Interfaces = true, true
	}
	providers := map[string]bool{}
	for name := range s.pins {
		providers[name] = true
	}
	for _, r := range s.log {
		if e := r.e; e.Event == EventPinAccepted || e.Event == EventPinRetired {
			providers[e.Subject] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(providers)) {
		if p, ok := s.restorablePin(name); ok {
			s.pins[name] = p
			s.dirty.pins[name] = true
			out.Pins = append(out.Pins, name)
		} else if err := s.checkPin(name); err != nil {
			// Not a pin the history's change-set can give back (newer
			// than the history, its change-set gone): nothing is written,
			// and the refusal says what to do.
			return nil, err
		}
		if p, last := s.pins[name], s.lastPinEvent(name); p != nil && (last == nil || p.Revision > last.Revision) {
			// Newer than the history: the history's last entries cut
			// off, or the file's revision edited over its signed spec's.
			why := "the history's last entries cut off"
			if p.Revision != p.Spec.Revision {
				why = "the file edited: " + revisionEdited(p)
			}
			return nil, refusal.New(refusal.RegistryCorrupt, "pins/%s.json (revision %d) is not a pin the registry's history accepted (%s): repair does not build over it; propose provider %s again and approve it", name, p.Revision, why, name)
		} else if p != nil && matchHistory(p, last) != nil {
			return nil, matchHistory(p, last)
		}
	}
	return out, nil
}

// rebuildTrust makes the trust document again, for a trust.json lost,
// as the mutations made it: from the root of trust the history records
// (its key rootPEM, or the key of that digest in a change-set), each
// governance step the history records after it applied in order from
// the approved change-set in changesets/ whose base is the trust state
// before it. The change-sets' approvals must be the ones the history
// recorded, and the result must replay as verify replays it (every
// step's signatures at the threshold then in force, each step the
// history's entry): else registry_corrupt, and nothing is written. nil
// when the history records no root of trust (no trust.json is then what
// the registry holds).
func (s *state) rebuildTrust(rootPEM []byte) (*Trust, error) {
	log := entries(s.log)
	var root *Entry
	var steps []*Entry
	for i := range log {
		switch e := &log[i]; {
		case root == nil && e.isRoot():
			root = e
		case root != nil && (e.Event == EventKeyTrusted || e.Event == EventKeyUntrusted || e.Event == EventPolicyChanged):
			steps = append(steps, e)
		}
	}
	if root == nil {
		return nil, nil
	}
	lost := fmt.Sprintf("trust.json was lost; the history records the root of trust %s (%s, entry %d) and %d governance steps", root.Subject, root.Digest, root.Seq, len(steps))
	pem := string(rootPEM)
	if pem == "" {
		// Trusted again by a change-set since (untrusted, then trusted
		// again): its key is there.
		for _, id := range s.order {
			if c := s.changesets[id].Spec.Changes; len(c) == 1 && c[0].Action == ActionTrustKey && c[0].Key != nil {
				if k, err := parseKey(*c[0].Key); err == nil && k.Digest == root.Digest {
					pem = k.PEM
					break
				}
			}
		}
	}
	if pem == "" {
		return nil, refusal.New(refusal.RegistryCorrupt, "%s: repairing the registry makes trust.json again from them and their approved change-sets, given the root's public key, which only trust.json held (the PUB its first key trust was given, of digest %s); or restore trust.json from a copy of the registry", lost, root.Digest).WithRemedy(refusal.ActionRepairRegistry, root.Digest.String())
	}
	rk, err := parseKey(Key{Name: root.Subject, Role: RoleApprover, PEM: pem})
	if err != nil {
		return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "%s: the root key given is not a public key", lost)
	}
	if rk.Digest != root.Digest {
		return nil, refusal.New(refusal.RegistryCorrupt, "%s: the root key given is %s, not the root of trust's: give the public key of digest %s; trust.json is not written", lost, rk.Digest, root.Digest).WithRemedy(refusal.ActionRepairRegistry, root.Digest.String())
	}
	t := &Trust{Format: TrustFormat, Root: rk, Keys: []Key{rk}, Policy: Policy{Threshold: 1}, History: []Step{}}
	for i, e := range steps {
		base := trustStateDigest(t)
		var cs *ChangeSet
		for _, id := range s.order {
			x := s.changesets[id]
			if x.Status.State == StateApproved && x.Scope() == TrustScope && x.Spec.Base == base && x.Spec.Revision == t.Revision+1 {
				cs = x
				break
			}
		}
		if cs == nil {
			return nil, refusal.New(refusal.RegistryCorrupt, "%s: the approved change-set of governance step %d (entry %d: %s %s) is not in changesets/, and trust.json cannot be made again without it: restore trust.json from a copy of the registry taken after entry %d", lost, i+1, e.Seq, e.Event, e.Subject, steps[len(steps)-1].Seq)
		}
		if err := s.checkRecordedApprovals(cs); err != nil {
			return nil, err
		}
		c := cs.Spec.Changes[0]
		n, err := applyTrust(t, &c)
		if err != nil {
			return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "%s: governance step %d (change-set %s) does not apply", lost, i+1, cs.Metadata.ID)
		}
		n.History = append(append([]Step{}, t.History...), Step{SpecDigest: cs.Metadata.ID, Spec: cs.Spec, Approvals: cs.Status.Approvals})
		t = n
	}
	// As verify replays it: each step signed at the threshold then in
	// force, and the one the history records. An approval in the v1
	// form (a registry an older cruxprov approved) counts here, its
	// signature checked over that form: repair gives back the document
	// that was lost, and its approvers then approve the step again, as
	// in a registry whose trust.json was never lost (repair reports it,
	// Repaired.ApproveAgain).
	if err := replayTrustWith(t, s.registryID(), governanceOf(log), true); err != nil {
		return nil, refusal.Wrap(refusal.CodeOf(err), err, "%s: the trust document its change-sets make does not replay", lost)
	}
	return t, nil
}

// checkIfaces checks the registered interfaces against the history's
// interface-registered entries: the same ids, each with the digest and
// the time the history registered (an interface is registered once and
// never changes).
func checkIfaces(ifaces []Interface, log []Entry) error {
	want := map[string]*Entry{}
	for i := range log {
		if e := &log[i]; e.Event == EventInterfaceRegistered {
			want[e.Subject] = e
		}
	}
	for _, it := range ifaces {
		e := want[it.ID]
		if e == nil {
			return refusal.New(refusal.RegistryCorrupt, "interfaces.json registers interface %s (%s), which the registry's history never registered: interfaces.json was changed; repairing the registry writes it again from the history", it.ID, it.Digest).WithRemedy(refusal.ActionRepairRegistry, "")
		}
		if e.Digest != it.Digest {
			return refusal.New(refusal.RegistryCorrupt, "interfaces.json gives interface %s the digest %s; the registry's history registered it with %s (entry %d): interfaces.json was changed, and nothing is decided from it; repairing the registry writes it again from the history", it.ID, it.Digest, e.Digest, e.Seq).WithRemedy(refusal.ActionRepairRegistry, "")
		}
		if !it.RegisteredAt.Equal(e.At) {
			// No signature covers it, and `interface list` shows it.
			return refusal.New(refusal.RegistryCorrupt, "interfaces.json says interface %s was registered at %s; the registry's history registered it at %s (entry %d): interfaces.json was changed; repairing the registry writes it again from the history", it.ID, it.RegisteredAt.UTC().Format(time.RFC3339Nano), e.At.UTC().Format(time.RFC3339Nano), e.Seq).WithRemedy(refusal.ActionRepairRegistry, "")
		}
		delete(want, it.ID)
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		return refusal.New(refusal.RegistryCorrupt, "the registry's history registered interface %s (entry %d), which interfaces.json does not have: repairing the registry writes it again from the history", id, want[id].Seq).WithRemedy(refusal.ActionRepairRegistry, "")
	}
	return nil
}

// checkPinRevisions checks that each provider's pin entries in the
// history (pin-accepted, pin-retired) go up in revision, one entry per
// revision: approvals make them so.
func checkPinRevisions(log []Entry) error {
	prev := map[string]*Entry{}
	for i := range log {
		e := &log[i]
		if e.Event != EventPinAccepted && e.Event != EventPinRetired {
			continue
		}
		if p := prev[e.Subject]; p != nil && e.Revision <= p.Revision {
			code := refusal.RegistryCorrupt
			if e.Revision < p.Revision {
				code = refusal.PinRollback
			}
			return refusal.New(code, "the registry's history %s %s at revision %d (entry %d) after it %s it at revision %d (entry %d): a provider's revisions only go up, one pin each", strings.TrimPrefix(e.Event, "pin-"), e.Subject, e.Revision, e.Seq, strings.TrimPrefix(p.Event, "pin-"), p.Revision, p.Seq)
		}
		prev[e.Subject] = e
	}
	return nil
}

// checkApprovalsAfterRejection refuses a changeset-approved entry that
// follows the change-set's rejection with no proposal between: a rejected
// change-set takes no approval until it is proposed again, and the
// approvals given before the rejection count again once one is there
// (approvedSince), so such an entry is the trace of a change-set file
// edited back to proposed and approved, which approvals now refuse (the
// file's state is held to the history), left in histories written
// before.
func checkApprovalsAfterRejection(log []Entry) error {
	rejected := map[digest.Digest]*Entry{}
	for i := range log {
		e := &log[i]
		switch e.Event {
		case EventChangeSetProposed:
			delete(rejected, e.Digest)
		case EventChangeSetRejected:
			rejected[e.Digest] = e
		case EventChangeSetApproved:
			if r := rejected[e.Digest]; r != nil {
				return refusal.New(refusal.RegistryCorrupt, "the registry's history approves change-set %s (entry %d) after rejecting it (entry %d) with no proposal between: a rejected change-set takes no approval until it is proposed again, and the approvals the rejection withdrew counted again; restore the registry from a copy taken before entry %d, or reject what it accepted and propose it again", e.Digest.Hex(), e.Seq, r.Seq, e.Seq)
			}
		}
	}
	return nil
}

// VerifyHistory checks what the history says against itself and the
// files beside it, beyond its chain: each provider's pin entries go up
// in revision, one pin each (registry_corrupt for two at one revision,
// pin_rollback for one below an earlier one), no change-set is approved
// after its rejection without a proposal between, and the registered
// interfaces are those the history registered, with its digests
// (registry_corrupt naming the interface). `registry log --verify` runs
// it with VerifyTrust and each pin's VerifyPin.
func VerifyHistory(ctx context.Context, reg Reader) error {
	release, err := readLock(ctx, reg)
	if err != nil {
		return err
	}
	defer release()
	log, err := reg.Log(ctx)
	if err != nil {
		return err
	}
	if err := checkPinRevisions(log); err != nil {
		return err
	}
	if err := checkApprovalsAfterRejection(log); err != nil {
		return err
	}
	ifaces, err := reg.Interfaces(ctx)
	if err != nil {
		return err
	}
	return checkIfaces(ifaces, log)
}

// checkTrust refuses to build on a trust document that is not the one
// the history holds, as checkPin does for a pin: a mutation that reads
// the trust state (a key trusted, a proposal, an approval) first checks
// that trust.json is there when the history records a root of trust,
// and that it holds as many governance steps as the history records
// (one key-trusted, key-untrusted or policy-changed entry each, after
// the root's). Before, a trust.json removed made the next `key trust` a
// second root of trust, and one put back from before a step (a key
// untrusted since trusted again) took proposals and approvals, whose
// history entries then forked the registry for good; verify refused
// the registry only afterwards. registry_corrupt, saying to restore
// trust.json.
func (s *state) checkTrust() error { return s.checkTrustWith(false) }

// checkTrustWith is checkTrust, where v1ok counts the governance steps'
// approvals in the v1 form (replayTrustWith): for the approval that
// replaces one (stepInV1Form).
func (s *state) checkTrustWith(v1ok bool) error {
	var root *Entry
	steps, last := 0, int64(-1)
	for i := range s.log {
		e := &s.log[i].e
		switch {
		case root == nil && e.isRoot():
			root, last = e, e.Seq
		case e.Event == EventKeyTrusted, e.Event == EventKeyUntrusted, e.Event == EventPolicyChanged:
			steps, last = steps+1, e.Seq
		}
	}
	switch {
	case s.trust == nil && root == nil:
		return nil
	case s.trust == nil:
		return refusal.New(refusal.RegistryCorrupt, "the registry has no trust.json, but its history records the root of trust %s (entry %d) and %d governance steps: the trust document was lost; no change is made without it: repairing the registry makes it again from the history and the approved change-sets (given the root's public key), or restore trust.json from a copy of the registry taken after entry %d", root.Subject, root.Seq, steps, last).WithRemedy(refusal.ActionRepairRegistry, root.Digest.String())
	case root == nil:
		return refusal.New(refusal.RegistryCorrupt, "trust.json names the root of trust %s, but the registry's history records none: restore the registry from a copy", s.trust.Root.Name)
	case s.trust.Revision != int64(steps) || len(s.trust.History) != steps:
		return refusal.New(refusal.RegistryCorrupt, "trust.json is at revision %d with %d governance steps; the registry's history records %d (the last at entry %d): a trust document from before (or after) the history was put back; no change is made on it: restore trust.json from a copy of the registry taken after entry %d", s.trust.Revision, len(s.trust.History), steps, last, last)
	}
	// Its keys and policy must be what its approved steps make, as
	// verify replays them: a key added to trust.json by hand (or the
	// threshold lowered) approved and accepted a pin alone, which the
	// history then recorded as accepted.
	gov := governanceOf(entries(s.log))
	if err := replayTrustWith(s.trust, s.registryID(), gov, v1ok); err != nil {
		return restoreTrust(err, gov, "; no change is made on it")
	}
	return nil
}
