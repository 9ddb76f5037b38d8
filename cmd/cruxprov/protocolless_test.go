package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProtocolLessRegistry: a registry an older cruxprov wrote
// (registry/testdata/protocol-less: acme-echo's pin and an open update,
// neither naming a protocol range, which a proposal may no longer leave
// out) is listed by changeset list, and verify refuses its pin
// protocol_unsupported, exit 78, in one line with what to do, in text
// and in --json: the range is required of a new proposal (registry
// validateChange), not of what a registry holds already.
func TestProtocolLessRegistry(t *testing.T) {
	home := t.TempDir()
	if err := os.CopyFS(filepath.Join(home, "registry"), os.DirFS(filepath.Join("..", "..", "registry", "testdata", "protocol-less", "registry"))); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(home, "state"))
	run := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	r := run("changeset", "list", "--json")
	var list struct {
		ChangeSets []struct {
			Metadata struct{ ID string }
			Status   struct{ State string }
		}
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil {
		t.Fatalf("changeset list --json: %+v", r)
	}
	states := map[string]string{}
	for _, cs := range list.ChangeSets {
		states[cs.Metadata.ID] = cs.Status.State
	}
	const (
		pin  = "sha256:2b402f2627b118450d8343aeb37fb5a5938ea1e4041403a24a99b4415fac8ab8"
		open = "sha256:f073f4514cc710faa550406ec8efdd3d4f7ba8be58bd2401e76c5f909aaf6776"
	)
	if len(states) != 2 || states[pin] != "approved" || states[open] != "proposed" {
		t.Fatalf("changeset list: %v, want %s approved and %s proposed", states, pin, open)
	}
	if r := run("changeset", "list"); r.code != 0 || !strings.Contains(r.stdout, "proposed") {
		t.Errorf("changeset list: %+v", r)
	}

	r = run("verify", "acme-echo", "--entrypoint", "echo")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: protocol_unsupported: provider acme-echo (revision 1): its pin names no protocol range") ||
		!strings.Contains(r.stderr, "to fix: cruxprov install acme-echo==1.0.0 --sha256 ") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("verify of a pin without protocol: %+v", r)
	}
	r = run("verify", "acme-echo", "--entrypoint", "echo", "--json")
	var doc struct {
		Refused struct {
			Code   string
			Remedy struct{ Action, Target string }
		}
	}
	if r.code != exitRefused || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Refused.Code != "protocol_unsupported" || doc.Refused.Remedy.Action != "propose" ||
		!strings.HasPrefix(doc.Refused.Remedy.Target, "acme-echo==1.0.0@sha256:") {
		t.Errorf("verify --json of a pin without protocol: %+v", r)
	}

	// The open proposal without protocol cannot be approved: its pin
	// would be refused as above. Refused before the key's password is
	// asked for; install proposes it again with its range.
	key := filepath.Join("..", "..", "registry", "testdata", "protocol-less", "alice.key")
	r = run("changeset", "approve", open, "--key", key)
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: changeset_invalid: change-set "+open+" registers provider acme-echo with no protocol range") ||
		!strings.Contains(r.stderr, "to fix: cruxprov install acme-echo==1.0.1 --sha256 ") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("approve of a proposal without protocol: %+v", r)
	}
	if r := run("changeset", "list", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"proposed"`) {
		t.Errorf("after the refused approval: %+v", r)
	}
}
