package registry_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/treelist"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// sortedJSON re-encodes JSON with object members sorted, no whitespace
// and no HTML escaping: RFC 8785 for documents of ASCII strings,
// integers, booleans and null, written here without the canonical
// package so that a test can recompute what the registry hashes and signs.
func sortedJSON(t *testing.T, raw []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // encoding/json sorts map keys
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestApprovalSignatureRecomputed: DESIGN §8 "what a signature covers".
// From the files a Dir registry writes alone — the pin, trust.json and
// the history — a verifier that does not use package registry, canonical
// or sign recomputes the spec digest (sha256 of the spec's canonical
// JSON), builds the approval payload as docs/governance.md spells it and
// checks each approval: ECDSA P-256 over SHA-256 of those bytes, ASN.1
// DER, base64 (standard), by the key trust.json holds under the signer's
// digest (sha256 of its DER SubjectPublicKeyInfo). The payload bytes
// differing from the documented form (a member renamed, the expiry in
// another layout, the registry left out) fail it, as a pin with the
// revision or expiry changed does.
func TestApprovalSignatureRecomputed(t *testing.T) {
	ctx := context.Background()
	d, _, k, approve := govDir(t, 2, "alice", "bob")
	exp := time.Now().Add(48 * time.Hour)
	approve(registrytest.Change("acme-echo", "1.0"), &exp, k["alice"], k["bob"])

	pinRaw, err := os.ReadFile(filepath.Join(d.Root(), "pins", "acme-echo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pin struct {
		Provider   string          `json:"provider"`
		Revision   int64           `json:"revision"`
		SpecDigest string          `json:"specDigest"`
		Spec       json.RawMessage `json:"spec"`
		Approvals  []struct {
			Signer    string  `json:"signer"`
			Signature string  `json:"signature"`
			Expires   *string `json:"expires"`
		} `json:"approvals"`
	}
	if err := json.Unmarshal(pinRaw, &pin); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("sha256:%x", sha256.Sum256(sortedJSON(t, pin.Spec))); got != pin.SpecDigest {
		t.Fatalf("spec digest recomputed from the pin's spec: %s, the pin says %s", got, pin.SpecDigest)
	}

	// The registry's id: the hash of its first history entry.
	logRaw, err := os.ReadFile(filepath.Join(d.Root(), "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var first struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(lines(logRaw)[0], &first); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Hash, "sha256:") {
		t.Fatalf("first history entry's hash %q", first.Hash)
	}

	trustRaw, err := os.ReadFile(filepath.Join(d.Root(), "trust.json"))
	if err != nil {
		t.Fatal(err)
	}
	var trust struct {
		Keys []struct {
			Name, Role, PEM string
			Digest          string `json:"digest"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(trustRaw, &trust); err != nil {
		t.Fatal(err)
	}
	keyOf := func(signer string) *ecdsa.PublicKey {
		t.Helper()
		for _, x := range trust.Keys {
			if x.Digest != signer {
				continue
			}
			blk, _ := pem.Decode([]byte(x.PEM))
			if blk == nil || blk.Type != "PUBLIC KEY" {
				t.Fatalf("trust.json: key %s: PEM %q", x.Name, x.PEM)
			}
			if got := fmt.Sprintf("sha256:%x", sha256.Sum256(blk.Bytes)); got != signer || x.Role != "approver" {
				t.Fatalf("trust.json: key %s: digest of its SPKI %s, role %s; the approval names %s", x.Name, got, x.Role, signer)
			}
			pub, err := x509.ParsePKIXPublicKey(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return pub.(*ecdsa.PublicKey)
		}
		t.Fatalf("no trusted key %s", signer)
		return nil
	}
	payload := func(typ, reg, spec, provider string, rev int64, exp string) []byte {
		return fmt.Appendf(nil, `{"expires":%s,"provider":%q,"registry":%q,"revision":%d,"spec":%q,"type":%q}`, exp, provider, reg, rev, spec, typ)
	}
	if len(pin.Approvals) != 2 {
		t.Fatalf("%d approvals in the pin, want 2", len(pin.Approvals))
	}
	wantExp := `"` + exp.UTC().Format("2006-01-02T15:04:05Z") + `"`
	for _, a := range pin.Approvals {
		pub := keyOf(a.Signer)
		sig, err := base64.StdEncoding.DecodeString(a.Signature)
		if err != nil {
			t.Fatalf("signature of %s is not standard base64: %v", a.Signer, err)
		}
		if a.Expires == nil {
			t.Fatalf("approval by %s carries no expiry", a.Signer)
		}
		verifies := func(b []byte) bool { h := sha256.Sum256(b); return ecdsa.VerifyASN1(pub, h[:], sig) }
		good := payload("cruxible.approval/v2", first.Hash, pin.SpecDigest, pin.Provider, pin.Revision, wantExp)
		if !verifies(good) {
			t.Fatalf("approval by %s does not verify over the documented payload %s", a.Signer, good)
		}
		for what, b := range map[string][]byte{
			"another revision":    payload("cruxible.approval/v2", first.Hash, pin.SpecDigest, pin.Provider, pin.Revision+1, wantExp),
			"no expiry":           payload("cruxible.approval/v2", first.Hash, pin.SpecDigest, pin.Provider, pin.Revision, "null"),
			"another provider":    payload("cruxible.approval/v2", first.Hash, pin.SpecDigest, "acme-other", pin.Revision, wantExp),
			"another registry":    payload("cruxible.approval/v2", "sha256:"+strings.Repeat("0", 64), pin.SpecDigest, pin.Provider, pin.Revision, wantExp),
			"the v1 type":         payload("cruxible.approval/v1", first.Hash, pin.SpecDigest, pin.Provider, pin.Revision, wantExp),
			"with whitespace":     bytes.ReplaceAll(good, []byte(","), []byte(", ")),
			"expiry in millis":    payload("cruxible.approval/v2", first.Hash, pin.SpecDigest, pin.Provider, pin.Revision, `"`+exp.UTC().Format("2006-01-02T15:04:05.000Z")+`"`),
			"another spec digest": payload("cruxible.approval/v2", first.Hash, digest.Sum([]byte("x")).String(), pin.Provider, pin.Revision, wantExp),
		} {
			if verifies(b) {
				t.Errorf("approval by %s verifies over %s too: it does not cover it", a.Signer, what)
			}
		}
	}
	// And the registry agrees: the pin verifies.
	if _, err := registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestRefusedApprovalChangesNothing: an approval refused — by a builder
// key (which never counts), by a key the registry does not trust, by a
// key only proposed for trust, of a stale, rejected or unknown
// change-set, with an expiry already past, or with an expiry on a trust
// change — leaves every file of the registry as it was: no signature
// recorded in the change-set, no history entry, no pin.
func TestRefusedApprovalChangesNothing(t *testing.T) {
	ctx := context.Background()
	d, clock, k, approve := govDir(t, 1, "alice")
	alice := k["alice"]
	ci := registrytest.NewKey(t, "ci", registry.RoleBuilder)
	tr, err := d.TrustKey(ctx, ci.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	approve(tr.ChangeSet, nil, alice)
	bob := registrytest.NewKey(t, "bob", registry.RoleApprover)
	bobTrust, err := d.TrustKey(ctx, bob.Key, "t") // proposed, not approved
	if err != nil {
		t.Fatal(err)
	}

	open, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	staleCS, _, err := d.Propose(ctx, registrytest.Change("acme-other", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	approve(registrytest.Change("acme-other", "1.1"), nil, alice) // staleCS's base is no longer current
	rejected, _, err := d.Propose(ctx, registrytest.Change("acme-third", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reject(ctx, rejected.Metadata.ID, "no", "t"); err != nil {
		t.Fatal(err)
	}
	past := clock.Add(-time.Minute)
	later := clock.Add(time.Hour)
	mallory := registrytest.NewKey(t, "mallory", registry.RoleApprover)

	cases := []struct {
		name string
		id   digest.Digest
		key  registrytest.Key
		exp  *time.Time
		want refusal.Code
	}{
		{"a builder key", open.Metadata.ID, ci, nil, refusal.SignerUntrusted},
		{"an untrusted key", open.Metadata.ID, mallory, nil, refusal.SignerUntrusted},
		{"a key proposed for trust, not yet trusted, on its own trust", bobTrust.ChangeSet.Metadata.ID, bob, nil, refusal.SignerUntrusted},
		{"a stale change-set", staleCS.Metadata.ID, alice, nil, refusal.ChangesetStale},
		{"a rejected change-set", rejected.Metadata.ID, alice, nil, refusal.ChangesetInvalid},
		{"an unknown change-set", digest.Sum([]byte("none")), alice, nil, refusal.ChangesetInvalid},
		{"an expiry already past", open.Metadata.ID, alice, &past, refusal.PinExpired},
		{"an expiry on a trust change", bobTrust.ChangeSet.Metadata.ID, alice, &later, refusal.ChangesetInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, err := treelist.Of(d.Root())
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Approve(ctx, c.id, c.key.Priv, c.exp)
			if refusal.CodeOf(err) != c.want {
				t.Fatalf("approve = %v, want %s", err, c.want)
			}
			after, err := treelist.Of(d.Root())
			if err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Fatalf("the refused approval changed the registry:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
	if _, err := d.Pin(ctx, "acme-echo"); refusal.CodeOf(err) != refusal.PinUnapproved {
		t.Fatalf("pin after refused approvals: %v", err)
	}
}

// TestChangeSetSpecEditedUnderItsID: a change-set file whose spec was
// edited after it was proposed (its id, the digest an approver signs, no
// longer the digest of the spec it holds) is not approved: the approval
// is refused, the registry unchanged, no pin accepted. An approver's
// signature over the id would otherwise accept a spec nobody proposed.
func TestChangeSetSpecEditedUnderItsID(t *testing.T) {
	ctx := context.Background()
	d, _, k, _ := govDir(t, 1, "alice")
	cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d.Root(), "changesets", cs.Metadata.ID.Hex()+".yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(b, []byte("version: \"1.0\""), []byte("version: \"6.6\""), 1)
	if bytes.Equal(edited, b) {
		edited = bytes.Replace(b, []byte("version: 1.0"), []byte("version: 6.6"), 1)
	}
	if bytes.Equal(edited, b) {
		t.Fatalf("no version 1.0 in %s", b)
	}
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := treelist.Of(d.Root())
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Approve(ctx, cs.Metadata.ID, k["alice"].Priv, nil)
	if c := refusal.CodeOf(err); c != refusal.RegistryCorrupt {
		t.Fatalf("approve of an edited spec = %v, want registry_corrupt", err)
	}
	if after, _ := treelist.Of(d.Root()); after != before {
		t.Fatalf("the refused approval changed the registry:\n%s\n%s", before, after)
	}
	if _, err := d.Pin(ctx, "acme-echo"); refusal.CodeOf(err) != refusal.PinUnapproved {
		t.Fatalf("pin after the refused approval: %v", err)
	}
	// What changeset show and diff read: refused too, not shown as
	// the change-set the id names.
	if _, err := d.ChangeSet(ctx, cs.Metadata.ID); err == nil {
		t.Fatal("ChangeSet read an edited spec under its id")
	}
}

// TestNamedByAcceptedAndOpen: DESIGN §8 "gc asks the registry which
// envs, blobs and images accepted pins and open change-sets name". What
// NamedBy keeps: the accepted pin's env and wheels (by provider) and an
// open change-set's (by change-set); not those of a change-set rejected,
// of one approved and superseded since, nor of a retired provider's last
// pin. Keeping too little lets gc remove what runs; keeping too much
// keeps every proposal ever made.
func TestNamedByAcceptedAndOpen(t *testing.T) {
	ctx := context.Background()
	d, _, k, approve := govDir(t, 1, "alice")
	alice := k["alice"]
	mat := func(c registry.Change) digest.Digest { return c.Provider.Materializations[0].Digest }
	wheel := func(c registry.Change) digest.Digest { return c.Provider.Package.SHA256 }

	echo1, echo2, echo3 := registrytest.Change("acme-echo", "1.0"), registrytest.Change("acme-echo", "2.0"), registrytest.Change("acme-echo", "3.0")
	approve(echo1, nil, alice)
	approve(echo2, nil, alice) // echo1 superseded
	open, _, err := d.Propose(ctx, echo3, "t")
	if err != nil {
		t.Fatal(err)
	}
	other := registrytest.Change("acme-other", "1.0")
	rej, _, err := d.Propose(ctx, other, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reject(ctx, rej.Metadata.ID, "no", "t"); err != nil {
		t.Fatal(err)
	}
	gone := registrytest.Change("acme-gone", "1.0")
	approve(gone, nil, alice)
	approve(registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-gone"}}, nil, alice)

	n, err := registry.NamedBy(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	has := func(l []digest.Digest, x digest.Digest) bool { return slices.Contains(l, x) }
	for what, c := range map[string]struct {
		got, want bool
	}{
		"the accepted pin's env":                   {has(n.Envs, mat(echo2)), true},
		"the accepted pin's wheel":                 {has(n.Blobs, wheel(echo2)), true},
		"the open change-set's env":                {has(n.Envs, mat(echo3)), true},
		"the open change-set's wheel":              {has(n.Blobs, wheel(echo3)), true},
		"a superseded change-set's env":            {has(n.Envs, mat(echo1)), false},
		"a superseded change-set's wheel":          {has(n.Blobs, wheel(echo1)), false},
		"a rejected change-set's env":              {has(n.Envs, mat(other)), false},
		"a rejected change-set's wheel":            {has(n.Blobs, wheel(other)), false},
		"a retired provider's last env":            {has(n.Envs, mat(gone)), false},
		"a retired provider's last wheel":          {has(n.Blobs, wheel(gone)), false},
		"the pin's env said to be acme-echo's":     {slices.Equal(n.EnvPins[mat(echo2)], []string{"acme-echo"}), true},
		"the open env said to be the change-set's": {slices.Equal(n.EnvChangeSets[mat(echo3)], []digest.Digest{open.Metadata.ID}), true},
	} {
		if c.got != c.want {
			t.Errorf("%s: named %v, want %v (%+v)", what, c.got, c.want, n)
		}
	}
}

// TestExpiryEditedWithinItsSecondRefused: DESIGN §8 "neither the
// revision nor the expiry can be edited under a valid signature". The
// payload carries the expiry to the second, so a pin file whose approval's
// expiry was given a fraction of a second (12:00:00Z → 12:00:00.999Z)
// still verified, and the pin ran up to a second past the expiry its
// approver signed. An expiry with a fraction is no expiry any approval
// signed: refused signature_invalid, before and after the signed expiry.
func TestExpiryEditedWithinItsSecondRefused(t *testing.T) {
	ctx := context.Background()
	d, _, k, approve := govDir(t, 1, "alice")
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	approve(registrytest.Change("acme-echo", "1.0"), &exp, k["alice"])
	p := filepath.Join(d.Root(), "pins", "acme-echo.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	a := m["approvals"].([]any)[0].(map[string]any)
	if a["expires"] != exp.Format(time.RFC3339) {
		t.Fatalf("the approval's expiry %v, want %s", a["expires"], exp.Format(time.RFC3339))
	}
	a["expires"] = exp.Add(999 * time.Millisecond).Format(time.RFC3339Nano)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{exp.Add(-time.Minute), exp.Add(500 * time.Millisecond)} {
		_, err := registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", at)
		if refusal.CodeOf(err) != refusal.SignatureInvalid || !strings.Contains(err.Error(), "fraction of a second") {
			t.Errorf("verify at %s of a pin whose expiry was moved within its second: %v, want signature_invalid saying so", at.Format(time.RFC3339Nano), err)
		}
	}
}

// TestOneStateDirSeveralRegistries: DESIGN §8 floors are kept "per
// registry (keyed by the hash of the registry's first history entry, so
// one host can verify against several)". One state directory verifies
// two registries in turn: each has a floor of its own, named by its id,
// holding its own revisions, log length and head; an older pin put back
// in one is refused pin_rollback by its floor while the other verifies
// as before.
func TestOneStateDirSeveralRegistries(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	a, _, ka, approveA := govDir(t, 1, "alice")
	b, _, kb, approveB := govDir(t, 1, "bob")
	approveA(registrytest.Change("acme-echo", "1.0"), nil, ka["alice"])
	pinA1, err := os.ReadFile(filepath.Join(a.Root(), "pins", "acme-echo.json"))
	if err != nil {
		t.Fatal(err)
	}
	verify := func(d *registry.Dir, want int64) {
		t.Helper()
		p, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now())
		if err != nil || p.Revision != want {
			t.Fatalf("verify %s: %v, revision %v want %d", d.Root(), err, p, want)
		}
	}
	verify(a, 1)
	approveA(registrytest.Change("acme-echo", "2.0"), nil, ka["alice"])
	approveB(registrytest.Change("acme-echo", "1.0"), nil, kb["bob"])
	for range 2 {
		verify(a, 2)
		verify(b, 1)
	}
	for _, c := range []struct {
		d   *registry.Dir
		rev int64
	}{{a, 2}, {b, 1}} {
		chain, err := c.d.Chain(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, err := registry.ReadFloor(state, chain[0])
		if err != nil || f == nil {
			t.Fatalf("%s: floor %v, %v", c.d.Root(), f, err)
		}
		if f.Registry != chain[0] || f.Providers["acme-echo"] != c.rev || f.Length != len(chain) || f.Head != chain[len(chain)-1] {
			t.Errorf("%s: floor %+v, want revision %d, length %d, head %s", c.d.Root(), f, c.rev, len(chain), chain[len(chain)-1])
		}
		if _, err := os.Stat(filepath.Join(state, "floors", chain[0].Hex()+".json")); err != nil {
			t.Errorf("%s: no floor named by its id: %v", c.d.Root(), err)
		}
	}
	if ents, err := os.ReadDir(filepath.Join(state, "floors")); err != nil || len(ents) != 2 {
		t.Errorf("floors: %d entries, %v; want one per registry", len(ents), err)
	}
	// A's revision-1 pin put back: A's floor refuses it; B is untouched.
	if err := os.WriteFile(filepath.Join(a.Root(), "pins", "acme-echo.json"), pinA1, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, a, state, "acme-echo", time.Now()); refusal.CodeOf(err) != refusal.PinRollback {
		t.Errorf("A's older pin put back: %v, want pin_rollback", err)
	}
	verify(b, 1)
}

// TestHistoryRecordsEveryMutation: DESIGN §8 "an append-only log of every
// mutation (interface registered, key trusted or untrusted, policy
// changed, change-set proposed, approved, rejected, pin accepted or
// retired)". A Dir registry taken through each records each, in order:
// one changeset-approved entry per signature, one changeset-proposed per
// proposal, and the change each accepted change-set made.
func TestHistoryRecordsEveryMutation(t *testing.T) {
	ctx := context.Background()
	d, _, k, approve := govDir(t, 1, "root", "bob") // root trusted, bob by a change-set
	root, bob := k["root"], k["bob"]
	if _, err := d.RegisterInterface(ctx, "cruxible.echo/v1", []byte(`{"type":"object"}`)); err != nil {
		t.Fatal(err)
	}
	approve(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, nil, root)
	approve(registrytest.Change("acme-echo", "1.0"), nil, root, bob)
	other, _, err := d.Propose(ctx, registrytest.Change("acme-other", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reject(ctx, other.Metadata.ID, "no", "t"); err != nil {
		t.Fatal(err)
	}
	approve(registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}}, nil, root, bob)
	approve(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 1}}, nil, root, bob)
	approve(registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "bob"}}, nil, root)

	log, err := d.Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type ev struct{ event, subject string }
	var changes []ev
	proposed, approved := 0, 0
	for i, e := range log {
		if e.Seq != int64(i) {
			t.Errorf("entry %d has seq %d", i, e.Seq)
		}
		switch e.Event {
		case registry.EventChangeSetProposed:
			proposed++
		case registry.EventChangeSetApproved:
			approved++
		default:
			changes = append(changes, ev{e.Event, e.Subject})
		}
	}
	want := []ev{
		{registry.EventKeyTrusted, "root"},
		{registry.EventKeyTrusted, "bob"},
		{registry.EventInterfaceRegistered, "cruxible.echo/v1"},
		{registry.EventPolicyChanged, ""},
		{registry.EventPinAccepted, "acme-echo"},
		{registry.EventChangeSetRejected, ""},
		{registry.EventPinRetired, "acme-echo"},
		{registry.EventPolicyChanged, ""},
		{registry.EventKeyUntrusted, "bob"},
	}
	if len(changes) != len(want) {
		t.Fatalf("history's changes %v, want %v", changes, want)
	}
	for i := range want {
		// The subject of a policy change or a rejection is whatever the
		// registry names it by; the event and order are the point.
		if changes[i].event != want[i].event || want[i].subject != "" && changes[i].subject != want[i].subject {
			t.Errorf("change %d: %v, want %v (all: %v)", i, changes[i], want[i], changes)
		}
	}
	// Proposals: bob's trust, policy 2, acme-echo, acme-other, the
	// retirement, policy 1, the untrust. Signatures: 1+1+2+2+2+1.
	if proposed != 7 || approved != 9 {
		t.Errorf("%d changeset-proposed and %d changeset-approved entries, want 7 and 9", proposed, approved)
	}
}
