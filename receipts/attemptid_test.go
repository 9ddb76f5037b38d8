package receipts

import (
	"path/filepath"
	"regexp"
	"testing"
)

// generatedID is the form docs/receipts.md gives an attempt id Begin makes.
var generatedID = regexp.MustCompile(`^att_[0-9a-f]{32}$`)

// TestGeneratedAttemptIDIsDocumented: an intent without an attempt id is
// given one of the documented form, `att_` and 32 hex digits, as invoke's
// executors make them (it was the 32 digits alone), each its own, and the
// strict scan reads them back.
func TestGeneratedAttemptIDIsDocumented(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	l := openT(t, path)
	seen := map[string]bool{}
	for range 3 {
		d := begin(t, l, testIntent("", "", "in"))
		if !generatedID.MatchString(d.AttemptID) || seen[d.AttemptID] {
			t.Fatalf("generated attempt id %q: want a new att_ and 32 hex digits (docs/receipts.md)", d.AttemptID)
		}
		seen[d.AttemptID] = true
	}
	l.Close()
	res := scanT(t, path)
	if len(res.Orphans) != 3 {
		t.Fatalf("orphans %+v", res.Orphans)
	}
	for _, a := range res.Orphans {
		if !seen[a.Intent.AttemptID] {
			t.Fatalf("scanned %q, not one Begin gave", a.Intent.AttemptID)
		}
	}
}
