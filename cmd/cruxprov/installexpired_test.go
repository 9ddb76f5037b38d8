package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInstallOnExpiredPinAdvisesRenewal: install run again, nothing
// changed, on a pin whose approval expired (pin_expired) advises what
// verify advises, the renewal (changeset approve of the accepted pin's
// change-set, the same typed remedy, rendered for this store), and
// changeset diff of the new change-set says the same. Before, its note
// said that approving the new change-set (a new revision of the same pin)
// makes the pin run again. The advice, run as printed with the key, makes
// the pin verify; the change-set install proposed is then rejected, as
// the note says, and the pin still verifies at its revision.
func TestInstallOnExpiredPinAdvisesRenewal(t *testing.T) {
	base, w, run, must := govWalkStore(t)
	key := filepath.Join(base, "keys", "k.key")
	install := func() result {
		t.Helper()
		return must("install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile")
	}
	idOf := func(r result) string {
		t.Helper()
		return strings.Fields(strings.SplitAfter(r.stdout, "proposed change-set ")[1])[0]
	}
	first := idOf(install())
	must("changeset", "approve", first, "--key", key, "--expires", "2s")
	time.Sleep(3 * time.Second)
	v := run("verify", "acme-echo")
	wantRefusal(t, v, "pin_expired", "verify once the approval expired")
	renew := "cruxprov changeset approve " + first + " --key KEY --home " + filepath.Join(base, "home")
	if !strings.HasSuffix(strings.TrimSpace(v.stderr), "; to fix: "+renew) {
		t.Fatalf("verify's advice: %q, want %q", v.stderr, renew)
	}
	r := install()
	id := idOf(r)
	const lead = ". Renew the expired approval instead, which makes the accepted pin run again as it is: "
	for what, out := range map[string]string{"install again": r.stdout, "changeset diff": must("changeset", "diff", id).stdout} {
		if !strings.Contains(out, "does not run now: pin_expired: ") || !strings.Contains(out, lead+renew+"; and reject this change-set") || strings.Contains(out, "Approving this change-set") {
			t.Errorf("%s on an expired pin: %q\nwant it to advise %q", what, out, renew)
		}
	}
	// The advice as printed, with the key.
	_, fix, ok := strings.Cut(r.stdout, lead)
	fix, _, _ = strings.Cut(fix, "; and reject this change-set")
	if !ok {
		t.Fatalf("install advises no renewal: %q", r.stdout)
	}
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(fix, "KEY", key))
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "CRUXPROV_KEY_PASSWORD=pw")
	if f := runCmd(t, cmd); f.code != 0 || !strings.Contains(f.stdout, "accepted: acme-echo at revision 1") {
		t.Fatalf("the renewal as install printed it (%s): %+v", fix, f)
	}
	if r := must("verify", "acme-echo"); !strings.Contains(r.stdout, "ok acme-echo revision 1") {
		t.Fatalf("verify after the renewal: %+v", r)
	}
	must("changeset", "reject", id, "--reason", "the renewal made the pin run")
	if r := must("verify", "acme-echo"); !strings.Contains(r.stdout, "ok acme-echo revision 1") {
		t.Fatalf("verify after the rejection: %+v", r)
	}
}

// TestInstallJSONNotes: install --json carries the notes the text prints
// after the change-set, as "notes" ([] when there are none): install again
// on a pin whose approval expired has the renewal advice there, the very
// line the text prints. The document had no such key: a pipeline reading
// it never saw the advice.
func TestInstallJSONNotes(t *testing.T) {
	base, w, _, must := govWalkStore(t)
	key := filepath.Join(base, "keys", "k.key")
	install := func(json bool) result {
		t.Helper()
		args := []string{"install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile"}
		if json {
			args = append(args, "--json")
		}
		return must(args...)
	}
	type doc struct {
		Schema    string    `json:"schema"`
		Notes     *[]string `json:"notes"`
		ChangeSet struct {
			Metadata struct {
				ID string `json:"id"`
			} `json:"metadata"`
		} `json:"changeSet"`
	}
	decode := func(r result) doc {
		t.Helper()
		var d doc
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.Schema != "cruxprov.install/v2" || d.Notes == nil {
			t.Fatalf("install --json: %v, schema %q, notes %v: %s", err, d.Schema, d.Notes, r.stdout)
		}
		return d
	}
	first := decode(install(true))
	if len(*first.Notes) != 0 {
		t.Errorf("a first install has notes: %q", *first.Notes)
	}
	must("changeset", "approve", first.ChangeSet.Metadata.ID, "--key", key, "--expires", "2s")
	time.Sleep(3 * time.Second)
	again := decode(install(true))
	renew := "cruxprov changeset approve " + first.ChangeSet.Metadata.ID + " --key KEY --home " + filepath.Join(base, "home")
	if len(*again.Notes) != 1 || !strings.Contains((*again.Notes)[0], "does not run now: pin_expired: ") || !strings.Contains((*again.Notes)[0], ": "+renew+"; and reject this change-set") {
		t.Fatalf("install --json again on an expired pin: notes %q, want the renewal %q", *again.Notes, renew)
	}
	// The text prints the same line.
	if text := install(false).stdout; !strings.Contains(text, (*again.Notes)[0]+"\n") {
		t.Errorf("the text does not print the note of --json %q: %q", (*again.Notes)[0], text)
	}
}
