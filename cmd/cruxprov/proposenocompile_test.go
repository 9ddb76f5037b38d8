package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

// TestProposeAdviceKeepsNoCompile: the advice to propose a provider
// again (remedy propose, rendered as an install) of a pin made without
// bytecode (install --no-compile) did not say --no-compile, and bytecode
// is part of an env's identity (its digest): followed as printed, it
// proposed other envs than the pin's. It now carries it ("no_bytecode"
// under --json, and "noBytecode", the key it had, beside it while the
// document is at v1), and the install it renders proposes the very
// change-set that was rejected, byte for byte the same spec.
func TestProposeAdviceKeepsNoCompile(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	run, must, _ := approvingStore(t, w, base, debian)
	id := strings.TrimSpace(must("install", w.echo, "--platform", "host", "--python", debian, "--index", w.url, "--no-compile", "--quiet").stdout)
	must("changeset", "reject", id, "--reason", "not yet")
	r := run("changeset", "approve", id, "--key", filepath.Join(base, "keys", "k.key"))
	wantRefusal(t, r, string(refusal.ChangesetInvalid), "approve of a rejected change-set")
	if !strings.Contains(r.stderr, "; to fix: cruxprov install acme-echo==1.0.0 ") || !strings.Contains(r.stderr, " --no-compile") {
		t.Fatalf("the advice does not propose the pin's envs, made without bytecode: %+v", r)
	}
	var doc struct {
		Refused struct {
			Remedy struct {
				Action     string `json:"action"`
				NoBytecode bool   `json:"no_bytecode"`
				Was        bool   `json:"noBytecode"`
			} `json:"remedy"`
		} `json:"refused"`
	}
	if j := run("changeset", "approve", id, "--key", filepath.Join(base, "keys", "k.key"), "--json"); json.Unmarshal([]byte(j.stdout), &doc) != nil ||
		doc.Refused.Remedy.Action != string(refusal.ActionPropose) || !doc.Refused.Remedy.NoBytecode || !doc.Refused.Remedy.Was {
		t.Errorf("--json: want the propose remedy with no_bytecode (and noBytecode, v1's): %+v", j)
	}
	r.stderr = strings.ReplaceAll(r.stderr, "--index URL", "--index "+w.url)
	f := runFix(t, r, base, "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+filepath.Join(base, "state"))
	if f.code != 0 || !strings.Contains(f.stdout, "proposed change-set "+id+" ") {
		t.Fatalf("the advice as printed proposes another change-set than %s: %+v", id, f)
	}
}
