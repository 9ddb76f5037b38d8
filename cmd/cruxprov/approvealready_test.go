package main

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// noPassword runs the built binary on home with no CRUXPROV_KEY_PASSWORD
// and no terminal (stdin is /dev/null): a command that asks for a key's
// password fails, exit 64 "no key password".
func noPassword(t *testing.T, home string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "CRUXPROV_KEY_PASSWORD=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	return runCmd(t, cmd)
}

// withHeader writes the key file src again at dst (mode 0600), its PEM
// header Cruxprov-Public-Key set to the public key file pub's, or taken
// out where pub is "" (a key file as key generate wrote it before the
// header, or cosign writes it).
func withHeader(t *testing.T, src, pub, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Headers["Cruxprov-Public-Key"] == "" {
		t.Fatalf("%s: no Cruxprov-Public-Key header", src)
	}
	blk.Headers = nil
	if pub != "" {
		pb, err := os.ReadFile(pub)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := pem.Decode(pb)
		blk.Headers = map[string]string{"Cruxprov-Public-Key": base64.StdEncoding.EncodeToString(p.Bytes)}
	}
	if err := os.WriteFile(dst, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestApproveAlreadyWithoutPassword: changeset approve by a key whose
// approval stands (the change-set it accepted, still what the registry
// holds) asked for the key's password, then said "approved already": the
// .key file held no public key, so which key it was took the password to
// find. Key generate's files now name it (docs/governance.md, "Keys"):
// the same approve says "approved already", the same words and the same
// JSON as a key file without the name gives with its password, and asks
// for none. A key file without it (an earlier cruxprov's), one another
// user could have written (group-writable), and a key that has not
// approved the change-set still ask for the password first.
func TestApproveAlreadyWithoutPassword(t *testing.T) {
	home, keys, run := keyedHome(t, "a", "b")
	akey := filepath.Join(keys, "a.key")
	id := proposeQuiet(t, run, "key", "trust", filepath.Join(keys, "b.pub"))
	if r := run("changeset", "approve", id, "--key", akey); r.code != 0 || !strings.Contains(r.stdout, "approved "+id) {
		t.Fatalf("approve: %+v", r)
	}
	r := noPassword(t, home, "changeset", "approve", id, "--key", akey)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "approved already "+id+", with this key's approval: nothing changed") || r.stderr != "" {
		t.Fatalf("approve again without a password: %+v", r)
	}
	without := filepath.Join(keys, "a-noheader.key")
	withHeader(t, akey, "", without)
	if r := noPassword(t, home, "changeset", "approve", id, "--key", without); r.code != exitUsage || !strings.Contains(r.stderr, "no key password") {
		t.Errorf("a key file without its public key, no password: %+v", r)
	}
	old := run("changeset", "approve", id, "--key", without, "--json")
	if old.code != 0 {
		t.Fatalf("a key file without its public key, with its password: %+v", old)
	}
	now := noPassword(t, home, "changeset", "approve", id, "--key", akey, "--json")
	oj, _ := json.Marshal(jsonDoc(t, old))
	nj, _ := json.Marshal(jsonDoc(t, now))
	if string(oj) != string(nj) || jsonDoc(t, now)["already"] != true {
		t.Errorf("without a password, approve says\n%s\nand with it, from a key file without the name\n%s", nj, oj)
	}
	if err := os.Chmod(akey, 0o620); err != nil {
		t.Fatal(err)
	}
	if r := noPassword(t, home, "changeset", "approve", id, "--key", akey); r.code != exitUsage || !strings.Contains(r.stderr, "no key password") {
		t.Errorf("a group-writable key file, no password: %+v", r)
	}
	if err := os.Chmod(akey, 0o600); err != nil {
		t.Fatal(err)
	}
	next := proposeQuiet(t, run, "policy", "set", "--threshold", "2")
	if r := noPassword(t, home, "changeset", "approve", next, "--key", akey); r.code != exitUsage || !strings.Contains(r.stderr, "no key password") {
		t.Errorf("a change-set this key has not approved, no password: %+v", r)
	}
}

// TestApproveSwappedKeyHeaderRefused: a key file whose header names
// another key's public key (edited, or copied from that key's file) is
// refused once its password opens it, signer_untrusted, and nothing is
// signed; the same key file without the header signs.
func TestApproveSwappedKeyHeaderRefused(t *testing.T) {
	_, keys, run := keyedHome(t, "a", "b", "c")
	swapped := filepath.Join(keys, "a-swapped.key")
	withHeader(t, filepath.Join(keys, "a.key"), filepath.Join(keys, "b.pub"), swapped)
	// The header names a trusted approver key (b), so nothing refuses it
	// before the password: the key sealed in the file (a) does.
	if r := run("changeset", "approve", proposeQuiet(t, run, "key", "trust", filepath.Join(keys, "b.pub")), "--key", filepath.Join(keys, "a.key")); r.code != 0 {
		t.Fatalf("trusting b: %+v", r)
	}
	id := proposeQuiet(t, run, "key", "trust", filepath.Join(keys, "c.pub"))
	r := run("changeset", "approve", id, "--key", swapped)
	wantRefusal(t, r, "signer_untrusted", "a key file naming another key")
	if !strings.Contains(r.stderr, "Cruxprov-Public-Key") {
		t.Errorf("the refusal does not say what is wrong: %+v", r)
	}
	if r := run("--json", "changeset", "show", id); r.code != 0 || !strings.Contains(r.stdout, `"state": "proposed"`) {
		t.Errorf("after the refusal, the change-set: %+v", r)
	}
	without := filepath.Join(keys, "a-noheader.key")
	withHeader(t, filepath.Join(keys, "a.key"), "", without)
	if r := run("changeset", "approve", id, "--key", without); r.code != 0 || !strings.Contains(r.stdout, "approved "+id) {
		t.Errorf("the key file without the header: %+v", r)
	}
}

// TestApproveWrongKeyRefusedBeforePassword: walking governance.md as two
// operators, an approval with a key the registry does not trust (bob's,
// before his trust was approved), or by a trusted key of a change-set
// accepted without it, asked for the key's password and then refused;
// the key file names its public key (its Cruxprov-Public-Key header), so
// the registry's refusal of that key is said first, as "approved
// already" is, with no password (and with --json, the refusal's one
// document).
func TestApproveWrongKeyRefusedBeforePassword(t *testing.T) {
	home, keys, run := keyedHome(t, "a", "b")
	bkey := filepath.Join(keys, "b.key")
	id := proposeQuiet(t, run, "key", "trust", filepath.Join(keys, "b.pub"))
	r := noPassword(t, home, "changeset", "approve", id, "--key", bkey)
	wantRefusal(t, r, "signer_untrusted", "an untrusted key, no password")
	if strings.Contains(r.stderr, "no key password") || !strings.Contains(r.stderr, "before its password") {
		t.Errorf("an untrusted key: the refusal is not said before the password: %+v", r)
	}
	j := noPassword(t, home, "--json", "changeset", "approve", id, "--key", bkey)
	if doc := jsonDoc(t, j); j.code != exitRefused || doc["refused"] == nil {
		t.Errorf("an untrusted key, --json: %+v", j)
	}
	if r := run("changeset", "approve", id, "--key", filepath.Join(keys, "a.key")); r.code != 0 {
		t.Fatalf("a approves b's trust: %+v", r)
	}
	// b is trusted now, by a change-set it did not approve: nothing to
	// sign, said without the password.
	r = noPassword(t, home, "changeset", "approve", id, "--key", bkey)
	wantRefusal(t, r, "changeset_invalid", "b approving the change-set that trusted it")
	if !strings.Contains(r.stderr, "there is nothing more to approve") {
		t.Errorf("b approving the change-set that trusted it: %+v", r)
	}
}
