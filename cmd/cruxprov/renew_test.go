package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApproveRenewsExpired, as an unprivileged operator (uid 65534)
// owning the store: once an approval expired, verify refuses pin_expired
// and advises approving the change-set again, which renews the approval
// (a new one, with its new expiry) and the pin verifies again. Before, the
// approve said "approved already … nothing changed" and "accepted"
// (accepted: true, approvals: 0 in --json), exit 0, and the pin stayed
// expired.
func TestApproveRenewsExpired(t *testing.T) {
	home, keys, as := nobodyOperator(t, "cruxprov-renew-")
	key := filepath.Join(keys, "alice")
	for _, a := range [][]string{{"key", "generate", "--out", key}, {"key", "trust", key + ".pub", "--name", "alice"}} {
		if r := as(a...); r.code != 0 {
			t.Fatalf("%v: %+v", a, r)
		}
	}
	// The proposal (install's, without building an env), then the
	// store handed back to its owner.
	id := proposeEcho(t, home)
	chownTree(t, home)
	if r := as("changeset", "approve", id, "--key", key+".key", "--expires", "2s"); r.code != 0 || !strings.Contains(r.stdout, "accepted: acme-echo at revision 1") {
		t.Fatalf("approve: %+v", r)
	}
	time.Sleep(3 * time.Second)
	r := as("verify", "acme-echo")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: pin_expired: ") {
		t.Fatalf("verify after the expiry: %+v", r)
	}
	fix := "cruxprov changeset approve " + id + " --key KEY"
	if !strings.Contains(r.stderr, "; to fix: "+fix+" --home ") { // the refused command's store
		t.Fatalf("pin_expired advises no renewal: %q", r.stderr)
	}
	// The advice, with the key, and a new expiry.
	r = as("changeset", "approve", id, "--key", key+".key", "--expires", "720h", "--json")
	var doc struct {
		Accepted, Renewed, Already bool
		Approvals, Threshold       int
		Pin                        struct{ Approvals []struct{ Expires time.Time } }
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || !doc.Accepted || !doc.Renewed || doc.Already || doc.Approvals != 1 || doc.Threshold != 1 ||
		len(doc.Pin.Approvals) != 1 || doc.Pin.Approvals[0].Expires.Before(time.Now().Add(719*time.Hour)) {
		t.Fatalf("renew --json: %+v", r)
	}
	if r := as("registry", "log", "--verify"); r.code != 0 || strings.Contains(r.stdout, "not runnable") || strings.Count(r.stdout, "changeset-approved") != 2 {
		t.Fatalf("registry log --verify after the renewal: %+v", r)
	}
	if r := as("verify", "acme-echo"); strings.Contains(r.stderr, "pin_expired") {
		t.Fatalf("verify after the renewal: %+v", r)
	}
	// Approving again now, unexpired, changes nothing and says that
	// --expires was not applied.
	r = as("changeset", "approve", id, "--key", key+".key", "--expires", "1h")
	if r.code != 0 || !strings.Contains(r.stdout, "approved already") || !strings.Contains(r.stdout, "--expires was not applied") || !strings.Contains(r.stdout, "accepted: acme-echo at revision 1") {
		t.Fatalf("approve again, unexpired: %+v", r)
	}
	// --json says it too: expiresApplied false, and the warning.
	r = as("changeset", "approve", id, "--key", key+".key", "--expires", "1h", "--json")
	var again struct {
		Already        bool
		ExpiresApplied *bool `json:"expiresApplied"`
		Warnings       []string
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &again) != nil || !again.Already || again.ExpiresApplied == nil || *again.ExpiresApplied ||
		len(again.Warnings) != 1 || !strings.Contains(again.Warnings[0], "--expires was not applied") {
		t.Fatalf("approve again, unexpired, --json: %+v", r)
	}
}
