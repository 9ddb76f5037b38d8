package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cruxible/cruxprov/internal/strictjson"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// maxDoc bounds a change-set or pin document.
const maxDoc = 16 << 20

// validateChangeShape checks what a change must hold, whatever the state.
func validateChangeShape(c *Change) error {
	bad := func(f string, a ...any) error { return refusal.New(refusal.ChangesetInvalid, f, a...) }
	switch c.Action {
	case ActionRegister, ActionUpdate, ActionRetire:
		if c.Key != nil || c.Policy != nil {
			return bad("a %s change carries a provider only", c.Action)
		}
		p := c.Provider
		if p == nil || !validName(p.Name) {
			return bad("a %s change needs a provider with a normalized name", c.Action)
		}
		if c.Action == ActionRetire {
			return nil
		}
		if p.Package == nil || p.Package.Name == "" || p.Package.Version == "" || p.Package.Filename == "" || p.Package.SHA256.IsZero() {
			return bad("provider %s: package needs name, version, filename and sha256", p.Name)
		}
		if len(p.Protocol) != 0 && (len(p.Protocol) != 2 || p.Protocol[0] < 1 || p.Protocol[0] > p.Protocol[1]) {
			return bad("provider %s: protocol must be [min, max] with 1 <= min <= max", p.Name)
		}
		if len(p.Entrypoints) == 0 {
			return bad("provider %s has no entrypoints", p.Name)
		}
		seen := map[string]bool{}
		for _, e := range p.Entrypoints {
			if e.Name == "" || e.Object == "" || e.Interface.ID == "" || e.Interface.Digest.IsZero() || e.ImplementationDigest.IsZero() || seen[e.Name] {
				return bad("provider %s: entrypoint %q needs a unique name, object, interface id and digest, implementation digest", p.Name, e.Name)
			}
			seen[e.Name] = true
		}
		if len(p.Materializations) == 0 {
			return bad("provider %s has no materializations", p.Name)
		}
		for _, m := range p.Materializations {
			switch {
			case m.Platform == "" || m.Digest.IsZero():
				return bad("provider %s: a materialization needs a platform and a digest", p.Name)
			case m.Backend == BackendLocal:
			case m.Backend == BackendContainer && m.Image != "":
			case m.Backend == BackendResolution && m.Resolution == m.Digest:
			default:
				return bad("provider %s: materialization backend %q (want local, container with an image, or resolution)", p.Name, m.Backend)
			}
		}
		for k, v := range p.Budgets {
			if k == "" || v < 0 {
				return bad("provider %s: budget %q = %d", p.Name, k, v)
			}
		}
	case ActionTrustKey, ActionUntrustKey:
		if c.Key == nil || c.Provider != nil || c.Policy != nil {
			return bad("a %s change carries a key only", c.Action)
		}
	case ActionSetPolicy:
		if c.Policy == nil || c.Provider != nil || c.Key != nil || c.Policy.Threshold < 1 || c.Policy.Threshold > 100 {
			return bad("a set-policy change carries a policy with a threshold from 1 to 100")
		}
	default:
		return bad("unknown action %q (want register, update, retire, trust-key, untrust-key or set-policy)", c.Action)
	}
	return nil
}

// validateChangeSet checks a whole document: version, one change, id.
func validateChangeSet(cs *ChangeSet) error {
	if cs.APIVersion != APIVersion || cs.Kind != KindChangeSet {
		return refusal.New(refusal.ChangesetInvalid, "apiVersion %q kind %q: want %s %s", cs.APIVersion, cs.Kind, APIVersion, KindChangeSet)
	}
	if len(cs.Spec.Changes) != 1 {
		return refusal.New(refusal.ChangesetInvalid, "a change-set holds exactly one change, not %d", len(cs.Spec.Changes))
	}
	if err := validateChangeShape(&cs.Spec.Changes[0]); err != nil {
		return err
	}
	if cs.Spec.Revision < 1 {
		return refusal.New(refusal.ChangesetInvalid, "revision %d: want >= 1", cs.Spec.Revision)
	}
	id, err := SpecDigest(&cs.Spec)
	if err != nil {
		return err
	}
	if id != cs.Metadata.ID {
		return refusal.New(refusal.ChangesetInvalid, "id %s is not the digest of the spec (%s)", cs.Metadata.ID, id)
	}
	switch cs.Status.State {
	case StateProposed, StateApproved, StateRejected:
	default:
		return refusal.New(refusal.ChangesetInvalid, "state %q", cs.Status.State)
	}
	return nil
}

// ParseChangeSet decodes and validates a change-set YAML document:
// unknown fields, another apiVersion or kind, more than one change, or an
// id that is not the digest of the spec are refused (changeset_invalid).
func ParseChangeSet(b []byte) (*ChangeSet, error) {
	if len(b) > maxDoc {
		return nil, refusal.New(refusal.ChangesetInvalid, "document larger than %d bytes", maxDoc)
	}
	// YAML → generic value → JSON → the typed struct, strictly: one
	// decoder for both forms, with JSON's null for a zero digest.
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, refusal.Wrap(refusal.ChangesetInvalid, err, "change-set YAML")
	}
	var extra any
	if err := dec.Decode(&extra); err == nil {
		return nil, refusal.New(refusal.ChangesetInvalid, "more than one YAML document")
	}
	jb, err := json.Marshal(doc)
	if err != nil {
		return nil, refusal.Wrap(refusal.ChangesetInvalid, err, "change-set YAML has no JSON form")
	}
	var cs ChangeSet
	if err := strictJSON(jb, &cs); err != nil {
		return nil, refusal.Wrap(refusal.ChangesetInvalid, err, "change-set")
	}
	if cs.Status.Approvals == nil {
		cs.Status.Approvals = []Approval{}
	}
	if err := validateChangeSet(&cs); err != nil {
		return nil, err
	}
	return &cs, nil
}

// MarshalChangeSet encodes a change-set as YAML (two-space indent): its
// JSON form's fields (sorted by name), a zero digest as null.
func MarshalChangeSet(cs *ChangeSet) ([]byte, error) {
	jb, err := json.Marshal(cs)
	if err != nil {
		return nil, err
	}
	jd := json.NewDecoder(bytes.NewReader(jb))
	jd.UseNumber()
	var doc any
	if err := jd.Decode(&doc); err != nil {
		return nil, err
	}
	doc = yamlNumbers(doc)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// majorOK reports whether format is want or a minor version of it
// ("cruxible.pin/v1.2"): another major is refused.
func majorOK(format, want string) bool {
	return format == want || strings.HasPrefix(format, want+".")
}

// ParsePin decodes an accepted pin (JSON). A pin of another format major,
// unknown fields or trailing data is refused with registry_corrupt; its
// signatures are checked by VerifyPin, not here.
func ParsePin(b []byte) (*Pin, error) {
	var p Pin
	if err := strictJSON(b, &p); err != nil {
		return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "accepted pin")
	}
	if !majorOK(p.Format, PinFormat) {
		return nil, refusal.New(refusal.RegistryCorrupt, "accepted pin format %q: this cruxprov reads %s", p.Format, PinFormat)
	}
	if !validName(p.Provider) || p.Revision < 1 {
		return nil, refusal.New(refusal.RegistryCorrupt, "accepted pin names provider %q revision %d", p.Provider, p.Revision)
	}
	return &p, nil
}

// parseTrust decodes trust.json.
func parseTrust(b []byte) (*Trust, error) {
	var t Trust
	if err := strictJSON(b, &t); err != nil {
		return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "trust.json")
	}
	if !majorOK(t.Format, TrustFormat) {
		return nil, refusal.New(refusal.RegistryCorrupt, "trust.json format %q: this cruxprov reads %s", t.Format, TrustFormat)
	}
	// A key's digest is what the trust state, the history's steps and
	// every approval name; its PEM is what a signature is checked with.
	// Each PEM must be the key of its digest: the trust state's digest
	// (and so the replay of the history) does not cover the PEM, and a
	// PEM swapped for another key under a trusted key's digest would
	// make that other key's signatures count as the trusted key's.
	for i, k := range append([]Key{t.Root}, t.Keys...) {
		if i == 0 && k.PEM == "" && k.Digest.IsZero() {
			continue // no root yet
		}
		pk, err := sign.ParsePublicKey([]byte(k.PEM))
		if err != nil {
			return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "trust.json: key %q", k.Name)
		}
		if pk.Digest() != k.Digest {
			return nil, refusal.New(refusal.RegistryCorrupt, "trust.json: key %q is recorded as %s but its public key is %s: the trust file was altered (or damaged); restore the registry from a trusted copy", k.Name, k.Digest, pk.Digest())
		}
	}
	return &t, nil
}

// strictJSON decodes one registry document: no unknown member, no key
// twice, nothing after it, at most maxDoc bytes.
func strictJSON(b []byte, v any) error {
	if len(b) > maxDoc {
		return fmt.Errorf("larger than %d bytes", maxDoc)
	}
	return strictjson.Decode(b, v, false)
}

func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return buf.Bytes(), err
}

func cloneCS(c *ChangeSet) *ChangeSet {
	b, _ := json.Marshal(c)
	var n ChangeSet
	_ = json.Unmarshal(b, &n)
	return &n
}

func clonePin(p *Pin) *Pin {
	b, _ := json.Marshal(p)
	var n Pin
	_ = json.Unmarshal(b, &n)
	return &n
}

func cloneTrust(t *Trust) *Trust {
	if t == nil {
		return nil
	}
	b, _ := json.Marshal(t)
	var n Trust
	_ = json.Unmarshal(b, &n)
	return &n
}

// yamlNumbers turns json.Numbers into int64 (or float64) so that YAML
// writes them as numbers, not strings.
func yamlNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = yamlNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = yamlNumbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}
