package registry

import (
	"context"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/sign"
)

// Reader is what verifiers, gc and the CLI read. Every method returns a
// copy the caller may keep.
type Reader interface {
	// Interfaces lists the registered interfaces, sorted by id.
	Interfaces(ctx context.Context) ([]Interface, error)
	// ChangeSets lists every change-set, oldest first.
	ChangeSets(ctx context.Context) ([]*ChangeSet, error)
	// ChangeSet returns one change-set (changeset_invalid when unknown).
	ChangeSet(ctx context.Context, id digest.Digest) (*ChangeSet, error)
	// Pins lists the accepted pins (retired ones too), sorted by provider.
	Pins(ctx context.Context) ([]*Pin, error)
	// Pin returns a provider's accepted pin (pin_unapproved when none).
	// It is read without YAML: verify calls it before every run.
	Pin(ctx context.Context, provider string) (*Pin, error)
	// Trust returns the trust state, or nil before the root of trust.
	Trust(ctx context.Context) (*Trust, error)
	// Log returns the history, its chain checked (registry_corrupt).
	Log(ctx context.Context) ([]Entry, error)
	// Chain returns the hash of every history entry in order, the chain
	// checked (registry_corrupt), without decoding the entries.
	Chain(ctx context.Context) ([]digest.Digest, error)
	// PinHistory returns what Chain returns, the last pin-accepted or
	// pin-retired entry of provider (nil when the history has none) and
	// the changeset-approved entries of that entry's change-set since it
	// was last proposed, decoding those entries alone: the pin a
	// verifier reads must be the one the history accepted last, with
	// the approvals and the time the history recorded, or it was put
	// back, edited, or written outside an approval.
	PinHistory(ctx context.Context, provider string) (*PinRecord, error)
}

// PinRecord is what the history records of a provider's accepted pin
// (Reader.PinHistory).
type PinRecord struct {
	// Chain is the hash of every history entry, in order.
	Chain []digest.Digest
	// Last is the provider's last pin-accepted or pin-retired entry, nil
	// when the history has none.
	Last *Entry
	// Approved are the changeset-approved entries of Last's change-set
	// since it was last proposed, in order (nil when Last is nil).
	Approved []Entry
	// Governance are the history's key-trusted, key-untrusted and
	// policy-changed entries, in order (the root of trust the first):
	// what the trust state replays against, without decoding the rest.
	Governance []Entry
}

// Writer changes the registry. Each mutation is appended to the history.
type Writer interface {
	// RegisterInterface records id → the digest of the canonical schema.
	// Registering the same schema again changes nothing and says so
	// (InterfaceResult.Already, decided under the registry's lock, so of
	// two registrations of one schema at once exactly one is not
	// Already); another schema under a registered id is refused
	// (interface_digest_mismatch).
	RegisterInterface(ctx context.Context, id string, schema []byte) (*InterfaceResult, error)
	// TrustKey trusts k (Name, Role, PEM) at once while the registry
	// trusts no key (the root of trust; it must be an approver) and
	// otherwise proposes a trust-key change-set; k trusted already
	// under its name and role changes nothing (TrustResult.Already).
	TrustKey(ctx context.Context, k Key, by string) (*TrustResult, error)
	// Propose records a change-set for one change, filling in its base
	// and revision from the current accepted pin (or trust state), and
	// returns it. already reports that this very change-set (the same
	// change on the same base) was proposed already and is still open:
	// nothing was recorded (the same install run again). It is decided
	// under the registry's lock, with the proposal. A register or update
	// change that names no protocol range is changeset_invalid, though
	// one stored already without it still reads.
	Propose(ctx context.Context, c Change, by string) (cs *ChangeSet, already bool, err error)
	// Approve signs the change-set's approval payload with signer, which
	// must be a trusted approver key; once the policy's threshold of
	// distinct approver keys have signed, the change is accepted (the pin
	// written with its revision, or the trust change applied). expires,
	// when not nil, ends the approval's validity.
	Approve(ctx context.Context, id digest.Digest, signer *sign.PrivateKey, expires *time.Time) (*ApproveResult, error)
	// Reject closes a proposed change-set with a reason.
	Reject(ctx context.Context, id digest.Digest, reason, by string) (*ChangeSet, error)
}

// Registry is a governance registry: Stub (in memory) and Dir (on disk)
// implement it; registrytest.Run checks an implementation.
type Registry interface {
	Reader
	Writer
}

// TrustResult says what TrustKey did.
type TrustResult struct {
	// Root is true when the key became the root of trust (with Already:
	// when it is the root of trust).
	Root bool `json:"root"`
	// Key is the key as trusted (or proposed), with its digest.
	Key Key `json:"key"`
	// ChangeSet is the proposed trust-key change-set (nil for the root,
	// and with Already).
	ChangeSet *ChangeSet `json:"changeSet,omitempty"`
	// Already is true when the registry trusts this very key (digest)
	// under this name with this role already: nothing changed and
	// nothing was proposed (the same key trust run again after it was
	// killed or failed once the change was recorded). The same key
	// under another name, or another key or role under this name, is
	// not the same request: it is proposed, or refused, as a new one.
	Already bool `json:"already,omitempty"`
	// Proposed is true when ChangeSet was open already, proposed by the
	// same request before: nothing was recorded (Propose's already).
	Proposed bool `json:"proposedAlready,omitempty"`
}

// InterfaceResult says what RegisterInterface did.
type InterfaceResult struct {
	// Interface is the registration: the one just recorded, or with
	// Already the one recorded before (its RegisteredAt).
	Interface
	// Already is true when id was registered with this schema (its
	// canonical form) already: nothing was recorded. It is decided under
	// the registry's lock, with the registration, so that a caller
	// reading the registry first cannot tell two registrations at once
	// that each made it.
	Already bool `json:"already"`
}

// ApproveResult says what an approval did.
type ApproveResult struct {
	ChangeSet *ChangeSet `json:"changeSet"`
	// Approvals is the count of valid approvals, Threshold the policy's.
	Approvals int `json:"approvals"`
	Threshold int `json:"threshold"`
	// Accepted is true when the valid, unexpired approvals reach the
	// threshold (this approval accepted the change-set, or it is the
	// accepted pin and still counts as such); Pin is then the accepted
	// pin (nil for a governance change).
	Accepted bool `json:"accepted"`
	Pin      *Pin `json:"pin,omitempty"`
	// Replaced is true when this key had approved the change-set
	// already: its new approval replaced the earlier one (one key
	// counts once).
	Replaced bool `json:"replaced"`
	// Already is true when the change-set was accepted already, with
	// this key's approval, and is what the registry holds now: the
	// approval changed nothing (the same approve run again after it
	// was killed or failed once the change was recorded).
	Already bool `json:"already,omitempty"`
	// Renewed is true when this approval renewed the key's expired
	// approval of the accepted pin (the change-set accepted already):
	// the pin carries the new approval, with its new expiry, and
	// Accepted says whether the unexpired approvals reach the threshold.
	Renewed bool `json:"renewed,omitempty"`
	// V1Form is true, with Renewed, when the approval it renewed was in
	// the v1 form, which did not name the registry and never counts
	// (given by a cruxprov before the v2 payload): the new one counts.
	V1Form bool `json:"v1Form,omitempty"`
}
