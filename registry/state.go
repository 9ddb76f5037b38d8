package registry

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/buildinfo"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// state is the whole registry in memory: Stub keeps one, Dir loads one
// under its lock for each mutation. The governance rules live here once.
type state struct {
	ifaces     map[string]Interface
	trust      *Trust
	changesets map[digest.Digest]*ChangeSet
	order      []digest.Digest
	pins       map[string]*Pin
	log        []logRec
	logBytes   int64 // Dir: the history's size in bytes as loaded
	// dirty records what a mutation changed, for Dir to write.
	dirty dirtySet
}

type dirtySet struct {
	ifaces     bool
	trust      bool
	changesets map[digest.Digest]bool
	pins       map[string]bool
	logFrom    int
}

func newState() *state {
	return &state{
		ifaces:     map[string]Interface{},
		changesets: map[digest.Digest]*ChangeSet{},
		pins:       map[string]*Pin{},
	}
}

func (s *state) begin() {
	s.dirty = dirtySet{changesets: map[digest.Digest]bool{}, pins: map[string]bool{}, logFrom: len(s.log)}
}

func (s *state) record(now time.Time, event, subject string, d digest.Digest, rev int64, detail string) error {
	e := Entry{Seq: int64(len(s.log)), At: now.UTC(), Event: event, Subject: subject, Digest: d, Revision: rev, Detail: detail}
	prev := digest.Digest{}
	if len(s.log) > 0 {
		prev = s.log[len(s.log)-1].hash
	}
	r, err := newLogRec(prev, e)
	if err != nil {
		return err
	}
	s.log = append(s.log, r)
	return nil
}

// validInterfaceID reports whether id is an interface id a provider's
// manifest can name (manifest's entrypoints[].interface.id: letters,
// digits, . _ - /, starting with a letter or digit). Registration took
// any id without whitespace: a look-alike (Cyrillic "о" in acme.echо),
// or one with terminal escapes that `interface list` and `registry log`
// then printed, registered for good though no provider could use it.
func validInterfaceID(id string) bool {
	if id == "" || len(id) > 256 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-' && c != '/') {
			return false
		}
	}
	return true
}

// schemaNamesID refuses (interface_invalid) a schema whose own top-level
// "$id" or "id" is an interface id (validInterfaceID: a URI, as JSON
// Schema's "$id" often is, is not one, and is left alone) other than id,
// the one it is being registered under: acme.echo's schema registered
// as acme.hello was accepted, and the providers that name acme.hello
// were held to the schema of another interface.
func schemaNamesID(id string, schema []byte) error {
	var doc map[string]json.RawMessage
	if json.Unmarshal(schema, &doc) != nil {
		return nil // not an object: it names no id
	}
	for _, field := range []string{"$id", "id"} {
		var named string
		if json.Unmarshal(doc[field], &named) != nil || !validInterfaceID(named) || named == id {
			continue
		}
		return refusal.New(refusal.InterfaceInvalid, "the schema given for interface %s names itself %s (its %q): it is another interface's schema; register it under %s, or, if it is %s's, set its %q to %q", id, named, field, named, id, field, id)
	}
	return nil
}

// MaxSchemaBytes is the most an interface schema may be, as given to
// RegisterInterface: 1 MiB, far above any real JSON Schema (a few KiB),
// and an order of magnitude of memory to canonicalize it. A schema was
// held only to the 64 MiB of every input file, and a 30 MB one took
// about 500 MB of memory to register.
const MaxSchemaBytes = 1 << 20

func (s *state) registerInterface(now time.Time, id string, schema []byte) (*InterfaceResult, error) {
	if !validInterfaceID(id) {
		return nil, refusal.New(refusal.InterfaceInvalid, "interface id %q is not one a manifest can name: 1 to 256 of letters, digits, '.', '_', '-', '/', starting with a letter or digit (acme.echo/v1)", id)
	}
	if len(schema) > MaxSchemaBytes {
		return nil, refusal.New(refusal.InterfaceInvalid, "the schema of %s is %d bytes; an interface schema is at most %d (1 MiB): give the interface's JSON Schema, not a larger document", id, len(schema), MaxSchemaBytes)
	}
	d, err := digest.InterfaceDigest(schema)
	if err != nil {
		return nil, refusal.Wrap(refusal.InterfaceInvalid, err, "schema of %s is not canonicalizable JSON", id)
	}
	// interfaces.json decides below: it must be what the history
	// registered (else an edited digest would be blamed on the schema).
	if err := checkIfaces(s.interfaces(), entries(s.log)); err != nil {
		return nil, err
	}
	if old, ok := s.ifaces[id]; ok {
		if old.Digest != d {
			return nil, refusal.New(refusal.InterfaceDigestMismatch, "interface %s is registered with %s; this schema is %s: a registered id keeps its schema for good (the history is append-only), so register this schema under a new interface id, the one the providers built against it name in their manifests (%s's next version), or give the schema registered as %s (the providers that name it were built against that one)", id, old.Digest, d, id, id)
		}
		return &InterfaceResult{Interface: old, Already: true}, nil
	}
	// A new registration only: one made before this check stays as the
	// history has it.
	if err := schemaNamesID(id, schema); err != nil {
		return nil, err
	}
	it := Interface{ID: id, Digest: d, RegisteredAt: now.UTC()}
	s.ifaces[id] = it
	s.dirty.ifaces = true
	return &InterfaceResult{Interface: it}, s.record(now, EventInterfaceRegistered, id, d, 0, "")
}

// parseKey validates k's name, role and PEM and fills in its digest.
func parseKey(k Key) (Key, error) {
	if !validName(k.Name) {
		return k, refusal.New(refusal.ChangesetInvalid, "key name %q: want lowercase letters, digits, '.', '_', '-'", k.Name)
	}
	if k.Role == "" {
		k.Role = RoleApprover
	}
	if k.Role != RoleApprover && k.Role != RoleBuilder {
		return k, refusal.New(refusal.ChangesetInvalid, "key role %q: want approver or builder", k.Role)
	}
	pk, err := sign.ParsePublicKey([]byte(k.PEM))
	if err != nil {
		return k, err
	}
	if !k.Digest.IsZero() && k.Digest != pk.Digest() {
		return k, refusal.New(refusal.ChangesetInvalid, "key %s: digest %s is not its key's %s", k.Name, k.Digest, pk.Digest())
	}
	k.PEM = string(pk.PEM())
	k.Digest = pk.Digest()
	return k, nil
}

func (s *state) trustKey(now time.Time, k Key, by string) (*TrustResult, error) {
	k, err := parseKey(k)
	if err != nil {
		return nil, err
	}
	if err := s.checkTrust(); err != nil {
		return nil, err
	}
	if s.trust == nil {
		if k.Role != RoleApprover {
			// It said no more than that: nothing of what to do (a CI's
			// builder key trusted on a fresh registry, ci.md).
			return nil, refusal.New(refusal.ChangesetInvalid, "the first key trusted is the root of trust and must be an approver, not a %s: trust an approver's key first (an operator's, who approves change-sets), then trust this one, a change-set that approver approves", k.Role).WithRemedy(refusal.ActionTrustKey, RoleApprover)
		}
		s.trust = &Trust{Format: TrustFormat, Root: k, Keys: []Key{k}, Policy: Policy{Threshold: 1}, History: []Step{}}
		s.dirty.trust = true
		return &TrustResult{Root: true, Key: k}, s.record(now, EventKeyTrusted, k.Name, k.Digest, 0, rootDetail+" ("+k.Role+")")
	}
	// This very key trusted already under this name and role (the same
	// key trust run again by an operator who cannot tell whether it went
	// through, or after it was killed once it was recorded): nothing to
	// change, and the result says so (Already), as an approval made
	// again does (approvedBy). The same key under another name, or
	// another key or role under this name, is not the same request: it
	// is proposed or refused as before (applyTrust).
	for _, x := range s.trust.Keys {
		if x.Name == k.Name && x.Digest == k.Digest && x.Role == k.Role {
			r := s.trust.Root
			return &TrustResult{Root: r.Name == x.Name && r.Digest == x.Digest, Key: x, Already: true}, nil
		}
	}
	cs, already, err := s.propose(now, Change{Action: ActionTrustKey, Key: &k}, by)
	if err != nil {
		return nil, err
	}
	return &TrustResult{Key: k, ChangeSet: cs, Proposed: already}, nil
}

// registryID is the registry's id, its first history entry's hash (zero
// while it has no history): what every approval given in it names.
func (s *state) registryID() digest.Digest {
	if len(s.log) == 0 {
		return digest.Digest{}
	}
	return s.log[0].hash
}

// current returns the base and revision a change-set for scope replaces.
func (s *state) current(scope string) (digest.Digest, int64) {
	if scope == TrustScope {
		if s.trust == nil {
			return digest.Digest{}, 0
		}
		return trustStateDigest(s.trust), s.trust.Revision
	}
	if p := s.pins[scope]; p != nil {
		return p.SpecDigest, p.Revision
	}
	return digest.Digest{}, 0
}

// propose is Writer.Propose: already is true where the same change-set
// is open already, which it returns as it is, recording nothing.
func (s *state) propose(now time.Time, c Change, by string) (_ *ChangeSet, already bool, _ error) {
	if err := s.checkTrust(); err != nil {
		return nil, false, err
	}
	if c.Action == ActionUntrustKey && c.Key != nil && c.Key.Digest.IsZero() && s.trust != nil {
		// Untrusting a key by name removes its key material: the spec
		// names the digest, so the approvers sign which key goes, and
		// every name it is trusted under goes with it (applyTrust).
		for _, x := range s.trust.Keys {
			if x.Name == c.Key.Name {
				k := *c.Key
				k.Digest = x.Digest
				c.Key = &k
			}
		}
	}
	spec := Spec{Changes: []Change{c}}
	scope := spec.scope()
	if scope != TrustScope && validName(scope) {
		// The base and revision come from the pin file: it must be the
		// pin the history holds, not one put back from before.
		if err := s.checkPin(scope); err != nil {
			return nil, false, err
		}
	}
	if err := s.validateChange(&c); err != nil {
		return nil, false, err
	}
	spec.Base, spec.Revision = s.current(scope)
	spec.Revision++
	id, err := SpecDigest(&spec)
	if err != nil {
		return nil, false, err
	}
	if old, ok := s.changesets[id]; ok {
		switch old.Status.State {
		case StateProposed:
			return cloneCS(old), true, nil
		case StateRejected:
			// Proposed again after a rejection: open again, with no
			// approvals (the rejection withdrew them); the history keeps
			// the rejection and records the new proposal.
			old.Metadata.ProposedAt, old.Metadata.ProposedBy = now.UTC().Truncate(time.Second), by
			old.Status = Status{State: StateProposed, Approvals: []Approval{}}
			s.dirty.changesets[id] = true
			s.order = append(slices.DeleteFunc(s.order, func(o digest.Digest) bool { return o == id }), id)
			return cloneCS(old), false, s.record(now, EventChangeSetProposed, scope, id, spec.Revision, c.Action)
		}
		return nil, false, refusal.New(refusal.ChangesetInvalid, "change-set %s was already approved at revision %d: it is what the registry holds now for %s", id, spec.Revision, scope)
	}
	cs := &ChangeSet{
		APIVersion: APIVersion, Kind: KindChangeSet,
		Metadata: Metadata{ID: id, ProposedAt: now.UTC().Truncate(time.Second), ProposedBy: by},
		Spec:     spec,
		Status:   Status{State: StateProposed, Approvals: []Approval{}},
	}
	if err := validateChangeSet(cs); err != nil {
		return nil, false, err
	}
	s.changesets[id] = cs
	s.order = append(s.order, id)
	s.dirty.changesets[id] = true
	return cloneCS(cs), false, s.record(now, EventChangeSetProposed, scope, id, spec.Revision, c.Action)
}

// validateChange checks a change against the registry's current state.
func (s *state) validateChange(c *Change) error {
	if err := validateChangeShape(c); err != nil {
		return err
	}
	// A stored change-set or pin may leave protocol out (one an older
	// cruxprov wrote still opens, and verify refuses its pin
	// protocol_unsupported), but a new proposal may not: DESIGN §8 and §9
	// make the range part of what a registration holds, and such a
	// proposal was accepted only to be refused at verify.
	if c.lacksProtocol() {
		return refusal.New(refusal.ChangesetInvalid, "provider %s: protocol is missing: add protocol: [%d, %d] (the range of protocol_version it speaks, inclusive) and propose again", c.Provider.Name, buildinfo.ProtocolVersion, buildinfo.ProtocolVersion)
	}
	switch c.Action {
	case ActionRetire:
		// It said no more than that: which providers there are (a
		// mistyped name, one proposed and not approved yet) is what the
		// change-sets list, by scope.
		if p := s.pins[c.Provider.Name]; p == nil {
			return refusal.New(refusal.PinUnapproved, "provider %s has no accepted pin to retire: nothing was proposed; check its name among the change-sets' scopes", c.Provider.Name).WithRemedy(refusal.ActionReviewChangesets, "")
		} else if p.Retired {
			return refusal.New(refusal.PinUnapproved, "provider %s is retired already: nothing was proposed", c.Provider.Name).WithRemedy(refusal.ActionReviewChangesets, "")
		}
	case ActionTrustKey, ActionUntrustKey, ActionSetPolicy:
		if s.trust == nil {
			return noTrust()
		}
		_, err := applyTrust(s.trust, c)
		if err != nil {
			return s.awaitingApprover(c, err)
		}
	}
	return nil
}

// awaitingApprover is err, applyTrust's refusal of the governance change
// c, or, where an approver key's trust is proposed and not approved yet,
// and c would be valid once it is, a refusal that says so and advises its
// approval: "trust another approver key first" sent the operator to a
// key trust that proposed nothing new (it printed the open change-set
// again), or, for a policy set --threshold, named no key at all.
func (s *state) awaitingApprover(c *Change, err error) error {
	var r *refusal.Error
	if c.Action == ActionTrustKey || !errors.As(err, &r) || r.Code != refusal.ChangesetInvalid {
		return err
	}
	head, _, ok := strings.Cut(r.Message(), noApprovalAgain)
	if !ok {
		return err
	}
	for _, id := range s.order {
		cs := s.changesets[id]
		if cs == nil || cs.Status.State != StateProposed || len(cs.Spec.Changes) != 1 {
			continue
		}
		p := cs.Spec.Changes[0]
		if p.Action != ActionTrustKey || p.Key == nil || p.Key.Role != RoleApprover {
			continue
		}
		t, perr := applyTrust(s.trust, &p)
		if perr != nil {
			continue
		}
		if _, cerr := applyTrust(t, c); cerr == nil {
			return refusal.New(refusal.ChangesetInvalid, "%s%s; the change-set %s that trusts the approver key %s is proposed, not approved: approve it first, then propose this change again", head, noApprovalAgain, id, p.Key.Name).WithRemedy(refusal.ActionApprove, id.String())
		}
	}
	return err
}

// noApprovalAgain is what applyTrust's refusal of a change that would
// leave fewer approver keys than the threshold says of it.
const noApprovalAgain = "nothing could be approved again"

// applyTrust returns t with the governance change c applied (t unchanged).
func applyTrust(t *Trust, c *Change) (*Trust, error) {
	n := *t
	n.Keys = append([]Key(nil), t.Keys...)
	switch c.Action {
	case ActionTrustKey:
		k, err := parseKey(*c.Key)
		if err != nil {
			return nil, err
		}
		for _, x := range n.Keys {
			if x.Name == k.Name && x.Digest == k.Digest && x.Role == k.Role {
				return nil, refusal.New(refusal.ChangesetInvalid, "%s is already trusted, this very key as %s: nothing to change (the registry's trusted keys list it)", k.Name, x.Role).WithRemedy(refusal.ActionListKeys, "")
			}
			if x.Name == k.Name {
				return nil, refusal.New(refusal.ChangesetInvalid, "a key named %s is already trusted (%s, %s); untrust that one first, or trust this one under another name", k.Name, x.Role, x.Digest).WithRemedy(refusal.ActionUntrustKey, k.Name)
			}
		}
		n.Keys = append(n.Keys, k)
	case ActionUntrustKey:
		i := -1
		for j, x := range n.Keys {
			if x.Name == c.Key.Name {
				i = j
			}
		}
		if i < 0 {
			return nil, refusal.New(refusal.ChangesetInvalid, "no trusted key is named %s; the registry's trusted keys are listed by name", c.Key.Name).WithRemedy(refusal.ActionListKeys, "")
		}
		if c.Key.Digest.IsZero() {
			// A step from before untrusting named the key by name only.
			n.Keys = append(n.Keys[:i], n.Keys[i+1:]...)
			break
		}
		if c.Key.Digest != n.Keys[i].Digest {
			return nil, refusal.New(refusal.ChangesetInvalid, "key %s is %s, not %s", c.Key.Name, n.Keys[i].Digest, c.Key.Digest)
		}
		// The key material goes, under every name it is trusted as.
		n.Keys = slices.DeleteFunc(n.Keys, func(x Key) bool { return x.Digest == c.Key.Digest })
	case ActionSetPolicy:
		n.Policy = *c.Policy
	}
	sort.Slice(n.Keys, func(i, j int) bool { return n.Keys[i].Name < n.Keys[j].Name })
	if a := len(approverDigests(&n)); a < n.Policy.Threshold {
		// What to do first depends on the change: a threshold is raised
		// after the keys that meet it are trusted; a key goes after the
		// threshold is lowered (or another key trusted in its place).
		// Lowering the threshold helps only while an approver key
		// remains: with none left (the last approver key, or one
		// trusted under several names, each of which goes), no
		// threshold is low enough (it is at least 1).
		next, act, target := "", refusal.ActionTrustKey, RoleApprover
		switch {
		case c.Action == ActionSetPolicy:
			next = "trust another approver key first, then set the threshold"
		case a == 0:
			next = "trust another approver key first and approve that, then untrust this one"
		default:
			next = fmt.Sprintf("lower the threshold to %d first, or trust another approver key", a)
			act, target = refusal.ActionSetThreshold, strconv.Itoa(a)
		}
		if c.Action == ActionUntrustKey {
			if others := otherNames(t, c.Key); len(others) > 0 {
				next = fmt.Sprintf("the key %s is also trusted as %s, and untrusting it removes it under every name; %s", c.Key.Name, strings.Join(others, ", "), next)
			}
		}
		keys := "keys"
		if a == 1 {
			keys = "key"
		}
		return nil, refusal.New(refusal.ChangesetInvalid, "the change would leave %d distinct approver %s for a threshold of %d: %s; %s", a, keys, n.Policy.Threshold, noApprovalAgain, next).WithRemedy(act, target)
	}
	n.Revision++
	return &n, nil
}

// otherNames returns the names, other than k's, under which the key
// trusted as k.Name in t is trusted too.
func otherNames(t *Trust, k *Key) []string {
	var d digest.Digest
	for _, x := range t.Keys {
		if x.Name == k.Name {
			d = x.Digest
		}
	}
	var names []string
	for _, x := range t.Keys {
		if x.Digest == d && x.Name != k.Name {
			names = append(names, x.Name)
		}
	}
	return names
}

func approverDigests(t *Trust) map[digest.Digest]Key {
	m := map[digest.Digest]Key{}
	for _, k := range t.Keys {
		if k.Role == RoleApprover {
			m[k.Digest] = k
		}
	}
	return m
}

func (s *state) changeset(id digest.Digest) (*ChangeSet, error) {
	cs := s.changesets[id]
	if cs == nil {
		return nil, refusal.New(refusal.ChangesetInvalid, "no change-set %s", id).WithRemedy(refusal.ActionReviewChangesets, "")
	}
	return cs, nil
}

// approvable checks what an approval of change-set id can be refused for
// whatever key signs it (Approvable): the change-set is there and as the
// history recorded it, the trust document and the scope's pin are the
// history's, a proposal's base is current (else changeset_stale), a
// change-set no longer proposed is one that a key could still approve
// again or renew (the accepted pin's, or the trust state's last step),
// and some key is trusted. approve makes these checks first, under the
// lock; the rest depend on the key.
func (s *state) approvable(id digest.Digest) (*ChangeSet, error) {
	cs, err := s.changeset(id)
	if err != nil {
		return nil, err
	}
	if err := s.checkRecordedApprovals(cs); err != nil {
		return nil, err
	}
	// An applied governance step with an approval in the v1 form is
	// approved again to replace it (stepInV1Form): the trust state is
	// replayed with such approvals counted, which is all that stops it.
	v1 := s.stepHasV1(cs)
	if err := s.checkTrustWith(v1); err != nil {
		return nil, err
	}
	scope := cs.Scope()
	if scope != TrustScope {
		// What is current for the provider (the base an approval must
		// replace, the pin a renewal or an approval made again refers
		// to) is the pin the history holds: a pin file put back from
		// before is not built on.
		if err := s.checkPin(scope); err != nil {
			return nil, err
		}
	}
	if cs.Status.State != StateProposed {
		// Only an approval made again (approvedBy) or a renewal
		// (renewable) of what the registry holds now can go through,
		// and which one depends on the key; anything else is refused
		// for every key.
		if !s.heldNow(cs) && !v1 {
			return nil, notProposed(cs, "approved", s.inForce(cs), s.pins[cs.Scope()])
		}
		return cs, nil
	}
	if base, rev := s.current(scope); cs.Spec.Base != base || cs.Spec.Revision != rev+1 {
		again, remedy := proposeAgain(&cs.Spec, scope)
		stale := refusal.New(refusal.ChangesetStale, "change-set %s replaces %s at revision %d; %s is now at %s revision %d: propose again (%s)", id, orNone(cs.Spec.Base), cs.Spec.Revision-1, scope, orNone(base), rev, again)
		stale.Remedy = remedy
		return nil, stale
	}
	if c := &cs.Spec.Changes[0]; c.lacksProtocol() {
		// Proposed by an older cruxprov, before a proposal had to name
		// a range (validateChange). The proposal with its range is a
		// new change-set, which makes this one stale.
		again, remedy := proposeAgain(&cs.Spec, scope)
		r := refusal.New(refusal.ChangesetInvalid, "change-set %s registers provider %s with no protocol range (an older cruxprov proposed it): its pin would be refused protocol_unsupported by every verify; %s, which records the range, and approve that change-set instead", id, c.Provider.Name, again)
		r.Remedy = remedy
		return nil, r
	}
	if s.trust == nil {
		return nil, noTrust()
	}
	return cs, nil
}

// inForce reports whether the change cs makes is in force now: for a
// provider, cs is the pin the registry holds (heldNow); for a trust
// change, the trust state says what it says (its key trusted under its
// name with its role, untrusted, the threshold set), whichever step made
// it so.
func (s *state) inForce(cs *ChangeSet) bool {
	if cs.Scope() != TrustScope {
		return s.heldNow(cs)
	}
	if s.trust == nil || len(cs.Spec.Changes) != 1 {
		return false
	}
	c := cs.Spec.Changes[0]
	switch {
	case c.Action == ActionSetPolicy && c.Policy != nil:
		return s.trust.Policy.Threshold == c.Policy.Threshold
	case c.Action == ActionTrustKey && c.Key != nil:
		return slices.ContainsFunc(s.trust.Keys, func(k Key) bool {
			return k.Name == c.Key.Name && k.Digest == c.Key.Digest && k.Role == c.Key.Role
		})
	case c.Action == ActionUntrustKey && c.Key != nil:
		return !slices.ContainsFunc(s.trust.Keys, func(k Key) bool {
			return k.Digest == c.Key.Digest && !c.Key.Digest.IsZero() || c.Key.Digest.IsZero() && k.Name == c.Key.Name
		})
	}
	return false
}

// trustChangeWords says what trust change c makes, as it stands once
// made.
func trustChangeWords(c *Change) string {
	switch {
	case c.Action == ActionSetPolicy && c.Policy != nil:
		return fmt.Sprintf("the threshold is %d", c.Policy.Threshold)
	case c.Action == ActionTrustKey && c.Key != nil:
		return fmt.Sprintf("%s is trusted as %s", c.Key.Name, c.Key.Role)
	case c.Action == ActionUntrustKey && c.Key != nil:
		return c.Key.Name + " is not trusted"
	}
	return c.Action
}

// heldNow reports whether cs, approved, is what the registry holds for
// its scope now (the accepted pin, or the trust state's last step): the
// only change-set no longer proposed that approvedBy or renewable can
// take.
func (s *state) heldNow(cs *ChangeSet) bool {
	if cs.Status.State != StateApproved || s.trust == nil {
		return false
	}
	if cs.Scope() == TrustScope {
		h := s.trust.History
		return len(h) > 0 && h[len(h)-1].SpecDigest == cs.Metadata.ID
	}
	p := s.pins[cs.Scope()]
	return p != nil && p.SpecDigest == cs.Metadata.ID
}

func (s *state) approve(now time.Time, id digest.Digest, signer *sign.PrivateKey, expires *time.Time) (*ApproveResult, error) {
	cs, err := s.approvable(id)
	if err != nil {
		return nil, err
	}
	scope := cs.Scope()
	renew := false
	step := s.stepInV1Form(cs, signer.Public().Digest())
	if cs.Status.State != StateProposed && step < 0 {
		if res := s.approvedAlready(now, cs, signer.Public().Digest()); res != nil {
			return res, nil
		}
		if renew = s.renewable(now, cs, signer.Public().Digest()); !renew {
			return nil, notProposed(cs, "approved", s.inForce(cs), s.pins[cs.Scope()])
		}
	}
	if expires != nil && scope == TrustScope {
		// The trust state replays without expiries: one here would be a
		// promise nothing keeps.
		return nil, refusal.New(refusal.ChangesetInvalid, "change-set %s changes the trust state, which does not expire: approve it without an expiry", id)
	}
	if step >= 0 {
		return s.resignStep(now, cs, step, signer)
	}
	key, err := s.approverKey(signer.Public().Digest())
	if err != nil {
		return nil, err
	}
	if expires != nil {
		e := expires.UTC().Truncate(time.Second)
		if !e.After(now) {
			return nil, refusal.New(refusal.PinExpired, "the approval would expire at %s, not after now", e.Format(time.RFC3339))
		}
		expires = &e
	}
	reg := s.registryID()
	if reg.IsZero() {
		return nil, refusal.New(refusal.RegistryCorrupt, "the registry has no history to name it in the approval")
	}
	sig, err := signer.Sign(ApprovalPayload(reg, id, scope, cs.Spec.Revision, expires))
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	ap := Approval{Signer: key.Digest, Name: key.Name, Signature: base64.StdEncoding.EncodeToString(sig), At: now.UTC().Truncate(time.Second), Expires: expires}
	kept := cs.Status.Approvals[:0:0]
	replaced := false
	for _, a := range cs.Status.Approvals {
		if a.Signer != ap.Signer {
			kept = append(kept, a)
		} else {
			replaced = true
		}
	}
	cs.Status.Approvals = append(kept, ap)
	s.dirty.changesets[id] = true
	detail := "signature by " + key.Digest.String()
	renewV1 := false
	if renew {
		for _, a := range s.pins[scope].Approvals {
			renewV1 = renewV1 || a.Signer == key.Digest && v1Form(*key, id, scope, cs.Spec.Revision, a)
		}
		if renewV1 {
			detail += renewalV1
		} else {
			detail += " (renewal of an expired approval)"
		}
	}
	if err := s.record(now, EventChangeSetApproved, key.Name, id, cs.Spec.Revision, detail); err != nil {
		return nil, err
	}
	// The count is what decides: an approval that no longer counts (it
	// expired, or its key was untrusted since) stays recorded but does
	// not keep the others from reaching the threshold.
	n, _, _ := countApprovals(s.trust, s.registryID(), id, scope, cs.Spec.Revision, cs.Status.Approvals, now)
	res := &ApproveResult{Approvals: n, Threshold: s.trust.Policy.Threshold, Replaced: replaced && !renew, Renewed: renew, V1Form: renewV1}
	if renew {
		// The accepted pin carries the renewed approval: its spec and
		// revision are what the history accepted, so no pin-accepted
		// entry is added (a verifier matches the pin with the last one);
		// the changeset-approved entry records the renewal.
		p := clonePin(s.pins[scope])
		p.Approvals = cs.Status.Approvals
		s.pins[scope] = p
		s.dirty.pins[scope] = true
		res.Accepted, res.Pin, res.ChangeSet = n >= res.Threshold, clonePin(p), cloneCS(cs)
		return res, nil
	}
	if n >= s.trust.Policy.Threshold {
		res.Accepted = true
		if err := s.accept(now, cs); err != nil {
			return nil, err
		}
		if p := s.pins[scope]; p != nil && scope != TrustScope {
			res.Pin = clonePin(p)
		}
	}
	res.ChangeSet = cloneCS(cs)
	return res, nil
}

// approverKey is the trusted approver key whose digest is signer, or the
// refusal of an approval by it: a key the registry does not trust, or a
// builder key.
func (s *state) approverKey(signer digest.Digest) (*Key, error) {
	var key *Key
	for i := range s.trust.Keys {
		if s.trust.Keys[i].Digest == signer {
			key = &s.trust.Keys[i]
			if key.Role == RoleApprover {
				break
			}
		}
	}
	if key == nil {
		return nil, refusal.New(refusal.SignerUntrusted, "key %s is not trusted by this registry: approve with a trusted approver key (the registry's trusted keys are listed with their roles), or have this one trusted first (a change-set the trusted keys approve)", signer).WithRemedy(refusal.ActionListKeys, "")
	}
	if key.Role != RoleApprover {
		return nil, refusal.New(refusal.SignerUntrusted, "key %s (%s) is a builder key: builder signatures never count as approvals; approve with an approver key (the registry's trusted keys are listed with their roles)", key.Name, key.Digest).WithRemedy(refusal.ActionListKeys, "")
	}
	return key, nil
}

// beforeSigning is what approve of cs by the key whose digest is signer
// decides before it signs: the result of an approval that stands already
// (approvedAlready), or the refusal of this key's approval (a change-set
// no longer proposed that it cannot renew, an untrusted or builder key);
// nil and no error where it signs. cs is approvable's.
func (s *state) beforeSigning(now time.Time, cs *ChangeSet, signer digest.Digest) (*ApproveResult, error) {
	if res := s.approvedAlready(now, cs, signer); res != nil {
		return res, nil
	}
	if s.stepInV1Form(cs, signer) >= 0 {
		return nil, nil
	}
	if cs.Status.State != StateProposed && !s.renewable(now, cs, signer) {
		return nil, notProposed(cs, "approved", s.inForce(cs), s.pins[cs.Scope()])
	}
	_, err := s.approverKey(signer)
	return nil, err
}

// checkRecordedApprovals refuses a change-set whose approvals are not
// the ones the history recorded for it since its last proposal: each
// approval in its status has a changeset-approved entry of its key
// (detail "signature by <digest>"), and no key approves twice. An
// approval added to the change-set file by hand (one replayed from
// another change-set, whose signature does not verify, or a copy of a
// real one under another name) did not count, but an approval that
// accepted the change-set carried it into the pin or the trust state,
// where `changeset show` and `provider show` listed it as an approval
// given; and a withdrawn approval put back after a rejection would
// count again. registry_corrupt, naming the file.
func (s *state) checkRecordedApprovals(cs *ChangeSet) error {
	if err := s.checkRecordedSigners(cs); err != nil {
		return err
	}
	// And what no signature covers: its approvals' names and times, the
	// time it was proposed (an approval accepts it into a pin with them).
	return matchChangeSetRecord(cs, entries(s.log))
}

func (s *state) checkRecordedSigners(cs *ChangeSet) error {
	id := cs.Metadata.ID
	recorded := map[digest.Digest]bool{}
	for _, r := range s.log {
		if r.e.Digest != id {
			continue
		}
		switch r.e.Event {
		case EventChangeSetProposed:
			clear(recorded) // a rejection withdrew the approvals before it
		case EventChangeSetApproved:
			if d, ok := strings.CutPrefix(r.e.Detail, "signature by "); ok {
				d, _, _ = strings.Cut(d, " ")
				if dg, err := digest.Parse(d); err == nil {
					recorded[dg] = true
				}
			}
		}
	}
	seen := map[digest.Digest]bool{}
	for _, a := range cs.Status.Approvals {
		if seen[a.Signer] {
			return refusal.New(refusal.RegistryCorrupt, "changesets/%s.yaml holds two approvals by key %s: this registry did not write them; restore the file from a copy of the registry, or reject the change-set and propose it again", id.Hex(), a.Signer)
		}
		seen[a.Signer] = true
		if !recorded[a.Signer] {
			return refusal.New(refusal.RegistryCorrupt, "changesets/%s.yaml holds an approval by %s (%s) that the history never recorded for it: this registry did not write it; restore the file from a copy of the registry, or reject the change-set and propose it again", id.Hex(), a.Name, a.Signer)
		}
	}
	return nil
}

// approvedAlready is Approve's result, with nothing signed, for the key
// whose digest is signer when its approval of cs stands: cs is no longer
// proposed, this key's approval of it has not expired (that would be a
// renewal) and approvedBy says so. nil where an approval by this key
// signs, or is refused.
func (s *state) approvedAlready(now time.Time, cs *ChangeSet, signer digest.Digest) *ApproveResult {
	if cs.Status.State == StateProposed || s.renewable(now, cs, signer) || s.stepInV1Form(cs, signer) >= 0 {
		return nil
	}
	return s.approvedBy(now, cs, signer)
}

// approvedBy is the result of approving again, with the key whose
// digest is signer, a change-set that this key's approval already
// accepted and that is still what the registry holds for its scope (the
// accepted pin, or the trust state's last step): nothing changes, and
// the result says so (Already). An approver whose approve was killed
// or failed once the change was recorded runs the same command again
// and learns that it was made (TestApproveKilledAtEachWrite); another
// state is nil, and refused.
func (s *state) approvedBy(now time.Time, cs *ChangeSet, signer digest.Digest) *ApproveResult {
	if cs.Status.State != StateApproved || s.trust == nil || !slices.ContainsFunc(cs.Status.Approvals, func(a Approval) bool { return a.Signer == signer }) {
		return nil
	}
	scope := cs.Scope()
	res := &ApproveResult{ChangeSet: cloneCS(cs), Threshold: s.trust.Policy.Threshold, Already: true}
	if scope == TrustScope {
		h := s.trust.History
		if len(h) == 0 || h[len(h)-1].SpecDigest != cs.Metadata.ID {
			return nil
		}
	} else {
		p := s.pins[scope]
		if p == nil || p.SpecDigest != cs.Metadata.ID {
			return nil
		}
		res.Pin = clonePin(p)
	}
	if scope == TrustScope {
		// A trust change was accepted at the threshold (and by the
		// keys) in force before it, and stays applied: count its
		// approvals there. Counted against the state after it, a
		// threshold raised by this very change (policy set
		// --threshold 2, approved by one key) read "1 of 2 approvals"
		// beside "accepted".
		if before := trustBefore(s.trust, len(s.trust.History)-1); before != nil {
			res.Threshold = before.Policy.Threshold
			res.Approvals, _, _ = countApprovals(before, s.registryID(), cs.Metadata.ID, scope, cs.Spec.Revision, cs.Status.Approvals, now)
			res.Accepted = true
			return res
		}
	}
	res.Approvals, _, _ = countApprovals(s.trust, s.registryID(), cs.Metadata.ID, scope, cs.Spec.Revision, cs.Status.Approvals, now)
	// Accepted says what the approvals make of it now, not that it was
	// accepted once: an expired or no longer trusted approval does not
	// count, and a pin short of the threshold does not run. (A trust
	// change does not expire: its step stays applied.)
	res.Accepted = scope == TrustScope || res.Approvals >= res.Threshold
	return res
}

// trustBefore is the trust state t's first n governance steps make from
// its root (as replayTrust replays them), or nil where a step does not
// apply.
func trustBefore(t *Trust, n int) *Trust {
	cur := &Trust{Root: t.Root, Keys: []Key{t.Root}, Policy: Policy{Threshold: 1}}
	for _, st := range t.History[:n] {
		if len(st.Spec.Changes) != 1 {
			return nil
		}
		c := st.Spec.Changes[0]
		next, err := applyTrust(cur, &c)
		if err != nil {
			return nil
		}
		cur = next
	}
	return cur
}

// renewable reports whether approving cs with the key whose digest is
// signer renews an expired approval: cs is the accepted, not retired pin
// of its provider (never a pin replaced since: an old change-set cannot
// be approved back into place), and this key's approval on it has
// expired at now. The renewal is a new approval, signed with its own
// expiry over the same payload fields (the pin's revision), so an
// expired signature never counts again: its expiry is what it signed.
func (s *state) renewable(now time.Time, cs *ChangeSet, signer digest.Digest) bool {
	if cs.Status.State != StateApproved || s.trust == nil {
		return false
	}
	scope := cs.Scope()
	p := s.pins[scope]
	if scope == TrustScope || p == nil || p.Retired || p.SpecDigest != cs.Metadata.ID || p.Revision != cs.Spec.Revision {
		return false
	}
	for _, a := range p.Approvals {
		if a.Signer == signer {
			if a.Expires != nil && !now.Before(*a.Expires) {
				return true
			}
			k, ok := approverDigests(s.trust)[signer]
			return ok && v1Form(k, cs.Metadata.ID, scope, cs.Spec.Revision, a)
		}
	}
	return false
}

// v1Form reports whether approval a verifies, with the key k, over the
// approval payload's v1 form, which did not name the registry: an
// approval a cruxprov before the v2 payload gave (docs/governance.md,
// "Why the registry is in it"). It never counts; approving the
// change-set again with that key replaces it (renewable, stepInV1Form).
func v1Form(k Key, id digest.Digest, scope string, rev int64, a Approval) bool {
	if k.Digest != a.Signer {
		return false
	}
	pk, err := sign.ParsePublicKey([]byte(k.PEM))
	if err != nil || pk.Digest() != a.Signer {
		return false
	}
	sig, err := base64.StdEncoding.DecodeString(a.Signature)
	if err != nil {
		return false
	}
	return pk.Verify(approvalPayloadV1(id, scope, rev, a.Expires), sig) == nil
}

// v1Signers are the trusted approver keys of t (distinct) whose approval
// in aps is in the v1 form (v1Form) and who gave none that counts.
func v1Signers(t *Trust, reg, id digest.Digest, scope string, rev int64, aps []Approval) []Key {
	approvers := approverDigests(t)
	var out []Key
	seen := map[digest.Digest]bool{}
	for _, a := range aps {
		k, ok := approvers[a.Signer]
		if !ok || seen[a.Signer] || !v1Form(k, id, scope, rev, a) {
			continue
		}
		if n, _, _ := countApprovals(t, reg, id, scope, rev, approvalsBy(aps, a.Signer), time.Time{}); n > 0 {
			continue
		}
		seen[a.Signer] = true
		out = append(out, k)
	}
	return out
}

func approvalsBy(aps []Approval, signer digest.Digest) []Approval {
	var out []Approval
	for _, a := range aps {
		if a.Signer == signer {
			out = append(out, a)
		}
	}
	return out
}

// appliedStep is the index in the trust state's history of cs, an
// approved governance change-set, or -1.
func (s *state) appliedStep(cs *ChangeSet) int {
	if cs.Status.State != StateApproved || s.trust == nil || cs.Scope() != TrustScope {
		return -1
	}
	for i, st := range s.trust.History {
		if st.SpecDigest == cs.Metadata.ID {
			return i
		}
	}
	return -1
}

// stepInV1Form is the index of cs in the trust state's history where it
// is an applied governance step whose approval by the key whose digest
// is signer is in the v1 form (v1Form, checked with that key as the
// trust state before the step trusted it), else -1. Approving cs with
// that key replaces the approval (resignStep): any step, not only the
// last, since the trust state replays only once every step counts.
func (s *state) stepInV1Form(cs *ChangeSet, signer digest.Digest) int {
	i := s.appliedStep(cs)
	if i < 0 {
		return -1
	}
	before := trustBefore(s.trust, i)
	if before == nil {
		return -1
	}
	st := s.trust.History[i]
	k, ok := approverDigests(before)[signer]
	if !ok {
		return -1
	}
	for _, a := range st.Approvals {
		if a.Signer == signer && v1Form(k, cs.Metadata.ID, TrustScope, st.Spec.Revision, a) {
			return i
		}
	}
	return -1
}

// stepHasV1 reports whether cs is an applied governance step with an
// approval in the v1 form by some key (stepInV1Form): what a key can
// approve again, known before the key is read (approvable).
func (s *state) stepHasV1(cs *ChangeSet) bool {
	i := s.appliedStep(cs)
	if i < 0 {
		return false
	}
	for _, a := range s.trust.History[i].Approvals {
		if s.stepInV1Form(cs, a.Signer) >= 0 {
			return true
		}
	}
	return false
}

// resignStep replaces the approval in the v1 form by signer's key of
// governance step i (cs, stepInV1Form) with one over the v2 payload, in
// the change-set and in trust.json's history, recorded as a
// changeset-approved entry: the step, its spec and the trust state it
// makes do not change, and it now counts in this registry only.
func (s *state) resignStep(now time.Time, cs *ChangeSet, i int, signer *sign.PrivateKey) (*ApproveResult, error) {
	reg := s.registryID()
	if reg.IsZero() {
		return nil, refusal.New(refusal.RegistryCorrupt, "the registry has no history to name it in the approval")
	}
	t := cloneTrust(s.trust)
	st := &t.History[i]
	d := signer.Public().Digest()
	name := ""
	for _, a := range st.Approvals {
		if a.Signer == d {
			name = a.Name
		}
	}
	sig, err := signer.Sign(ApprovalPayload(reg, cs.Metadata.ID, TrustScope, st.Spec.Revision, nil))
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	ap := Approval{Signer: d, Name: name, Signature: base64.StdEncoding.EncodeToString(sig), At: now.UTC().Truncate(time.Second)}
	replace := func(aps []Approval) []Approval {
		out := make([]Approval, 0, len(aps))
		for _, a := range aps {
			if a.Signer == d {
				a = ap
			}
			out = append(out, a)
		}
		return out
	}
	st.Approvals = replace(st.Approvals)
	cs.Status.Approvals = replace(cs.Status.Approvals)
	s.trust = t
	s.dirty.trust = true
	s.dirty.changesets[cs.Metadata.ID] = true
	if err := s.record(now, EventChangeSetApproved, name, cs.Metadata.ID, cs.Spec.Revision, "signature by "+d.String()+renewalV1); err != nil {
		return nil, err
	}
	before := trustBefore(t, i)
	res := &ApproveResult{ChangeSet: cloneCS(cs), Threshold: before.Policy.Threshold, Accepted: true, Renewed: true, V1Form: true}
	res.Approvals, _, _ = countApprovals(before, reg, cs.Metadata.ID, TrustScope, st.Spec.Revision, st.Approvals, now)
	return res, nil
}

// renewalV1 ends the detail of the changeset-approved entry of an
// approval that replaced one in the v1 form.
const renewalV1 = " (renewal of an approval in the v1 form)"

// countApprovals counts the distinct trusted approver keys whose
// signature over the payload verifies and has not expired at now. It
// returns the approvals that verify but expired, and the first reason an
// approval did not count, to report.
func countApprovals(t *Trust, reg, id digest.Digest, scope string, rev int64, aps []Approval, now time.Time) (int, []expiredApproval, error) {
	approvers := approverDigests(t)
	seen := map[digest.Digest]bool{}
	var expired []expiredApproval
	var firstErr error
	note := func(err error) {
		// An expiry is the reason reported only when there is no
		// other: the caller knows the count of expired approvals, and an
		// approval that is bad or by an untrusted key is the news.
		if firstErr == nil || refusal.CodeOf(firstErr) == refusal.PinExpired && refusal.CodeOf(err) != refusal.PinExpired {
			firstErr = err
		}
	}
	for _, a := range aps {
		if seen[a.Signer] {
			continue
		}
		k, ok := approvers[a.Signer]
		if !ok {
			isBuilder := false
			for _, x := range t.Keys {
				isBuilder = isBuilder || x.Digest == a.Signer
			}
			if isBuilder {
				note(refusal.New(refusal.SignerUntrusted, "approval by %s is a builder key's: it never counts", a.Signer))
			} else {
				note(refusal.Wrap(refusal.SignerUntrusted, untrustedKey{a.Signer}, "approval by %s: that key is not trusted (now)", a.Signer))
			}
			continue
		}
		// Name the key as the approval does when that name is trusted
		// with this key (one key may be trusted under several names).
		for _, x := range t.Keys {
			if x.Name == a.Name && x.Digest == a.Signer && x.Role == RoleApprover {
				k = x
			}
		}
		pk, err := sign.ParsePublicKey([]byte(k.PEM))
		if err != nil {
			note(err)
			continue
		}
		if pk.Digest() != a.Signer { // parseTrust refuses such a trust.json; a Stub's is built by parseKey
			note(refusal.New(refusal.RegistryCorrupt, "approval by %s: the trusted key of that name is %s, not the key of its digest", k.Name, pk.Digest()))
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(a.Signature)
		if err != nil {
			note(refusal.Wrap(refusal.SignatureInvalid, err, "approval by %s: signature is not base64", k.Name))
			continue
		}
		if a.Expires != nil && a.Expires.Nanosecond() != 0 {
			// The payload carries the expiry to the second: a fraction
			// added to it would verify and extend it unsigned.
			note(refusal.New(refusal.SignatureInvalid, "approval by %s over %s revision %d: its expiry %s has a fraction of a second, which no approval signs (the signature covers the expiry to the second): the file was edited after it was approved; treat it as tampering and restore the registry from a trusted copy (docs/refusals.md, signature_invalid)", k.Name, scope, rev, a.Expires.UTC().Format(time.RFC3339Nano)))
			continue
		}
		if err := pk.Verify(ApprovalPayload(reg, id, scope, rev, a.Expires), sig); err != nil {
			if pk.Verify(approvalPayloadV1(id, scope, rev, a.Expires), sig) == nil {
				note(refusal.New(refusal.SignatureInvalid, "approval by %s over %s revision %d was given in the v1 form, which does not name its registry (an approval from another registry trusting the same key would count): approve the change-set (%s) again with that key, which replaces it", k.Name, scope, rev, id).WithRemedy(refusal.ActionRenewApproval, id.String()))
				continue
			}
			note(refusal.Wrap(refusal.SignatureInvalid, err, "approval by %s over %s revision %d in registry %s", k.Name, scope, rev, reg))
			continue
		}
		if a.Expires != nil && !now.Before(*a.Expires) {
			expired = append(expired, expiredApproval{k.Name, a.Expires.UTC()})
			note(refusal.New(refusal.PinExpired, "approval by %s expired at %s", k.Name, a.Expires.UTC().Format(time.RFC3339)))
			continue
		}
		seen[a.Signer] = true
	}
	return len(seen), expired, firstErr
}

// expiredApproval is an approval that verifies and would count but for
// its expiry: by whom (the name the pin shows) and when it expired.
type expiredApproval struct {
	name string
	at   time.Time
}

// describeExpired says which approvals expired, and when: "approval by a
// expired at T", or, of several, "approvals by a (expired at T1) and b
// (expired at T2)". pin_expired named the first alone, and an operator
// renewing it was refused again for the next.
func describeExpired(ex []expiredApproval) string {
	if len(ex) == 1 {
		return fmt.Sprintf("approval by %s expired at %s", ex[0].name, ex[0].at.Format(time.RFC3339))
	}
	parts := make([]string, len(ex))
	for i, e := range ex {
		parts[i] = fmt.Sprintf("%s (expired at %s)", e.name, e.at.Format(time.RFC3339))
	}
	return "approvals by " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// untrustedKey is the cause of countApprovals' refusal of an approval by
// a key the trust state does not hold (its text is empty: the refusal's
// detail says it), for VerifyPin to name the key as the history does.
type untrustedKey struct{ signer digest.Digest }

func (untrustedKey) Error() string { return "" }

func (s *state) accept(now time.Time, cs *ChangeSet) error {
	cs.Status.State = StateApproved
	c := cs.Spec.Changes[0]
	switch c.Action {
	case ActionTrustKey, ActionUntrustKey, ActionSetPolicy:
		n, err := applyTrust(s.trust, &c)
		if err != nil {
			return err
		}
		n.History = append(append([]Step(nil), s.trust.History...), Step{SpecDigest: cs.Metadata.ID, Spec: cs.Spec, Approvals: cs.Status.Approvals})
		s.trust = n
		s.dirty.trust = true
		ev, subj, d := EventPolicyChanged, "threshold", digest.Digest{}
		detail := ""
		switch c.Action {
		case ActionTrustKey:
			k, _ := parseKey(*c.Key)
			ev, subj, d, detail = EventKeyTrusted, k.Name, k.Digest, k.Role
		case ActionUntrustKey:
			ev, subj, d = EventKeyUntrusted, c.Key.Name, c.Key.Digest
		default:
			detail = fmt.Sprintf("threshold %d", c.Policy.Threshold)
		}
		return s.record(now, ev, subj, d, n.Revision, detail)
	}
	p := &Pin{
		Format: PinFormat, Provider: c.Provider.Name, Revision: cs.Spec.Revision,
		SpecDigest: cs.Metadata.ID, Spec: cs.Spec, Approvals: cs.Status.Approvals,
		AcceptedAt: now.UTC().Truncate(time.Second), Retired: c.Action == ActionRetire,
	}
	s.pins[p.Provider] = p
	s.dirty.pins[p.Provider] = true
	ev := EventPinAccepted
	if p.Retired {
		ev = EventPinRetired
	}
	return s.record(now, ev, p.Provider, p.SpecDigest, p.Revision, "")
}

// notProposed refuses to approve or reject (verb) cs, which is no longer
// proposed, saying what to do instead: it said only "change-set … is
// approved, not proposed", and an operator who had followed
// pin_unapproved's advice to the list tried to add a second key's
// approval to the pin's own change-set after the threshold was raised.
//
// held is whether what cs changes is in force now (inForce): a provider's
// change-set is the pin the registry holds, a trust change is what the
// trust state says. cur is the pin the registry holds for cs's provider
// (nil for none, or a trust change): a provider's change-set approved
// and superseded since by a later one (cur) is proposed again only to go
// back to it, so it is not advised; the install it advised, built from
// that change-set, would have proposed regressing the accepted pin (its
// images dropped, its package downgraded).
func notProposed(cs *ChangeSet, verb string, held bool, cur *Pin) *refusal.Error {
	id, scope := cs.Metadata.ID, cs.Scope()
	next := ""
	var remedy *refusal.Remedy
	switch {
	case verb == "rejected" && cs.Status.State == StateRejected:
		next = fmt.Sprintf("it was rejected already (%q)", cs.Status.Reason)
	case verb == "rejected" && scope != TrustScope:
		next = fmt.Sprintf("only a proposed change-set is rejected; an accepted provider is withdrawn by retiring it (%s)", scope)
		remedy = &refusal.Remedy{Action: refusal.ActionRetire, Target: scope}
	case verb == "rejected":
		next = "only a proposed change-set is rejected; an applied trust change is undone by another (untrusting or trusting a key, or setting the threshold)"
	case scope != TrustScope && cs.Spec.Changes[0].Action == ActionRetire:
		// A retirement is proposed again by retiring, not by an install:
		// its spec names no package, and the advice was "install WHEEL".
		if held {
			next = fmt.Sprintf("it retired %s at revision %d, as the registry holds now: there is nothing more to approve", scope, cs.Spec.Revision)
			break
		}
		var again string
		again, remedy = proposeAgain(&cs.Spec, scope)
		next = "to retire " + scope + ", propose it again (" + again + ") and approve the new change-set"
	case scope != TrustScope && cs.Status.State == StateApproved && cur != nil && cur.SpecDigest != id:
		now := fmt.Sprintf("it was superseded: %s is at revision %d now (change-set %s), which the registry holds", scope, cur.Revision, cur.SpecDigest)
		if cur.Retired {
			now = fmt.Sprintf("it was superseded: %s was retired at revision %d (change-set %s), as the registry holds now", scope, cur.Revision, cur.SpecDigest)
		}
		next = now + "; there is nothing to approve in this one (to go back to what it proposed, propose that again and approve the new change-set)"
	case scope != TrustScope:
		// The refusal's remedy renders the install to run.
		return withSpecChoices(refusal.New(refusal.ChangesetInvalid, "change-set %s is %s, not proposed: only a proposed change-set is %s (the change-sets proposed are listed); to have %s approved anew, propose it again (install it) and approve the new change-set", id, cs.Status.State, verb, scope).WithRemedy(refusal.ActionPropose, proposeTarget(&cs.Spec, scope)).WithImages(specImages(&cs.Spec)).WithProposePlatforms(specPlatforms(&cs.Spec)).WithProposeNoBytecode(specNoBytecode(&cs.Spec)), &cs.Spec)
	case held:
		// Proposing it again would change nothing (`key trust` says
		// "trusted already", `policy set` "threshold K already"): that
		// was the advice, and it went round.
		next = "its trust change applies now (" + trustChangeWords(&cs.Spec.Changes[0]) + "): there is nothing more to approve"
		if cs.Spec.Changes[0].Action != ActionSetPolicy {
			remedy = &refusal.Remedy{Action: refusal.ActionListKeys}
		}
	default:
		var again string
		again, remedy = proposeAgain(&cs.Spec, scope)
		next = "to make this trust change, propose it again (" + again + ") and approve the new change-set"
	}
	r := refusal.New(refusal.ChangesetInvalid, "change-set %s is %s, not proposed: %s", id, cs.Status.State, next)
	r.Remedy = remedy
	return r
}

// noTrust is the refusal of a trust change in a registry that trusts no
// key yet.
func noTrust() *refusal.Error {
	return refusal.New(refusal.SignerUntrusted, "the registry trusts no key yet: trust its root key first (the first key trusted is the root of trust, an approver)").WithRemedy(refusal.ActionTrustKey, RoleApprover)
}

// proposeAgain says, in words, how spec's change is proposed again, for
// a stale change-set's refusal (or an approval of a trust change no
// longer proposed), and the remedy that does it: the registry cannot
// name a wheel's or a public key's file, so the remedy's command leaves
// those to the operator.
func proposeAgain(spec *Spec, scope string) (string, *refusal.Remedy) {
	c := spec.Changes[0]
	switch c.Action {
	case ActionTrustKey:
		if c.Key != nil {
			return fmt.Sprintf("trust the key again, as %s with the role %s", c.Key.Name, c.Key.Role), &refusal.Remedy{Action: refusal.ActionTrustKey, Target: c.Key.Role, Name: c.Key.Name}
		}
	case ActionUntrustKey:
		if c.Key != nil {
			return "untrust " + c.Key.Name + " again", &refusal.Remedy{Action: refusal.ActionUntrustKey, Target: c.Key.Name}
		}
	case ActionSetPolicy:
		if c.Policy != nil {
			return fmt.Sprintf("set the threshold to %d again", c.Policy.Threshold), &refusal.Remedy{Action: refusal.ActionSetThreshold, Target: strconv.Itoa(c.Policy.Threshold)}
		}
	case ActionRetire:
		if c.Provider != nil {
			return "retire " + c.Provider.Name + " again", &refusal.Remedy{Action: refusal.ActionRetire, Target: c.Provider.Name}
		}
	case ActionRegister, ActionUpdate:
		r := &refusal.Remedy{Action: refusal.ActionPropose, Target: proposeTarget(spec, scope)}
		if images := specImages(spec); len(images) > 0 {
			r.Images = images
		}
		r.Platforms, r.Python = specPlatforms(spec)
		r.NoBytecode = specNoBytecode(spec)
		return "install it again, as it was proposed", r
	}
	return "as it was proposed", nil
}

// proposeTarget is ActionPropose's target for provider's spec: its
// package, NAME==VERSION@sha256:HEX (rendered as the install that
// proposes it again), or the provider's name where the spec names none.
func proposeTarget(spec *Spec, provider string) string {
	if len(spec.Changes) != 1 {
		return provider
	}
	return spec.Changes[0].Provider.ProposeTarget(provider)
}

// specImages are the images (REF@sha256:…) a provider's spec pins: an
// install that proposes it again must name them (ActionPropose's
// Remedy.Images), or its change-set drops them.
func specImages(spec *Spec) []string {
	if len(spec.Changes) != 1 || spec.Changes[0].Provider == nil {
		return nil
	}
	return spec.Changes[0].Provider.Images()
}

// specPlatforms are the platforms and interpreter a provider's spec pins
// (Provider.ProposePlatforms).
func specPlatforms(spec *Spec) ([]string, string) {
	if len(spec.Changes) != 1 || spec.Changes[0].Provider == nil {
		return nil, ""
	}
	return spec.Changes[0].Provider.ProposePlatforms()
}

// withSpecChoices is Provider.WithProposeChoices of a provider's spec:
// a proposal of it again, where its envs point at several interpreters,
// with each.
func withSpecChoices(e *refusal.Error, spec *Spec) *refusal.Error {
	if len(spec.Changes) != 1 || spec.Changes[0].Provider == nil {
		return e
	}
	return spec.Changes[0].Provider.WithProposeChoices(e, nil, "")
}

// specNoBytecode reports whether a provider's spec pins envs made
// without bytecode only (Provider.ProposeNoBytecode).
func specNoBytecode(spec *Spec) bool {
	if len(spec.Changes) != 1 || spec.Changes[0].Provider == nil {
		return false
	}
	return spec.Changes[0].Provider.ProposeNoBytecode()
}

func (s *state) reject(now time.Time, id digest.Digest, reason, by string) (*ChangeSet, error) {
	cs, err := s.changeset(id)
	if err != nil {
		return nil, err
	}
	if cs.Status.State == StateRejected && cs.Status.Reason == reason {
		// The same reject again (its first run killed or failed once
		// the change was recorded): done already, nothing to write.
		return cloneCS(cs), nil
	}
	if cs.Status.State != StateProposed {
		return nil, notProposed(cs, "rejected", false, s.pins[cs.Scope()])
	}
	if strings.TrimSpace(reason) == "" {
		return nil, refusal.New(refusal.ChangesetInvalid, "a rejection needs a reason")
	}
	cs.Status.State = StateRejected
	cs.Status.Reason = reason
	s.dirty.changesets[id] = true
	return cloneCS(cs), s.record(now, EventChangeSetRejected, by, id, cs.Spec.Revision, reason)
}

func orNone(d digest.Digest) string {
	if d.IsZero() {
		return "nothing"
	}
	return d.String()
}
