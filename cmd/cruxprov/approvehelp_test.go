package main

import (
	"strings"
	"testing"
)

// TestApproveHelpNamesWhatItSigns: changeset approve --help says what an
// approval signs, as docs/governance.md's payload does: the registry's id
// too (it said "{spec digest, provider, revision, expires}", DESIGN §8's
// list, leaving out what keeps an approval from counting in another
// registry that trusts the same key).
func TestApproveHelpNamesWhatItSigns(t *testing.T) {
	r := cruxprov(t, "changeset", "approve", "--help")
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	out := strings.Join(strings.Fields(r.stdout), " ")
	if !strings.Contains(out, "Signs {registry id, spec digest, provider, revision, expires}") {
		t.Errorf("changeset approve --help does not name every member of the approval payload:\n%s", r.stdout)
	}
}
