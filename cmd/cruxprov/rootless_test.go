package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/asuser"
)

// TestContainerRunRootless is an executor who is not root, end to end
// through the CLI (docs/executor.md, "Rootless"): CI pushes a signed
// image as root; a user with subordinate ids trusts the builder, installs
// the provider on that image, approves it, and runs it with rootless
// podman. Where podman cannot apply the cgroup limits (cgroups v1 here)
// the run is refused container_unavailable with a "to fix" line naming
// --unenforced-limits; with it the run goes, and the receipt says which
// limits it went without. No container is left behind.
func TestContainerRunRootless(t *testing.T) {
	for _, b := range []string{"docker-registry", "podman", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s is not installed", b)
		}
	}
	asuser.Require(t, "run the CLI as a user with rootless podman")
	u := asuser.Subid(t, os.Getenv("CRUXPROV_ROOTLESS_USER"))
	baseLayout, baseDigest := imagetest.Base(t)
	base, exe, fx, idx, shim := imageSetup(t, "cruxprov-rootless-cli-")
	host := imagetest.DockerRegistry(t, "", "")
	repo := host + "/acme/echo"
	// An epoch of this run's own: an image the user's podman cannot have.
	epoch := fmt.Sprint(1700000000 + time.Now().UnixNano()%1000000)
	ci := exec.Command(exe, "--home", t.TempDir(), "image", "build", "--wheel", fx.Echo.Path, "--index", idx,
		"--platform", imagetest.Platform, "--base", "oci:"+baseLayout+"@"+baseDigest.String(), "--shim", shim,
		"--push", repo, "--sign-key", filepath.Join(base, "builder.key"), "--builder-id", "https://ci.example/builder", "--quiet")
	ci.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH="+epoch)
	r := runCmd(t, ci)
	if r.code != 0 {
		t.Fatalf("image build --push (CI, as root): %+v", r)
	}
	d := strings.TrimSpace(r.stdout)

	// The user's own directory: its store, registry, keys, ledger.
	own := filepath.Join(base, "user")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name,
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"CRUXPROV_HOME=" + filepath.Join(own, "home"), "XDG_STATE_HOME=" + filepath.Join(own, "state"),
		"CRUXPROV_KEY_PASSWORD=pw"}
	as := func(a ...string) result {
		t.Helper()
		cmd := asuser.CommandInitGroups(u.UID, u.GID, exe, a...)
		cmd.Env, cmd.Dir = env, own
		return runCmd(t, cmd)
	}
	ok := func(what string, a ...string) string {
		t.Helper()
		r := as(a...)
		if r.code != 0 {
			t.Fatalf("%s as %s: %+v", what, u.Name, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	t.Cleanup(func() {
		// The image in the user's own podman storage; not --force: a
		// container of it would be a failure to see, not to hide.
		cmd := asuser.CommandInitGroups(u.UID, u.GID, "/usr/bin/podman", "images", "--quiet", "--no-trunc", "--filter", "reference="+repo)
		cmd.Env, cmd.Dir = env, own
		out, _ := cmd.Output()
		for _, id := range strings.Fields(string(out)) {
			rm := asuser.CommandInitGroups(u.UID, u.GID, "/usr/bin/podman", "rmi", id)
			rm.Env, rm.Dir = env, own
			rm.Run()
		}
	})

	alice := filepath.Join(own, "alice")
	ok("key generate", "key", "generate", "--out", alice, "--quiet")
	ok("key trust alice", "key", "trust", alice+".pub", "--name", "alice", "--quiet")
	cs := ok("key trust the builder", "key", "trust", filepath.Join(base, "builder.pub"), "--name", "ci", "--role", "builder", "--quiet")
	ok("approve the builder", "changeset", "approve", cs, "--key", alice+".key", "--quiet")
	for _, i := range []string{"acme.echo", "acme.diagnostics"} {
		ok("interface register "+i, "interface", "register", i, "--schema", filepath.Join(base, "fx", "interfaces", i+".json"), "--quiet")
	}
	cs = ok("install", "install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", repo+"@"+d, "--python", debian, "--quiet")
	ok("approve the install", "changeset", "approve", cs, "--key", alice+".key", "--quiet")

	input := filepath.Join(own, "in.json")
	token := filepath.Join(own, "token")
	for p, b := range map[string]string{input: `{"rootless": true}`, token: "tok"} {
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, u.UID, u.GID); err != nil {
			t.Fatal(err)
		}
	}
	call := []string{"run", "acme-echo", "echo", "--input", input, "--backend", "container", "--secret", "acme/api-token=@" + token}
	var unenforced []string
	r = as(call...)
	switch {
	case r.code == 0:
		t.Logf("rootless podman applies the limits here")
	case r.code == exitRefused && strings.Contains(r.stderr, "refused: container_unavailable: rootless podman") &&
		strings.Contains(r.stderr, "to fix: cruxprov "+strings.Join(call, " ")+" --unenforced-limits"):
		t.Logf("without the limits, refused: %s", strings.TrimSpace(r.stderr))
		unenforced = []string{"memory", "cpus", "pids"}
		r = as(append(call, "--unenforced-limits")...)
	default:
		t.Fatalf("run as %s: %+v", u.Name, r)
	}
	if r.code != 0 || !strings.Contains(r.stdout, `"rootless":true`) || !strings.Contains(r.stdout, "secret_sha256") {
		t.Fatalf("run as %s: %+v", u.Name, r)
	}

	var doc struct {
		Attempts []struct {
			Intent struct {
				AttemptID  string   `json:"attempt_id"`
				Backend    string   `json:"backend"`
				Unenforced []string `json:"unenforced"`
			} `json:"intent"`
			Outcome *struct {
				Status string `json:"status"`
			} `json:"outcome"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(ok("receipts list", "receipts", "list", "--json")), &doc); err != nil {
		t.Fatal(err)
	}
	last := doc.Attempts[len(doc.Attempts)-1]
	if last.Intent.Backend != "container" || last.Outcome == nil || last.Outcome.Status != "ok" || !slices.Equal(last.Intent.Unenforced, unenforced) {
		t.Errorf("the run's receipt: %+v, want unenforced %q", last, unenforced)
	}
	if table := ok("receipts list", "receipts", "list"); unenforced != nil && !strings.Contains(table, "ok (no memory, cpus, pids limits)") {
		t.Errorf("receipts list does not show the limits the run went without:\n%s", table)
	}
	// This test's containers only (cruxprov-ATTEMPT-…): the user's podman
	// also holds those of other tests running beside this one.
	for _, a := range doc.Attempts {
		ps := asuser.CommandInitGroups(u.UID, u.GID, "/usr/bin/podman", "ps", "--all", "--filter", "name=cruxprov-"+a.Intent.AttemptID, "--format", "{{.Names}}")
		ps.Env, ps.Dir = env, own
		if out, err := ps.Output(); a.Intent.AttemptID == "" || err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("attempt %q: containers left behind: %q %v", a.Intent.AttemptID, out, err)
		}
	}
}
