// Package registrytest is the conformance suite of registry.Registry:
// Run checks that an implementation applies the governance rules of
// DESIGN §8 (root of trust, change-sets approved at the threshold by
// distinct approver keys, stale bases, expiry, revisions that only go up,
// the hash-chained history) through the interface alone, so that Stub,
// Dir and any other implementation behave the same.
//
// It owns no registry of its own and touches no disk beyond t.TempDir.
package registrytest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/sign"
)

// Key is a test signer: its private key and its registry.Key.
type Key struct {
	Priv *sign.PrivateKey
	Key  registry.Key
}

// NewKey makes a fresh ECDSA P-256 signer named name with role.
func NewKey(t testing.TB, name, role string) Key {
	t.Helper()
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return KeyFrom(t, name, role, ek)
}

// KeyFrom is the signer of the ECDSA P-256 key ek, named name with role
// (a test that hands one key to a child process makes both halves' from
// it).
func KeyFrom(t testing.TB, name, role string, ek *ecdsa.PrivateKey) Key {
	t.Helper()
	pk, err := sign.FromECDSA(ek)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&ek.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	p := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return Key{Priv: pk, Key: registry.Key{Name: name, Role: role, PEM: string(p), Digest: pk.Public().Digest()}}
}

// Accept proposes c in d and approves it with by, failing t on either:
// for a registry whose threshold by's approval alone meets.
func Accept(t testing.TB, d *registry.Dir, c registry.Change, by Key) *registry.ChangeSet {
	t.Helper()
	cs, _, err := d.Propose(context.Background(), c, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(context.Background(), cs.Metadata.ID, by.Priv, nil); err != nil {
		t.Fatal(err)
	}
	return cs
}

// Change returns a register change for provider name at version v, with
// one entrypoint and one local materialization whose digests derive from
// name and v.
func Change(name, v string) registry.Change {
	d := func(s string) digest.Digest { return digest.Sum([]byte(name + "/" + v + "/" + s)) }
	return registry.Change{Action: registry.ActionRegister, Provider: &registry.Provider{
		Name:           name,
		Package:        &registry.Package{Name: name, Version: v, Filename: name + "-" + v + "-py3-none-any.whl", SHA256: d("wheel")},
		Protocol:       []int{1, 1},
		ManifestDigest: d("manifest"), LockDigest: d("lock"),
		Secrets: []string{"token"}, Egress: []string{"api.example.com:443"},
		Budgets:     map[string]int64{"timeoutMs": 1000},
		Entrypoints: []registry.Entrypoint{{Name: "echo", Object: "acme:echo", Interface: registry.InterfaceRef{ID: "cruxible.echo/v1", Digest: d("iface")}, ImplementationDigest: d("impl")}},
		Materializations: []registry.Materialization{{Backend: "local", Platform: "linux_x86_64-cp312", Digest: d("mat"), Resolution: d("res"), Seal: d("seal"),
			Packages: []registry.Package{{Name: name, Version: v, Filename: name + "-" + v + "-py3-none-any.whl", SHA256: d("wheel")}}}},
	}}
}

func codeIs(t *testing.T, err error, want refusal.Code) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// proposed is Propose's change-set, failing t on its error.
func proposed(t *testing.T) func(cs *registry.ChangeSet, _ bool, err error) *registry.ChangeSet {
	return func(cs *registry.ChangeSet, _ bool, err error) *registry.ChangeSet {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
}

// Run runs the suite; newReg returns a fresh, empty registry per subtest.
func Run(t *testing.T, newReg func(t *testing.T) registry.Registry) {
	ctx := context.Background()
	now := time.Now()
	// setup makes a registry with a root approver key.
	setup := func(t *testing.T) (registry.Registry, Key) {
		r := newReg(t)
		root := NewKey(t, "root", registry.RoleApprover)
		res := must[*registry.TrustResult](t)(r.TrustKey(ctx, root.Key, "alice"))
		if !res.Root || res.ChangeSet != nil {
			t.Fatalf("first key: %+v", res)
		}
		return r, root
	}
	// accept proposes c and approves it with each key.
	accept := func(t *testing.T, r registry.Registry, c registry.Change, keys ...Key) *registry.ApproveResult {
		t.Helper()
		cs := proposed(t)(r.Propose(ctx, c, "alice"))
		var res *registry.ApproveResult
		for _, k := range keys {
			res = must[*registry.ApproveResult](t)(r.Approve(ctx, cs.Metadata.ID, k.Priv, nil))
		}
		return res
	}
	trust := func(t *testing.T, r registry.Registry, k Key, approvers ...Key) {
		t.Helper()
		res := must[*registry.TrustResult](t)(r.TrustKey(ctx, k.Key, "alice"))
		if res.Root || res.ChangeSet == nil {
			t.Fatalf("a later key must be proposed: %+v", res)
		}
		for _, a := range approvers {
			must[*registry.ApproveResult](t)(r.Approve(ctx, res.ChangeSet.Metadata.ID, a.Priv, nil))
		}
	}
	setThreshold := func(t *testing.T, r registry.Registry, n int, approvers ...Key) {
		t.Helper()
		accept(t, r, registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: n}}, approvers...)
	}

	t.Run("interfaces", func(t *testing.T) {
		r := newReg(t)
		it := must[*registry.InterfaceResult](t)(r.RegisterInterface(ctx, "cruxible.echo/v1", []byte(`{"b":1, "a":2}`)))
		want, _ := digest.InterfaceDigest([]byte(`{"a":2,"b":1}`))
		if it.Digest != want || it.Already {
			t.Fatalf("first registration: digest %s want %s, already %v", it.Digest, want, it.Already)
		}
		// The same schema again (another spelling): nothing recorded,
		// and said so, with the first registration's time.
		again := must[*registry.InterfaceResult](t)(r.RegisterInterface(ctx, "cruxible.echo/v1", []byte(`{"a":2,"b":1}`)))
		if !again.Already || again.Interface != it.Interface {
			t.Fatalf("registered again: %+v, want Already and %+v", again, it.Interface)
		}
		_, err := r.RegisterInterface(ctx, "cruxible.echo/v1", []byte(`{"a":3}`))
		codeIs(t, err, refusal.InterfaceDigestMismatch)
		_, err = r.RegisterInterface(ctx, "x", []byte(`{"a":`))
		codeIs(t, err, refusal.InterfaceInvalid)
		_, err = r.RegisterInterface(ctx, "has space", []byte(`{}`))
		codeIs(t, err, refusal.InterfaceInvalid)
		// A schema that names itself another interface ("id" or "$id")
		// is not registered under this one (acme.echo's schema was
		// accepted as acme.hello's); one naming this id, or a URI, is.
		for _, doc := range []string{`{"id":"acme.echo","a":1}`, `{"$id":"acme.echo","a":1}`} {
			_, err = r.RegisterInterface(ctx, "acme.hello", []byte(doc))
			codeIs(t, err, refusal.InterfaceInvalid)
			if err != nil && (!strings.Contains(err.Error(), "acme.echo") || !strings.Contains(err.Error(), "acme.hello")) {
				t.Errorf("%s: the refusal names not both ids: %v", doc, err)
			}
		}
		must[*registry.InterfaceResult](t)(r.RegisterInterface(ctx, "acme.same", []byte(`{"id":"acme.same","$id":"https://acme.example/schemas/acme.echo.json"}`)))
		l := must[[]registry.Interface](t)(r.Interfaces(ctx))
		if len(l) != 2 || !slices.ContainsFunc(l, func(i registry.Interface) bool { return i.ID == "cruxible.echo/v1" && i.Digest == want }) {
			t.Fatalf("%+v", l)
		}
	})
	t.Run("interfaces at once", func(t *testing.T) {
		// Registrations of one schema at once: Already is decided with
		// the registration, so exactly one of them registered it, and
		// the history has one entry for it. (The command decided it by
		// reading the registry first: both could say registered.)
		r := newReg(t)
		const n = 8
		res := make([]*registry.InterfaceResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { res[i], errs[i] = r.RegisterInterface(ctx, "acme.race/v1", []byte(`{"type":"object"}`)) })
		}
		wg.Wait()
		registered := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("registration %d: %v", i, errs[i])
			}
			if !res[i].Already {
				registered++
			}
		}
		entries := 0
		for _, e := range must[[]registry.Entry](t)(r.Log(ctx)) {
			if e.Event == registry.EventInterfaceRegistered {
				entries++
			}
		}
		if registered != 1 || entries != 1 {
			t.Fatalf("%d registrations at once: %d say registered (want 1), %d history entries (want 1)", n, registered, entries)
		}
	})
	t.Run("root of trust", func(t *testing.T) {
		r := newReg(t)
		_, err := r.TrustKey(ctx, NewKey(t, "ci", registry.RoleBuilder).Key, "alice")
		codeIs(t, err, refusal.ChangesetInvalid)
		if tr := must[*registry.Trust](t)(r.Trust(ctx)); tr != nil {
			t.Fatalf("a refused root left trust %+v", tr)
		}
		r, root := setup(t)
		tr := must[*registry.Trust](t)(r.Trust(ctx))
		if tr.Root.Digest != root.Key.Digest || tr.Policy.Threshold != 1 || len(tr.Keys) != 1 {
			t.Fatalf("%+v", tr)
		}
	})
	t.Run("approve writes the pin with revision + 1", func(t *testing.T) {
		r, root := setup(t)
		_, err := r.Pin(ctx, "acme-echo")
		codeIs(t, err, refusal.PinUnapproved)
		res := accept(t, r, Change("acme-echo", "1.0"), root)
		if !res.Accepted || res.Pin == nil || res.Pin.Revision != 1 || res.ChangeSet.Status.State != registry.StateApproved {
			t.Fatalf("%+v", res)
		}
		p := must[*registry.Pin](t)(registry.VerifyPin(ctx, r, "", "acme-echo", now))
		if p.Revision != 1 || !p.Spec.Base.IsZero() {
			t.Fatalf("%+v", p)
		}
		res = accept(t, r, Change("acme-echo", "2.0"), root)
		if res.Pin.Revision != 2 || res.Pin.Spec.Base != p.SpecDigest {
			t.Fatalf("%+v", res.Pin)
		}
		if got := must[*registry.Pin](t)(registry.VerifyPin(ctx, r, "", "acme-echo", now)); got.ProviderSpec().Package.Version != "2.0" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("stale change-set", func(t *testing.T) {
		r, root := setup(t)
		a := proposed(t)(r.Propose(ctx, Change("acme-echo", "1.0"), "alice"))
		b := proposed(t)(r.Propose(ctx, Change("acme-echo", "1.1"), "bob"))
		must[*registry.ApproveResult](t)(r.Approve(ctx, a.Metadata.ID, root.Priv, nil))
		_, err := r.Approve(ctx, b.Metadata.ID, root.Priv, nil)
		codeIs(t, err, refusal.ChangesetStale)
	})
	t.Run("reject", func(t *testing.T) {
		r, root := setup(t)
		cs := proposed(t)(r.Propose(ctx, Change("acme-echo", "1.0"), "alice"))
		_, err := r.Reject(ctx, cs.Metadata.ID, "", "bob")
		codeIs(t, err, refusal.ChangesetInvalid)
		got := must[*registry.ChangeSet](t)(r.Reject(ctx, cs.Metadata.ID, "wrong index", "bob"))
		if got.Status.State != registry.StateRejected || got.Status.Reason != "wrong index" {
			t.Fatalf("%+v", got.Status)
		}
		_, err = r.Approve(ctx, cs.Metadata.ID, root.Priv, nil)
		codeIs(t, err, refusal.ChangesetInvalid)
		_, err = r.ChangeSet(ctx, digest.Sum([]byte("none")))
		codeIs(t, err, refusal.ChangesetInvalid)
		// Proposed again (the command that made it, run again): open
		// again, without the approvals the rejection withdrew, and it
		// can be approved.
		again := proposed(t)(r.Propose(ctx, Change("acme-echo", "1.0"), "carol"))
		if again.Metadata.ID != cs.Metadata.ID || again.Status.State != registry.StateProposed || again.Status.Reason != "" || len(again.Status.Approvals) != 0 || again.Metadata.ProposedBy != "carol" {
			t.Fatalf("proposed again: %+v %+v", again.Metadata, again.Status)
		}
		if res := must[*registry.ApproveResult](t)(r.Approve(ctx, cs.Metadata.ID, root.Priv, nil)); !res.Accepted {
			t.Fatalf("%+v", res)
		}
		_, _, err = r.Propose(ctx, Change("acme-echo", "1.0"), "carol")
		if err != nil {
			t.Fatalf("the same change again is a new revision: %v", err)
		}
	})
	t.Run("the same proposal again", func(t *testing.T) {
		// The same change on the same base is the same change-set: open
		// already, Propose returns it saying so (already) and records
		// nothing; it said nothing, and install printed "proposed" again.
		r, _ := setup(t)
		cs, already, err := r.Propose(ctx, Change("acme-echo", "1.0"), "alice")
		if err != nil || already {
			t.Fatalf("first proposal: already %v, %v", already, err)
		}
		log := must[[]registry.Entry](t)(r.Log(ctx))
		again, already, err := r.Propose(ctx, Change("acme-echo", "1.0"), "bob")
		if err != nil || !already || again.Metadata.ID != cs.Metadata.ID || again.Metadata.ProposedBy != "alice" || again.Status.State != registry.StateProposed {
			t.Fatalf("proposed again: already %v, %+v, %v", already, again, err)
		}
		if after := must[[]registry.Entry](t)(r.Log(ctx)); len(after) != len(log) {
			t.Fatalf("proposing it again recorded %d history entries", len(after)-len(log))
		}
		// Rejected, it is opened again: a new proposal, recorded.
		must[*registry.ChangeSet](t)(r.Reject(ctx, cs.Metadata.ID, "no", "bob"))
		if _, already, err := r.Propose(ctx, Change("acme-echo", "1.0"), "carol"); err != nil || already {
			t.Fatalf("proposed again after its rejection: already %v, %v", already, err)
		}
	})
	t.Run("untrusted and builder keys never approve", func(t *testing.T) {
		r, root := setup(t)
		ci := NewKey(t, "ci", registry.RoleBuilder)
		trust(t, r, ci, root)
		cs := proposed(t)(r.Propose(ctx, Change("acme-echo", "1.0"), "alice"))
		_, err := r.Approve(ctx, cs.Metadata.ID, ci.Priv, nil)
		codeIs(t, err, refusal.SignerUntrusted)
		_, err = r.Approve(ctx, cs.Metadata.ID, NewKey(t, "mallory", registry.RoleApprover).Priv, nil)
		codeIs(t, err, refusal.SignerUntrusted)
		_, err = r.Pin(ctx, "acme-echo")
		codeIs(t, err, refusal.PinUnapproved)
	})
	t.Run("a later key needs the threshold's approvals", func(t *testing.T) {
		r, root := setup(t)
		bob := NewKey(t, "bob", registry.RoleApprover)
		res := must[*registry.TrustResult](t)(r.TrustKey(ctx, bob.Key, "bob"))
		// bob is only proposed: he cannot approve, not even his own key.
		_, err := r.Approve(ctx, res.ChangeSet.Metadata.ID, bob.Priv, nil)
		codeIs(t, err, refusal.SignerUntrusted)
		if tr := must[*registry.Trust](t)(r.Trust(ctx)); len(tr.Keys) != 1 {
			t.Fatalf("trusted without approval: %+v", tr.Keys)
		}
		must[*registry.ApproveResult](t)(r.Approve(ctx, res.ChangeSet.Metadata.ID, root.Priv, nil))
		if tr := must[*registry.Trust](t)(r.Trust(ctx)); len(tr.Keys) != 2 || tr.Revision != 1 {
			t.Fatalf("%+v", tr)
		}
	})
	t.Run("the same key trusted again changes nothing", func(t *testing.T) {
		// An operator who cannot tell whether key trust went through
		// (killed after it was recorded, its output lost) runs it again:
		// the root, or a later key trusted under the same name and role,
		// is trusted already (Already), with no change-set proposed and
		// no history entry. It was refused changeset_invalid.
		r, root := setup(t)
		bob := NewKey(t, "bob", registry.RoleApprover)
		trust(t, r, bob, root)
		state := func() (int, int, digest.Digest) {
			t.Helper()
			chain := must[[]digest.Digest](t)(r.Chain(ctx))
			return len(must[[]*registry.ChangeSet](t)(r.ChangeSets(ctx))), len(chain), chain[len(chain)-1]
		}
		css, n, head := state()
		for _, k := range []Key{root, bob} {
			res := must[*registry.TrustResult](t)(r.TrustKey(ctx, k.Key, "alice"))
			if !res.Already || res.Root != (k.Key.Name == "root") || res.ChangeSet != nil || res.Key.Digest != k.Key.Digest || res.Key.Name != k.Key.Name || res.Key.Role != k.Key.Role {
				t.Errorf("%s trusted again: %+v", k.Key.Name, res)
			}
		}
		if c, m, h := state(); c != css || m != n || h != head {
			t.Fatalf("trusting again changed the registry: %d change-sets, %d entries (%s), was %d, %d (%s)", c, m, h, css, n, head)
		}
		// Not the same request: another role under the name is refused
		// (the name is taken), the same key under another name is
		// proposed, another key under the name is refused.
		builder := bob
		builder.Key.Role = registry.RoleBuilder
		_, err := r.TrustKey(ctx, builder.Key, "alice")
		codeIs(t, err, refusal.ChangesetInvalid)
		_, err = r.TrustKey(ctx, NewKey(t, "bob", registry.RoleApprover).Key, "alice")
		codeIs(t, err, refusal.ChangesetInvalid)
		alias := bob
		alias.Key.Name = "bob-laptop"
		if res := must[*registry.TrustResult](t)(r.TrustKey(ctx, alias.Key, "alice")); res.Already || res.Root || res.ChangeSet == nil {
			t.Fatalf("the same key under another name: %+v", res)
		}
		// A key proposed and not yet approved is not trusted: trusting it
		// again gives the same open change-set.
		carol := NewKey(t, "carol", registry.RoleBuilder)
		a := must[*registry.TrustResult](t)(r.TrustKey(ctx, carol.Key, "alice"))
		b := must[*registry.TrustResult](t)(r.TrustKey(ctx, carol.Key, "alice"))
		if b.Already || b.ChangeSet == nil || b.ChangeSet.Metadata.ID != a.ChangeSet.Metadata.ID {
			t.Fatalf("a proposed key trusted again: %+v, first %+v", b, a)
		}
	})
	t.Run("threshold of distinct keys", func(t *testing.T) {
		r, root := setup(t)
		alias := root
		alias.Key.Name = "root-again"
		trust(t, r, alias, root)
		// One key under two names is one approver: threshold 2 would
		// leave nothing approvable.
		_, _, err := r.Propose(ctx, registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, "alice")
		codeIs(t, err, refusal.ChangesetInvalid)
		bob := NewKey(t, "bob", registry.RoleApprover)
		trust(t, r, bob, root)
		setThreshold(t, r, 2, root)
		res := accept(t, r, Change("acme-echo", "1.0"), root)
		if res.Accepted || res.Approvals != 1 || res.Threshold != 2 {
			t.Fatalf("one approval short accepted: %+v", res)
		}
		_, err = r.Pin(ctx, "acme-echo")
		codeIs(t, err, refusal.PinUnapproved)
		res = must[*registry.ApproveResult](t)(r.Approve(ctx, res.ChangeSet.Metadata.ID, root.Priv, nil))
		if res.Accepted {
			t.Fatal("the same key approving twice counted twice")
		}
		// lowering the threshold alone does not work either.
		low := accept(t, r, registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 1}}, root)
		if low.Accepted {
			t.Fatal("threshold lowered by one key of two")
		}
		res = must[*registry.ApproveResult](t)(r.Approve(ctx, res.ChangeSet.Metadata.ID, bob.Priv, nil))
		if !res.Accepted || res.Pin.Revision != 1 {
			t.Fatalf("%+v", res)
		}
		must[*registry.Pin](t)(registry.VerifyPin(ctx, r, "", "acme-echo", now))
	})
	t.Run("key untrusted after it signed", func(t *testing.T) {
		r, root := setup(t)
		bob := NewKey(t, "bob", registry.RoleApprover)
		trust(t, r, bob, root)
		accept(t, r, Change("acme-echo", "1.0"), bob)
		must[*registry.Pin](t)(registry.VerifyPin(ctx, r, "", "acme-echo", now))
		accept(t, r, registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "bob"}}, root)
		_, err := registry.VerifyPin(ctx, r, "", "acme-echo", now)
		codeIs(t, err, refusal.SignerUntrusted)
	})
	t.Run("untrust removes the key under every name", func(t *testing.T) {
		r, root := setup(t)
		bob := NewKey(t, "bob", registry.RoleApprover)
		trust(t, r, bob, root)
		alias := bob
		alias.Key.Name = "bob-laptop"
		trust(t, r, alias, root)
		accept(t, r, Change("acme-echo", "1.0"), bob)
		must[*registry.Pin](t)(registry.VerifyPin(ctx, r, "", "acme-echo", now))
		cs := proposed(t)(r.Propose(ctx, registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "bob"}}, "alice"))
		if k := cs.Spec.Changes[0].Key; k.Digest != bob.Key.Digest {
			t.Fatalf("the untrust change does not name the key material: %+v", k)
		}
		// A trust change does not expire: an expiry is refused, not ignored.
		exp := now.Add(time.Hour)
		_, err := r.Approve(ctx, cs.Metadata.ID, root.Priv, &exp)
		codeIs(t, err, refusal.ChangesetInvalid)
		must[*registry.ApproveResult](t)(r.Approve(ctx, cs.Metadata.ID, root.Priv, nil))
		tr := must[*registry.Trust](t)(r.Trust(ctx))
		for _, k := range tr.Keys {
			if k.Digest == bob.Key.Digest {
				t.Fatalf("bob's key is still trusted as %s", k.Name)
			}
		}
		_, err = registry.VerifyPin(ctx, r, "", "acme-echo", now)
		codeIs(t, err, refusal.SignerUntrusted)
		if err := registry.VerifyTrust(ctx, r); err != nil {
			t.Fatalf("the trust state does not replay: %v", err)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		r, root := setup(t)
		exp := time.Now().Add(time.Hour)
		cs := proposed(t)(r.Propose(ctx, Change("acme-echo", "1.0"), "alice"))
		past := time.Now().Add(-time.Minute)
		_, err := r.Approve(ctx, cs.Metadata.ID, root.Priv, &past)
		codeIs(t, err, refusal.PinExpired)
		must[*registry.ApproveResult](t)(r.Approve(ctx, cs.Metadata.ID, root.Priv, &exp))
		must[*registry.Pin](t)(registry.VerifyPin(ctx, r, "", "acme-echo", time.Now()))
		_, err = registry.VerifyPin(ctx, r, "", "acme-echo", exp.Add(time.Second))
		codeIs(t, err, refusal.PinExpired)
	})
	t.Run("retire", func(t *testing.T) {
		r, root := setup(t)
		_, _, err := r.Propose(ctx, registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}}, "alice")
		codeIs(t, err, refusal.PinUnapproved)
		accept(t, r, Change("acme-echo", "1.0"), root)
		res := accept(t, r, registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}}, root)
		if !res.Accepted || res.Pin == nil || !res.Pin.Retired || res.Pin.Revision != 2 {
			t.Fatalf("%+v", res)
		}
		_, err = registry.VerifyPin(ctx, r, "", "acme-echo", now)
		codeIs(t, err, refusal.PinUnapproved)
		res = accept(t, r, Change("acme-echo", "1.0"), root)
		if res.Pin.Revision != 3 {
			t.Fatalf("revision went %d after a retire at 2", res.Pin.Revision)
		}
	})
	t.Run("invalid changes", func(t *testing.T) {
		r, _ := setup(t)
		noEP := Change("acme-echo", "1.0")
		noEP.Provider.Entrypoints = nil
		// A register or update that names no protocol range (a stored
		// one still reads: only a new proposal must name it).
		noProtocol, updateNoProtocol := Change("acme-echo", "1.0"), Change("acme-echo", "1.0")
		noProtocol.Provider.Protocol = nil
		updateNoProtocol.Provider.Protocol, updateNoProtocol.Action = nil, registry.ActionUpdate
		for name, c := range map[string]registry.Change{
			"unknown action":     {Action: "delete", Provider: &registry.Provider{Name: "x"}},
			"bad name":           {Action: registry.ActionRegister, Provider: &registry.Provider{Name: "../x"}},
			"no entrypoints":     noEP,
			"no protocol":        noProtocol,
			"update no protocol": updateNoProtocol,
			"threshold 0":        {Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 0}},
			"untrust nobody":     {Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "nobody"}},
			"untrust last":       {Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "root"}},
		} {
			t.Run(name, func(t *testing.T) {
				_, _, err := r.Propose(ctx, c, "alice")
				codeIs(t, err, refusal.ChangesetInvalid)
			})
		}
	})
	t.Run("history", func(t *testing.T) {
		r, root := setup(t)
		must[*registry.InterfaceResult](t)(r.RegisterInterface(ctx, "cruxible.echo/v1", []byte(`{}`)))
		accept(t, r, Change("acme-echo", "1.0"), root)
		log := must[[]registry.Entry](t)(r.Log(ctx))
		chain := must[[]digest.Digest](t)(r.Chain(ctx))
		want := []string{registry.EventKeyTrusted, registry.EventInterfaceRegistered, registry.EventChangeSetProposed, registry.EventChangeSetApproved, registry.EventPinAccepted}
		if len(log) != len(want) || len(chain) != len(want) {
			t.Fatalf("%d entries, %d hashes: %+v", len(log), len(chain), log)
		}
		for i, e := range log {
			if e.Event != want[i] || e.Seq != int64(i) || e.Hash != chain[i] || (i > 0 && e.Prev != chain[i-1]) {
				t.Errorf("entry %d: %+v", i, e)
			}
		}
		// PinHistory: the same chain and the provider's last pin entry.
		// PinHistory: the same chain, the provider's last pin entry and
		// the approval that accepted it.
		rec, err := r.PinHistory(ctx, "acme-echo")
		if err != nil || len(rec.Chain) != len(chain) || rec.Chain[len(rec.Chain)-1] != chain[len(chain)-1] {
			t.Fatalf("PinHistory: %v, %+v", err, rec)
		}
		if rec.Last == nil || *rec.Last != log[len(log)-1] {
			t.Errorf("PinHistory's last pin entry %+v, want %+v", rec.Last, log[len(log)-1])
		}
		if ap := log[len(log)-2]; len(rec.Approved) != 1 || rec.Approved[0].Seq != ap.Seq || rec.Approved[0].Event != ap.Event || rec.Approved[0].Subject != ap.Subject {
			t.Errorf("PinHistory's approvals %+v, want the entry %+v", rec.Approved, ap)
		}
		if none, err := r.PinHistory(ctx, "acme-other"); err != nil || none.Last != nil || none.Approved != nil {
			t.Errorf("PinHistory of a provider never accepted: %+v %v", none, err)
		}
	})
}
