package registry

import (
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestDocumentsRefuseAKeySaidTwice: a pin, a trust file or a history entry
// whose object has a key twice, or two cases of one field's key, was read
// with the last value kept and the first dropped (what another reader of
// the bytes, a reviewer's jq among them, may read the other way round);
// it is registry_corrupt. A change-set's YAML refused a key twice already
// (yaml.v3), but not two cases of one.
func TestDocumentsRefuseAKeySaidTwice(t *testing.T) {
	const pin = `{"format":"cruxible.pin/v1","provider":"a","revision":1,"specDigest":null,"spec":{"base":null,"revision":1,"changes":[]},"approvals":[],"acceptedAt":"2026-01-01T00:00:00Z"}`
	if _, err := ParsePin([]byte(pin)); err != nil {
		t.Fatalf("the clean pin: %v", err)
	}
	for _, c := range []struct{ name, doc, want string }{
		{"pin, a key twice", strings.Replace(pin, `"revision":1,`, `"revision":1,"revision":2,`, 1), `the document has the key "revision" twice`},
		{"pin, two cases", strings.Replace(pin, `"provider":"a",`, `"provider":"a","Provider":"b",`, 1), `the document has the keys "provider" and "Provider"`},
		{"pin, a stray close after it", pin + "\n}", "data after the JSON value"},
		{"pin, nested", strings.Replace(pin, `"spec":{"base":null,`, `"spec":{"base":null,"BASE":null,`, 1), `the object at spec has the keys "base" and "BASE"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePin([]byte(c.doc))
			if refusal.CodeOf(err) != refusal.RegistryCorrupt || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParsePin = %v, want registry_corrupt saying %q", err, c.want)
			}
		})
	}
	t.Run("change-set, two cases", func(t *testing.T) {
		cs := "apiVersion: cruxible.changeset/v1\nkind: ChangeSet\nKind: ChangeSet\n"
		_, err := ParseChangeSet([]byte(cs))
		if refusal.CodeOf(err) != refusal.ChangesetInvalid || !strings.Contains(err.Error(), `"Kind" and "kind"`) {
			t.Fatalf("ParseChangeSet = %v, want changeset_invalid naming both keys", err)
		}
	})
}
