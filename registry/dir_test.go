package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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
		cs, err := d.Propose(ctx, registrytest.Change("acme-echo", v), "t")
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

func lines(b []byte) [][]byte {
	return bytes.SplitAfter(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// TestTamperRefusals makes each governance refusal of a Dir registry
// happen for real, on its files.
func TestTamperRefusals(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		tamper func(t *testing.T, f *fixture)
		want   refusal.Code
	}{
		{"a tampered byte in the pin's spec", func(t *testing.T, f *fixture) {
			edit(t, f.pinPath(), func(b []byte) []byte { return bytes.Replace(b, []byte(`"2.0"`), []byte(`"2.1"`), 1) })
		}, refusal.SignatureInvalid},
		{"a byte breaking the pin's JSON", func(t *testing.T, f *fixture) {
			edit(t, f.pinPath(), func(b []byte) []byte { return b[1:] })
		}, refusal.RegistryCorrupt},
		{"the pin's revision edited", func(t *testing.T, f *fixture) {
			editPin(t, f, func(m map[string]any) {
				m["revision"] = 7
				m["spec"].(map[string]any)["revision"] = 7
			})
		}, refusal.SignatureInvalid},
		{"an expiry edited under a valid signature", func(t *testing.T, f *fixture) {
			editPin(t, f, func(m map[string]any) {
				m["approvals"].([]any)[0].(map[string]any)["expires"] = "2999-01-01T00:00:00Z"
			})
		}, refusal.SignatureInvalid},
		{"a signature from an untrusted key", func(t *testing.T, f *fixture) {
			mallory := registrytest.NewKey(t, "mallory", registry.RoleApprover)
			editPin(t, f, func(m map[string]any) {
				a := m["approvals"].([]any)[0].(map[string]any)
				a["signer"] = mallory.Key.Digest.String()
			})
		}, refusal.SignerUntrusted},
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
		}, refusal.RegistryCorrupt},
		{"an older pin copied back", func(t *testing.T, f *fixture) {
			os.WriteFile(f.pinPath(), f.pin1, 0o644)
		}, refusal.PinRollback},
		{"the history's tail cut off", func(t *testing.T, f *fixture) {
			edit(t, f.logPath(), func(b []byte) []byte { l := lines(b); return bytes.Join(l[:len(l)-1], nil) })
		}, refusal.RegistryCorrupt},
		{"a history entry deleted", func(t *testing.T, f *fixture) {
			edit(t, f.logPath(), func(b []byte) []byte { l := lines(b); return bytes.Join(append(l[:1:1], l[2:]...), nil) })
		}, refusal.RegistryCorrupt},
		{"history entries reordered", func(t *testing.T, f *fixture) {
			edit(t, f.logPath(), func(b []byte) []byte { l := lines(b); l[1], l[2] = l[2], l[1]; return bytes.Join(l, nil) })
		}, refusal.RegistryCorrupt},
		{"a history entry rewritten", func(t *testing.T, f *fixture) {
			edit(t, f.logPath(), func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"event":"pin-accepted"`), []byte(`"event":"pin-retired"`), 1)
			})
		}, refusal.RegistryCorrupt},
		{"an unknown pin format major", func(t *testing.T, f *fixture) {
			editPin(t, f, func(m map[string]any) { m["format"] = "cruxible.pin/v2" })
		}, refusal.RegistryCorrupt},
		{"the pin deleted", func(t *testing.T, f *fixture) { os.Remove(f.pinPath()) }, refusal.PinUnapproved},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			c.tamper(t, f)
			_, err := registry.VerifyPin(ctx, f.dir, f.state, "acme-echo", time.Now())
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %s", err, c.want)
			}
		})
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
	cs, err := f.dir.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t")
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
	spec := digest.Sum([]byte("spec"))
	exp := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	fmt.Println(string(registry.ApprovalPayload(spec, "acme-echo", 2, &exp)))
	fmt.Println(string(registry.ApprovalPayload(spec, "acme-echo", 1, nil)))
	// Output:
	// {"expires":"2026-01-02T15:04:05Z","provider":"acme-echo","revision":2,"spec":"sha256:d4f02eaafd1a9e9de7d10972ca8e47fa7a985825c3c9c1e249c72683cb3e4f19","type":"cruxible.approval/v1"}
	// {"expires":null,"provider":"acme-echo","revision":1,"spec":"sha256:d4f02eaafd1a9e9de7d10972ca8e47fa7a985825c3c9c1e249c72683cb3e4f19","type":"cruxible.approval/v1"}
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
		cs, err := d.Propose(ctx, registrytest.Change("acme-echo", fmt.Sprintf("1.%d", i)), "b")
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
