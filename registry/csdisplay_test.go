package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestChangeSetDisplayFieldsEdited: a change-set file's proposedAt and
// its approvals' names and times, which neither its id nor a signature
// covers, are held to the history: an edited one is registry_corrupt to
// CheckedChangeSet (changeset show, diff), CheckedChangeSets (changeset
// list) and the next approval (which would carry it into the pin).
// Before, `changeset show` printed it as edited and the approval
// accepted it into the pin.
func TestChangeSetDisplayFieldsEdited(t *testing.T) {
	ctx := context.Background()
	for name, edit := range map[string]func(string) string{
		"proposedAt":    func(y string) string { return replaceValue(t, y, "proposedAt:", "2020-01-01T00:00:00Z") },
		"approval name": func(y string) string { return replaceValue(t, y, "name: alice", "bob") },
		"approval time": func(y string) string { return replaceValue(t, y, "at:", "2020-01-01T00:00:00Z") },
	} {
		t.Run(name, func(t *testing.T) {
			d, _, k, approve := govDir(t, 2, "alice", "bob")
			cs := approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"])
			if _, err := registry.CheckedChangeSet(ctx, d, cs.Metadata.ID); err != nil {
				t.Fatalf("as written: %v", err)
			}
			p := filepath.Join(d.Root(), "changesets", cs.Metadata.ID.Hex()+".yaml")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(edit(string(b))), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = registry.CheckedChangeSet(ctx, d, cs.Metadata.ID)
			wantRefusal(t, err, refusal.RegistryCorrupt)
			if !strings.Contains(err.Error(), "the history") {
				t.Errorf("the refusal does not say what the history holds: %v", err)
			}
			_, err = registry.CheckedChangeSets(ctx, d)
			wantRefusal(t, err, refusal.RegistryCorrupt)
			_, err = d.Approve(ctx, cs.Metadata.ID, k["bob"].Priv, nil)
			wantRefusal(t, err, refusal.RegistryCorrupt)
			if _, err := d.Pin(ctx, "acme-echo"); refusal.CodeOf(err) != refusal.PinUnapproved {
				t.Errorf("a pin was accepted: %v", err)
			}
		})
	}
}

// replaceValue gives the first line of y whose key (after its indent
// and any "- ") begins with key the value value, keeping its indent.
func replaceValue(t *testing.T, y, key, value string) string {
	t.Helper()
	l := strings.Split(y, "\n")
	for i := range l {
		rest := strings.TrimLeft(l[i], " -")
		if strings.HasPrefix(rest, key) {
			k, _, _ := strings.Cut(rest, ":")
			l[i] = l[i][:len(l[i])-len(rest)] + k + ": " + value
			return strings.Join(l, "\n")
		}
	}
	t.Fatalf("no %q in\n%s", key, y)
	return ""
}
