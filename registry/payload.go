package registry

import (
	"time"

	"github.com/cruxible/cruxprov/canonical"
	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// ApprovalPayload returns the bytes an approver signs: the RFC 8785
// canonical JSON of
//
//	{"type":"cruxible.approval/v2","registry":REGISTRY_ID,
//	 "spec":SPEC_DIGEST,"provider":NAME,"revision":N,"expires":RFC3339|null}
//
// where REGISTRY_ID is the registry's id (the hash of its first history
// entry, as `registry log` prints it), SPEC_DIGEST the change-set's id
// ("sha256:<hex>"), NAME the provider (TrustScope for a governance
// change), N the revision the change is accepted at, and expires the
// approval's expiry in UTC, RFC 3339 with seconds
// ("2026-01-02T15:04:05Z"), or null. Neither the revision nor the expiry
// can be edited under a valid signature, and an approval given in one
// registry does not count in another: a key trusted by two registries
// (staging and production) signs pins that each verifies as its own only.
func ApprovalPayload(registry, spec digest.Digest, provider string, revision int64, expires *time.Time) []byte {
	return approvalPayload("cruxible.approval/v2", registry, spec, provider, revision, expires)
}

// approvalPayloadV1 is the payload before it named the registry (v1):
// an approval that verifies over it is refused, saying so.
func approvalPayloadV1(spec digest.Digest, provider string, revision int64, expires *time.Time) []byte {
	return approvalPayload("cruxible.approval/v1", digest.Digest{}, spec, provider, revision, expires)
}

func approvalPayload(typ string, registry, spec digest.Digest, provider string, revision int64, expires *time.Time) []byte {
	var exp any
	if expires != nil {
		exp = expires.UTC().Format(time.RFC3339)
	}
	m := map[string]any{
		"type":     typ,
		"spec":     spec.String(),
		"provider": provider,
		"revision": revision,
		"expires":  exp,
	}
	if !registry.IsZero() {
		m["registry"] = registry.String()
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		// Only strings, an integer and null: cannot fail.
		return nil
	}
	return b
}

// SpecDigest is the sha256 of the RFC 8785 canonical JSON of spec (the
// change-set's id). The JSON is the spec's field names as documented in
// docs/governance.md, empty optional fields left out.
func SpecDigest(s *Spec) (digest.Digest, error) {
	b, err := canonical.Marshal(s)
	if err != nil {
		return digest.Digest{}, refusal.Wrap(refusal.ChangesetInvalid, err, "spec has no canonical JSON")
	}
	return digest.Sum(b), nil
}

// StateDigest is the trust-state digest: the base of a governance
// change-set proposed against t (docs/governance.md).
func (t *Trust) StateDigest() digest.Digest { return trustStateDigest(t) }

// trustStateDigest is the base of a governance change-set: the sha256 of
// the canonical JSON of {"type":"cruxible.trust-state/v1","revision":R,
// "threshold":T,"keys":[{"name","role","digest"}…]} (keys in stored
// order, which is sorted by name).
func trustStateDigest(t *Trust) digest.Digest {
	type k struct {
		Name   string        `json:"name"`
		Role   string        `json:"role"`
		Digest digest.Digest `json:"digest"`
	}
	ks := make([]k, 0, len(t.Keys))
	for _, x := range t.Keys {
		ks = append(ks, k{x.Name, x.Role, x.Digest})
	}
	b, err := canonical.Marshal(map[string]any{
		"type":      "cruxible.trust-state/v1",
		"revision":  t.Revision,
		"threshold": t.Policy.Threshold,
		"keys":      ks,
	})
	if err != nil {
		return digest.Digest{}
	}
	return digest.Sum(b)
}
