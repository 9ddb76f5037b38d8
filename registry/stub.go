package registry

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/sign"
)

// Stub is a Registry in memory, with no disk: what a provider's own
// conformance suite binds against. It applies the same governance rules
// and keeps the same hash-chained history as Dir. Safe for concurrent use.
type Stub struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu sync.Mutex
	s  *state
}

// NewStub returns an empty Stub.
func NewStub() *Stub { return &Stub{s: newState()} }

func (r *Stub) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Stub) do(ctx context.Context, f func(s *state) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.s == nil {
		r.s = newState()
	}
	r.s.begin()
	// A failed mutation leaves the state as it was: work on a copy.
	c := r.s.copy()
	if err := f(c); err != nil {
		return err
	}
	r.s = c
	return nil
}

func (r *Stub) read(ctx context.Context, f func(s *state) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.s == nil {
		r.s = newState()
	}
	return f(r.s)
}

// Interfaces implements Reader.
func (r *Stub) Interfaces(ctx context.Context) (out []Interface, err error) {
	err = r.read(ctx, func(s *state) error { out = s.interfaces(); return nil })
	return out, err
}

// ChangeSets implements Reader.
func (r *Stub) ChangeSets(ctx context.Context) (out []*ChangeSet, err error) {
	err = r.read(ctx, func(s *state) error { out = s.changesetList(); return nil })
	return out, err
}

// ChangeSet implements Reader.
func (r *Stub) ChangeSet(ctx context.Context, id digest.Digest) (out *ChangeSet, err error) {
	err = r.read(ctx, func(s *state) error {
		cs, err := s.changeset(id)
		if err == nil {
			out = cloneCS(cs)
		}
		return err
	})
	return out, err
}

// Pins implements Reader.
func (r *Stub) Pins(ctx context.Context) (out []*Pin, err error) {
	err = r.read(ctx, func(s *state) error { out = s.pinList(); return nil })
	return out, err
}

// Pin implements Reader.
func (r *Stub) Pin(ctx context.Context, provider string) (out *Pin, err error) {
	if err := checkProviderName(provider); err != nil {
		return nil, err
	}
	err = r.read(ctx, func(s *state) error {
		p := s.pins[provider]
		if p == nil {
			return neverAccepted(provider, entries(s.log))
		}
		out = clonePin(p)
		return nil
	})
	return out, err
}

// Trust implements Reader.
func (r *Stub) Trust(ctx context.Context) (out *Trust, err error) {
	err = r.read(ctx, func(s *state) error { out = cloneTrust(s.trust); return nil })
	return out, err
}

// Log implements Reader.
func (r *Stub) Log(ctx context.Context) (out []Entry, err error) {
	err = r.read(ctx, func(s *state) error { out = entries(s.log); return nil })
	return out, err
}

// Chain implements Reader.
func (r *Stub) Chain(ctx context.Context) (out []digest.Digest, err error) {
	err = r.read(ctx, func(s *state) error { out = hashesOf(s.log); return nil })
	return out, err
}

// PinHistory implements Reader.
func (r *Stub) PinHistory(ctx context.Context, provider string) (out *PinRecord, err error) {
	err = r.read(ctx, func(s *state) (err error) {
		out, err = s.pinRecord(provider)
		return err
	})
	return out, err
}

// RegisterInterface implements Writer.
func (r *Stub) RegisterInterface(ctx context.Context, id string, schema []byte) (out *InterfaceResult, err error) {
	err = r.do(ctx, func(s *state) (err error) { out, err = s.registerInterface(r.now(), id, schema); return })
	return out, err
}

// TrustKey implements Writer.
func (r *Stub) TrustKey(ctx context.Context, k Key, by string) (out *TrustResult, err error) {
	err = r.do(ctx, func(s *state) (err error) { out, err = s.trustKey(r.now(), k, by); return })
	return out, err
}

// Propose implements Writer.
func (r *Stub) Propose(ctx context.Context, c Change, by string) (out *ChangeSet, already bool, err error) {
	err = r.do(ctx, func(s *state) (err error) { out, already, err = s.propose(r.now(), c, by); return })
	return out, already, err
}

// Approve implements Writer.
func (r *Stub) Approve(ctx context.Context, id digest.Digest, signer *sign.PrivateKey, expires *time.Time) (out *ApproveResult, err error) {
	err = r.do(ctx, func(s *state) (err error) { out, err = s.approve(r.now(), id, signer, expires); return })
	return out, err
}

// Approvable is Dir.Approvable: what Approve of change-set id would
// refuse whatever key signed it.
func (r *Stub) Approvable(ctx context.Context, id digest.Digest) error {
	return r.read(ctx, func(s *state) error { _, err := s.approvable(id); return err })
}

// ApprovedAlready is Dir.ApprovedAlready: Approve's result, without a
// signature, for a key (its digest) whose approval of change-set id
// stands already; nil where Approve would sign; Approve's refusal of this
// key where it would refuse it.
func (r *Stub) ApprovedAlready(ctx context.Context, id, signer digest.Digest) (out *ApproveResult, err error) {
	err = r.read(ctx, func(s *state) error {
		cs, err := s.approvable(id)
		if err != nil {
			return err
		}
		out, err = s.beforeSigning(r.now(), cs, signer)
		return err
	})
	return out, err
}

// Reject implements Writer.
func (r *Stub) Reject(ctx context.Context, id digest.Digest, reason, by string) (out *ChangeSet, err error) {
	err = r.do(ctx, func(s *state) (err error) { out, err = s.reject(r.now(), id, reason, by); return })
	return out, err
}

// copy returns a deep copy of the state (the log records are immutable
// and shared).
func (s *state) copy() *state {
	n := newState()
	for k, v := range s.ifaces {
		n.ifaces[k] = v
	}
	n.trust = cloneTrust(s.trust)
	for k, v := range s.changesets {
		n.changesets[k] = cloneCS(v)
	}
	n.order = append([]digest.Digest(nil), s.order...)
	for k, v := range s.pins {
		n.pins[k] = clonePin(v)
	}
	n.log = append([]logRec(nil), s.log...)
	n.dirty = s.dirty
	return n
}

func (s *state) interfaces() []Interface {
	out := make([]Interface, 0, len(s.ifaces))
	for _, v := range s.ifaces {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *state) changesetList() []*ChangeSet {
	out := make([]*ChangeSet, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, cloneCS(s.changesets[id]))
	}
	return out
}

// pinRecord is PinHistory's answer from the state's history.
func (s *state) pinRecord(provider string) (*PinRecord, error) {
	raws := make([][]byte, len(s.log))
	for i, rec := range s.log {
		raws[i] = rec.raw
	}
	return pinRecord(hashesOf(s.log), raws, provider)
}

func (s *state) pinList() []*Pin {
	out := make([]*Pin, 0, len(s.pins))
	for _, p := range s.pins {
		out = append(out, clonePin(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	return out
}
