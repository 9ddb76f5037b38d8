package registry_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/canonical"
	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// fixture is a Dir registry with a root key and acme-echo accepted at
// revisions 1 and 2, verified once (so the floor exists), and a copy of
// the revision-1 pin file.
type fixture struct {
	dir   *registry.Dir
	root  registrytest.Key
	state string
	pin1  []byte
}

func newFixture(t *testing.T) *fixture {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: d, root: registrytest.NewKey(t, "root", registry.RoleApprover), state: t.TempDir()}
	if _, err := d.TrustKey(ctx, f.root.Key, "t"); err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"1.0", "2.0"} {
		cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", v), "t")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Approve(ctx, cs.Metadata.ID, f.root.Priv, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := registry.VerifyPin(ctx, d, f.state, "acme-echo", time.Now()); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			f.pin1, _ = os.ReadFile(f.pinPath())
		}
	}
	return f
}

func (f *fixture) pinPath() string { return filepath.Join(f.dir.Root(), "pins", "acme-echo.json") }
func (f *fixture) logPath() string { return filepath.Join(f.dir.Root(), "log.jsonl") }

func edit(t *testing.T, path string, fn func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, fn(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func editPin(t *testing.T, f *fixture, fn func(m map[string]any)) {
	edit(t, f.pinPath(), func(b []byte) []byte {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		fn(m)
		out, _ := json.Marshal(m)
		return out
	})
}

// appendEntry appends e to the history as an attacker can: the chain's
// hashes take no key.
func appendEntry(t *testing.T, f *fixture, e registry.Entry) {
	t.Helper()
	appendEntryAt(t, f.logPath(), e)
}

// appendEntryAt appends e to the history file logPath (appendEntry).
func appendEntryAt(t *testing.T, logPath string, e registry.Entry) {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	l := lines(b)
	var last struct{ Hash string }
	if err := json.Unmarshal(l[len(l)-1], &last); err != nil {
		t.Fatal(err)
	}
	e.Seq, e.At = int64(len(l)), time.Now().UTC()
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte(last.Hash + "\n" + string(raw)))
	line := fmt.Sprintf(`{"v":1,"prev":%q,"hash":"sha256:%x","entry":%s}`+"\n", last.Hash, h, raw)
	if err := os.WriteFile(logPath, append(b, line...), 0o644); err != nil {
		t.Fatal(err)
	}
}

func lines(b []byte) [][]byte {
	return bytes.SplitAfter(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// TestTamperRefusals makes each governance refusal of a Dir registry
// happen for real, on its files.
func TestTamperRefusals(t *testing.T) {
	ctx := context.Background()
	retire := func(t *testing.T, f *fixture) {
		cs, _, err := f.dir.Propose(ctx, registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}}, "t")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.dir.Approve(ctx, cs.Metadata.ID, f.root.Priv, nil); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		tamper  func(t *testing.T, f *fixture)
		want    refusal.Code
		noFloor bool // verified by a verifier that has no floor yet
	}{
		{"a tampered byte in the pin's spec", func(t *testing.T, f *fixture) {
			edit(t, f.pinPath(), func(b []byte) []byte { return bytes.Replace(b, []byte(`"2.0"`), []byte(`"2.1"`), 1) })
		}, refusal.SignatureInvalid, false},
		{"a byte breaking the pin's JSON", func(t *testing.T, f *fixture) {
			edit(t, f.pinPath(), func(b []byte) []byte { return b[1:] })
		}, refusal.RegistryCorrupt, false},
		{"the pin's revision edited", func(t *testing.T, f *fixture) {
			editPin(t, f, func(m map[string]any) {
				m["revision"] = 7
				m["spec"].(map[string]any)["revision"] = 7
			})
		}, refusal.SignatureInvalid, false},
		{"an expiry edited under a valid signature", func(t *testing.T, f *fixture) {
			editPin(t, f, func(m map[string]any) {
				m["approvals"].([]any)[0].(map[string]any)["expires"] = "2999-01-01T00:00:00Z"
			})
		}, refusal.SignatureInvalid, false},
		{"a signature from an untrusted key", func(t *testing.T, f *fixture) {
			mallory := registrytest.NewKey(t, "mallory", registry.RoleApprover)
			editPin(t, f, func(m map[string]any) {
				a := m["approvals"].([]any)[0].(map[string]any)
				a["signer"] = mallory.Key.Digest.String()
			})
		}, refusal.SignerUntrusted, false},
		{"a key added to trust.json without approval", func(t *testing.T, f *fixture) {
			mallory := registrytest.NewKey(t, "mallory", registry.RoleApprover)
			edit(t, filepath.Join(f.dir.Root(), "trust.json"), func(b []byte) []byte {
				var m map[string]any
				json.Unmarshal(b, &m)
				k, _ := json.Marshal(mallory.Key)
				var km any
				json.Unmarshal(k, &km)
				m["keys"] = append(m["keys"].([]any), km)
				m["policy"] = map[string]any{"threshold": 1}
				out, _ := json.Marshal(m)
				return out
			})
		}, refusal.RegistryCorrupt, false},
		// The trust state's digest (what the history's replay checks)
		// covers the keys' digests, not their PEMs: a PEM swapped under a
		// trusted digest made another key's signatures count as the
		// trusted key's (a review's forgery, accepted).
		{"a trusted key's PEM swapped for another key's, with a pin that key signed", func(t *testing.T, f *fixture) {
			forgeWithSwappedPEM(t, f, false)
		}, refusal.RegistryCorrupt, false},
		{"the same, to a verifier without a floor", func(t *testing.T, f *fixture) {
			forgeWithSwappedPEM(t, f, false)
		}, refusal.RegistryCorrupt, true},
		{"the same, the root's PEM swapped too", func(t *testing.T, f *fixture) {
			forgeWithSwappedPEM(t, f, true)
		}, refusal.RegistryCorrupt, false},
		{"an older pin copied back", func(t *testing.T, f *fixture) {
			os.WriteFile(f.pinPath(), f.pin1, 0o644)
		}, refusal.PinRollback, false},
		// The history names the pin it accepted last: a verifier sees an
		// older pin put back on its first run too, and after a retirement
		// (its floor holds the revision it ran, not the retirement's).
		{"an older pin copied back, to a verifier without a floor", func(t *testing.T, f *fixture) {
			os.WriteFile(f.pinPath(), f.pin1, 0o644)
		}, refusal.PinRollback, true},
		{"a retired provider's last pin copied back, to the verifier that ran it", func(t *testing.T, f *fixture) {
			pin2, _ := os.ReadFile(f.pinPath())
			retire(t, f)
			os.WriteFile(f.pinPath(), pin2, 0o644)
		}, refusal.PinRollback, false},
		{"a retired provider's older pin copied back, to a verifier without a floor", func(t *testing.T, f *fixture) {
			retire(t, f)
			os.WriteFile(f.pinPath(), f.pin1, 0o644)
		}, refusal.PinRollback, true},
		// Anyone who can write the registry can append to the chain (its
		// hashes have no key), but not raise an old pin's signed revision:
		// the history's revisions of a provider only go up.
		{"an older pin put back with a history entry appended to match it", func(t *testing.T, f *fixture) {
			os.WriteFile(f.pinPath(), f.pin1, 0o644)
			var p registry.Pin
			json.Unmarshal(f.pin1, &p)
			appendEntry(t, f, registry.Entry{Event: registry.EventPinAccepted, Subject: "acme-echo", Digest: p.SpecDigest, Revision: 1})
		}, refusal.PinRollback, true},
		{"the history's tail cut off", func(t *testing.T, f *fixture) {
			edit(t, f.logPath(), func(b []byte) []byte { l := lines(b); return bytes.Join(l[:len(l)-1], nil) })
		}, refusal.RegistryCorrupt, false},
		{"the history's tail cut off, to a verifier without a floor", func(t *testing.T, f *fixture) {
			edit(t, f.logPath(), func(b []byte) []byte { l := lines(b); return bytes.Join(l[:len(l)-1], nil) })
		}, refusal.RegistryCorrupt, true},
		{"a history entry deleted", func(t *testing.T, f *fixture) {
			edit(t, f.logPath(), func(b []byte) []byte { l := lines(b); return bytes.Join(append(l[:1:1], l[2:]...), nil) })
		}, refusal.RegistryCorrupt, false},
		// The trust replay decodes only the lines that can be governance
		// steps, and any with an escape: a key-untrusted entry spelled
		// with a \u escape is decoded, and refused for its form.
		{"a governance entry appended in another spelling", func(t *testing.T, f *fixture) {
			appendEntry(t, f, registry.Entry{Event: "key-untrusted", Subject: "root", Digest: f.root.Key.Digest, Revision: 1})
			edit(t, f.logPath(), func(b []byte) []byte {
				l := lines(b)
				last := l[len(l)-1]
				// Rehash the line with its event spelled key\u002duntrusted.
				var rec struct {
					Prev  string          `json:"prev"`
					Entry json.RawMessage `json:"entry"`
				}
				if err := json.Unmarshal(last, &rec); err != nil {
					t.Fatal(err)
				}
				raw := bytes.Replace(rec.Entry, []byte(`"key-untrusted"`), []byte(`"key\u002duntrusted"`), 1)
				h := sha256.Sum256([]byte(rec.Prev + "\n" + string(raw)))
				l[len(l)-1] = []byte(fmt.Sprintf(`{"v":1,"prev":%q,"hash":"sha256:%x","entry":%s}`+"\n", rec.Prev, h, raw))
				return bytes.Join(l, nil)
			})
		}, refusal.RegistryCorrupt, true},
		{"history entries reordered", func(t *testing.T, f *fixture) {
			edit(t, f.logPath(), func(b []byte) []byte { l := lines(b); l[1], l[2] = l[2], l[1]; return bytes.Join(l, nil) })
		}, refusal.RegistryCorrupt, false},
		{"a history entry rewritten", func(t *testing.T, f *fixture) {
			edit(t, f.logPath(), func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"event":"pin-accepted"`), []byte(`"event":"pin-retired"`), 1)
			})
		}, refusal.RegistryCorrupt, false},
		{"an unknown pin format major", func(t *testing.T, f *fixture) {
			editPin(t, f, func(m map[string]any) { m["format"] = "cruxible.pin/v2" })
		}, refusal.RegistryCorrupt, false},
		// A pin file lost while the history accepted it is damage, as
		// mutations and gc say, not a pin never approved.
		{"the pin deleted", func(t *testing.T, f *fixture) { os.Remove(f.pinPath()) }, refusal.RegistryCorrupt, false},
		{"the pin deleted, to a verifier without a floor", func(t *testing.T, f *fixture) { os.Remove(f.pinPath()) }, refusal.RegistryCorrupt, true},
		{"a retired provider's pin deleted", func(t *testing.T, f *fixture) {
			retire(t, f)
			os.Remove(f.pinPath())
		}, refusal.RegistryCorrupt, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			c.tamper(t, f)
			state := f.state
			if c.noFloor {
				state = t.TempDir()
			}
			_, err := registry.VerifyPin(ctx, f.dir, state, "acme-echo", time.Now())
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %s", err, c.want)
			}
		})
	}
}

// forgeWithSwappedPEM is an attacker who can write the registry's files
// and holds no trusted key: it puts its own public key's PEM in trust.json
// under the root key's name, role and digest (in its root entry too, when
// root), writes a pin of revision 3 for acme-echo "approved" by the root's
// digest with a signature of its own key, and appends the history entry
// accepting it.
func forgeWithSwappedPEM(t *testing.T, f *fixture, root bool) {
	t.Helper()
	mallory := registrytest.NewKey(t, "mallory", registry.RoleApprover)
	rootDigest := f.root.Key.Digest
	edit(t, filepath.Join(f.dir.Root(), "trust.json"), func(b []byte) []byte {
		var tr registry.Trust
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatal(err)
		}
		for i := range tr.Keys {
			if tr.Keys[i].Digest == rootDigest {
				tr.Keys[i].PEM = mallory.Key.PEM
			}
		}
		if root {
			tr.Root.PEM = mallory.Key.PEM
		}
		out, _ := json.Marshal(&tr)
		return out
	})
	var old registry.Pin
	b, _ := os.ReadFile(f.pinPath())
	if err := json.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	ch := registrytest.Change("acme-echo", "6.6.6")
	ch.Action = registry.ActionUpdate
	spec := registry.Spec{Base: old.SpecDigest, Revision: 3, Changes: []registry.Change{ch}}
	id, err := registry.SpecDigest(&spec)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := f.dir.Chain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sig, err := mallory.Priv.Sign(registry.ApprovalPayload(chain[0], id, "acme-echo", 3, nil))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	pin := registry.Pin{Format: registry.PinFormat, Provider: "acme-echo", Revision: 3, SpecDigest: id, Spec: spec, AcceptedAt: now,
		Approvals: []registry.Approval{{Signer: rootDigest, Name: "root", Signature: base64.StdEncoding.EncodeToString(sig), At: now}}}
	pb, _ := json.Marshal(&pin)
	if err := os.WriteFile(f.pinPath(), pb, 0o644); err != nil {
		t.Fatal(err)
	}
	appendEntry(t, f, registry.Entry{Event: registry.EventPinAccepted, Subject: "acme-echo", Digest: id, Revision: 3})
}

// TestPinFromAnotherRegistryRefused: one key trusted by two registries
// (staging and production). A pin staging accepted, copied into
// production's pins/ with the history entry accepting it appended (the
// chain takes no key), is refused: the approval names the registry it was
// given in. The approval payload did not name it, and production accepted
// a pin it never proposed nor approved, to a verifier with a floor and the
// registry's id pinned (a review's forgery).
func TestPinFromAnotherRegistryRefused(t *testing.T) {
	ctx := context.Background()
	root := registrytest.NewKey(t, "root", registry.RoleApprover)
	open := func() *registry.Dir {
		d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.TrustKey(ctx, root.Key, "t"); err != nil {
			t.Fatal(err)
		}
		return d
	}
	accept := func(d *registry.Dir, v string) {
		cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", v), "t")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Approve(ctx, cs.Metadata.ID, root.Priv, nil); err != nil {
			t.Fatal(err)
		}
	}
	staging, prod := open(), open()
	// The same first pin in both (the same spec digest), then staging's
	// untested second: its base is production's pin too.
	accept(staging, "1.0")
	accept(staging, "2.0-rc")
	accept(prod, "1.0")
	state := t.TempDir()
	if _, err := registry.VerifyPin(ctx, prod, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	chain, err := prod.Chain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(staging.Root(), "pins", "acme-echo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p registry.Pin
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prod.Root(), "pins", "acme-echo.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	appendEntryAt(t, filepath.Join(prod.Root(), "log.jsonl"), registry.Entry{Event: registry.EventPinAccepted, Subject: "acme-echo", Digest: p.SpecDigest, Revision: p.Revision})
	prod2, err := registry.OpenDir(ctx, prod.Root())
	if err != nil {
		t.Fatal(err)
	}
	_, err = registry.VerifyPinFrom(ctx, prod2, chain[0], state, "acme-echo", time.Now())
	if !errors.Is(err, refusal.SignatureInvalid) || !strings.Contains(err.Error(), "in registry "+chain[0].String()) {
		t.Fatalf("staging's pin in production: %v, want signature_invalid naming production's registry", err)
	}
}

// TestRegistryIDMismatchSaysWhatToDo: a verifier that pinned a registry id
// and reads another registry refuses registry_corrupt naming both ids and
// what to do next (DESIGN §2: a refusal says what to do): check the store
// and the id pinned, else restore. It named only the two ids and "a
// registry rewritten from its first entry, or another store", no remedy.
func TestRegistryIDMismatchSaysWhatToDo(t *testing.T) {
	f := newFixture(t)
	want := digest.Sum([]byte("another registry"))
	_, err := registry.VerifyPinFrom(context.Background(), f.dir, want, f.state, "acme-echo", time.Now())
	if !errors.Is(err, refusal.RegistryCorrupt) || !strings.Contains(err.Error(), "this verifier expects registry "+want.String()) {
		t.Fatalf("another registry id: %v, want registry_corrupt naming the id expected", err)
	}
	for _, s := range []string{"check that this is the store whose registry the verifier pinned", "restore the registry from a trusted copy"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal does not say what to do (%q): %v", s, err)
		}
	}
	// A library's refusal names no flag of the command line (#12): an
	// in-process executor has none.
	if strings.Contains(err.Error(), "--") {
		t.Errorf("the refusal names a command-line flag: %v", err)
	}
}

// TestApprovalV1Refused: an approval signed over the payload's v1 form
// (which did not name the registry) is refused, saying so and to approve
// again, not counted.
func TestApprovalV1Refused(t *testing.T) {
	f := newFixture(t)
	var p registry.Pin
	b, _ := os.ReadFile(f.pinPath())
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	v1, err := canonical.Marshal(map[string]any{"type": "cruxible.approval/v1", "spec": p.SpecDigest.String(), "provider": "acme-echo", "revision": p.Revision, "expires": nil})
	if err != nil {
		t.Fatal(err)
	}
	sig, err := f.root.Priv.Sign(v1)
	if err != nil {
		t.Fatal(err)
	}
	editPin(t, f, func(m map[string]any) {
		m["approvals"].([]any)[0].(map[string]any)["signature"] = base64.StdEncoding.EncodeToString(sig)
	})
	_, err = registry.VerifyPin(context.Background(), f.dir, f.state, "acme-echo", time.Now())
	if !errors.Is(err, refusal.SignatureInvalid) || !strings.Contains(err.Error(), "v1 form, which does not name its registry") {
		t.Fatalf("a v1 approval: %v", err)
	}
}

// TestOpenDirChecksHistory: a rewritten history is refused at open.
func TestOpenDirChecksHistory(t *testing.T) {
	f := newFixture(t)
	edit(t, f.logPath(), func(b []byte) []byte { l := lines(b); l[0], l[1] = l[1], l[0]; return bytes.Join(l, nil) })
	_, err := registry.OpenDir(context.Background(), f.dir.Root())
	if !errors.Is(err, refusal.RegistryCorrupt) {
		t.Fatalf("got %v", err)
	}
}

// TestChangeSetFileRoundTrip: the YAML on disk parses back to the same
// change-set, and an edited spec no longer matches its id.
func TestChangeSetFileRoundTrip(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cs, _, err := f.dir.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.dir.Root(), "changesets", cs.Metadata.ID.Hex()+".yaml")
	b, _ := os.ReadFile(p)
	got, err := registry.ParseChangeSet(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Metadata.ID != cs.Metadata.ID || got.Spec.Base != cs.Spec.Base || got.Spec.Revision != 3 {
		t.Fatalf("%+v", got)
	}
	_, err = registry.ParseChangeSet(bytes.Replace(b, []byte("3.0"), []byte("3.1"), 1))
	if !errors.Is(err, refusal.ChangesetInvalid) {
		t.Fatalf("edited spec: %v", err)
	}
	for _, bad := range []string{"apiVersion: cruxible.dev/v2\n", "- a\n", "a: [\n", ""} {
		t.Run(fmt.Sprintf("%q", bad), func(t *testing.T) {
			if _, err := registry.ParseChangeSet([]byte(bad)); !errors.Is(err, refusal.ChangesetInvalid) {
				t.Errorf("%q: %v", bad, err)
			}
		})
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}
}

func ExampleApprovalPayload() {
	reg := digest.Sum([]byte("registry"))
	spec := digest.Sum([]byte("spec"))
	exp := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	fmt.Println(string(registry.ApprovalPayload(reg, spec, "acme-echo", 2, &exp)))
	fmt.Println(string(registry.ApprovalPayload(reg, spec, "acme-echo", 1, nil)))
	// Output:
	// {"expires":"2026-01-02T15:04:05Z","provider":"acme-echo","registry":"sha256:872491a30d60d598962de6e7b834ab76b2aa65fbab102c6ebaaae6acdc238822","revision":2,"spec":"sha256:d4f02eaafd1a9e9de7d10972ca8e47fa7a985825c3c9c1e249c72683cb3e4f19","type":"cruxible.approval/v2"}
	// {"expires":null,"provider":"acme-echo","registry":"sha256:872491a30d60d598962de6e7b834ab76b2aa65fbab102c6ebaaae6acdc238822","revision":1,"spec":"sha256:d4f02eaafd1a9e9de7d10972ca8e47fa7a985825c3c9c1e249c72683cb3e4f19","type":"cruxible.approval/v2"}
}

// BenchmarkVerifyPin is the pin half of what an executor pays before
// every run, on a Dir registry with its floor current.
func BenchmarkVerifyPin(b *testing.B) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(b.TempDir(), "registry"))
	if err != nil {
		b.Fatal(err)
	}
	root := registrytest.NewKey(b, "root", registry.RoleApprover)
	d.TrustKey(ctx, root.Key, "b")
	for i := 0; i < 20; i++ {
		cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", fmt.Sprintf("1.%d", i)), "b")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.Approve(ctx, cs.Metadata.ID, root.Priv, nil); err != nil {
			b.Fatal(err)
		}
	}
	state := b.TempDir()
	now := time.Now()
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", now); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", now); err != nil {
			b.Fatal(err)
		}
	}
}

// TestApproveCrashBeforeHistory: a history that lost an approval's last
// entries (cut by hand, or by a crash of a cruxprov from before the
// journal, which TestMutationCrashes covers) leaves a pin the history
// never accepted. Every verifier refuses it (registry_corrupt),
// and the advice — propose it again and approve it — works.
func TestApproveCrashBeforeHistory(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	// The crash: the last approval's two entries (approved, accepted)
	// never reached the history.
	edit(t, f.logPath(), func(b []byte) []byte { l := lines(b); return bytes.Join(l[:len(l)-2], nil) })
	_, err := registry.VerifyPin(ctx, f.dir, t.TempDir(), "acme-echo", time.Now())
	wantRefusal(t, err, refusal.RegistryCorrupt)
	if !strings.Contains(err.Error(), "propose it again and approve it") {
		t.Errorf("no advice: %v", err)
	}
	cs, _, err := f.dir.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.dir.Approve(ctx, cs.Metadata.ID, f.root.Priv, nil); err != nil {
		t.Fatal(err)
	}
	p, err := registry.VerifyPin(ctx, f.dir, t.TempDir(), "acme-echo", time.Now())
	if err != nil || p.Revision != 3 {
		t.Fatalf("after proposing again: %v %+v", err, p)
	}
}

// TestVerifyWhileApproving: a verifier reading while an operator approves
// new revisions sees one whole approval or the one before, never the pin
// written and its history entry not yet (Dir.ReadLock): no spurious
// refusal in an executor that runs while the operator works.
func TestVerifyWhileApproving(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	done := make(chan error, 1)
	go func() {
		for i := 3; i < 23; i++ {
			cs, _, err := f.dir.Propose(ctx, registrytest.Change("acme-echo", fmt.Sprintf("%d.0", i)), "t")
			if err == nil {
				_, err = f.dir.Approve(ctx, cs.Metadata.ID, f.root.Priv, nil)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	// A second handle, as an executor's process has its own.
	reader, err := registry.OpenDir(ctx, f.dir.Root())
	if err != nil {
		t.Fatal(err)
	}
	verified := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if verified == 0 {
				t.Fatal("no verification ran during the approvals")
			}
			t.Logf("%d verifications during 20 approvals", verified)
			return
		default:
		}
		if _, err := registry.VerifyPin(ctx, reader, "", "acme-echo", time.Now()); err != nil {
			t.Fatalf("verification %d during an approval: %v", verified, err)
		}
		verified++
	}
}

// TestLockWaitEndsWithContext: a reader or a writer waiting for the
// registry's lock gives up when its context ends, and the lock it was
// waiting for is not left taken.
func TestLockWaitEndsWithContext(t *testing.T) {
	f := newFixture(t)
	held, err := os.OpenFile(filepath.Join(f.dir.Root(), ".lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(held.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func(ctx context.Context) error{
		"verify": func(ctx context.Context) error {
			_, err := registry.VerifyPin(ctx, f.dir, "", "acme-echo", time.Now())
			return err
		},
		"propose": func(ctx context.Context) error {
			_, _, err := f.dir.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t")
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			if err := call(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want the context's deadline", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("gave up after %v", d)
			}
		})
	}
	held.Close()
	// The abandoned waiters take the lock and let it go.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := f.dir.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t"); err != nil {
		t.Fatalf("after the waits: %v", err)
	}
}

// TestUnparseableChangeSetFile: a change-set file that does not parse
// (a newer format, a file copied in) stops every mutation, since each
// loads them all; the refusal names the file and what to do about it,
// once (no code printed twice). And a registry with a history whose
// pins/ directory is gone names nothing it could be trusted for: refused.
func TestUnparseableChangeSetFile(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	bad := filepath.Join(f.dir.Root(), "changesets", strings.Repeat("0", 63)+"1.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: cruxible.dev/v1\nkind: ChangeSet\nfuture: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := f.dir.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t")
	wantRefusal(t, err, refusal.RegistryCorrupt)
	if msg := err.Error(); !strings.Contains(msg, bad) || !strings.Contains(msg, "move it out of changesets/") || strings.Count(msg, "changeset_invalid") > 0 || strings.Count(msg, "registry_corrupt") != 1 {
		t.Errorf("the refusal: %v", err)
	}
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.dir.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t"); err != nil {
		t.Fatalf("with the file moved out: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(f.dir.Root(), "pins")); err != nil {
		t.Fatal(err)
	}
	_, err = registry.NamedBy(ctx, f.dir)
	wantRefusal(t, err, refusal.RegistryCorrupt)
}

// TestUnsignedPinSaysWhatAndWhatToDo: a pin file edited where its
// approvals' signatures cover it (its revision, its spec, its provider's
// name) is refused signature_invalid naming what differs and what the
// registry's owner does about it. It said "its spec, revision or name is
// not what was signed (spec digest X, recorded X)": the same digest twice
// for a revision edited, and no next step (found walking executor.md as
// an executor, with the revision of an accepted pin's file edited).
func TestUnsignedPinSaysWhatAndWhatToDo(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, f *fixture)
		want   string
	}{
		{"the revision alone", func(t *testing.T, f *fixture) {
			editPin(t, f, func(m map[string]any) { m["revision"] = 7 })
		}, "it says revision 7, its signed spec revision 2"},
		{"a byte of the spec", func(t *testing.T, f *fixture) {
			edit(t, f.pinPath(), func(b []byte) []byte { return bytes.Replace(b, []byte(`"2.0"`), []byte(`"2.1"`), 1) })
		}, "its spec hashes to sha256:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			c.tamper(t, f)
			_, err := registry.VerifyPin(ctx, f.dir, f.state, "acme-echo", time.Now())
			var r *refusal.Error
			if !errors.As(err, &r) || r.Code != refusal.SignatureInvalid {
				t.Fatalf("got %v, want signature_invalid", err)
			}
			for _, want := range []string{c.want, "pins/acme-echo.json was changed after it was approved",
				"restores the registry from a trusted copy, or proposes the provider again and approves it"} {
				if !strings.Contains(r.Detail, want) {
					t.Errorf("the refusal does not say %q: %s", want, r.Detail)
				}
			}
		})
	}
}
