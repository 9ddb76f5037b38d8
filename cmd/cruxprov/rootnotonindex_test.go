package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

// TestRootNotOnIndexAdvisesItsFile walks docs/provider-authors.md §5 on
// to governance.md: a provider installed from its own wheel file, its
// index (the author's ../mirror) holding its dependencies only, approved,
// then the threshold raised. verify advises proposing the pin again as
// NAME==VERSION --sha256 HEX from the index, which has no such project:
// the refusal said only "mirror it there or pin another index", never the
// file the pin was installed from. It says to give the root wheel's file
// too now, and that advice, run as printed with the file, proposes it.
func TestRootNotOnIndexAdvisesItsFile(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	run, must, _ := approvingStore(t, w, base, debian)
	keys := filepath.Join(base, "keys")

	// The author's mirror: the runtime, not the provider.
	wheels := filepath.Join(base, "mirror-wheels")
	os.MkdirAll(wheels, 0o755)
	b, err := os.ReadFile(fx.Runtime.Path)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wheels, filepath.Base(fx.Runtime.Path)), b, 0o644)
	mirror := filepath.Join(base, "mirror")
	if r := cruxprov(t, "index", "build", mirror, "--from", wheels, "--quiet"); r.code != 0 {
		t.Fatalf("index build: %+v", r)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(mirror)))
	t.Cleanup(srv.Close)
	url := srv.URL + "/simple/"

	id := strings.TrimSpace(must("install", w.echo, "--platform", "host", "--python", debian, "--index", url, "--no-compile", "--quiet").stdout)
	must("changeset", "approve", id, "--key", filepath.Join(keys, "k.key"))
	must("key", "generate", "--out", filepath.Join(keys, "k2"))
	id = strings.TrimSpace(must("--quiet", "key", "trust", filepath.Join(keys, "k2.pub"), "--role", "approver").stdout)
	must("changeset", "approve", lastWord(id), "--key", filepath.Join(keys, "k.key"))
	id = strings.TrimSpace(must("--quiet", "policy", "set", "--threshold", "2").stdout)
	must("changeset", "approve", lastWord(id), "--key", filepath.Join(keys, "k.key"))

	runLine := func(line string) result {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = base
		cmd.Env = append(append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH")),
			"CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+filepath.Join(base, "state"))
		return runCmd(t, cmd)
	}
	r := run("verify", "acme-echo")
	m := fixRE.FindStringSubmatch(strings.TrimSpace(r.stderr))
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.PinUnapproved)+":") || m == nil ||
		!strings.Contains(m[1], " install acme-echo==1.0.0 --sha256 ") {
		t.Fatalf("verify after the threshold was raised: %+v", r)
	}
	// As advised, from the author's index, which lists no acme-echo.
	r = runLine(strings.Replace(m[1], "--index URL", "--index "+url, 1))
	sum := fx.Echo.SHA256.Hex() // w.echo is the fixture's bytes
	m = fixRE.FindStringSubmatch(strings.TrimSpace(r.stderr))
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.FetchFailed)+": project acme-echo is not on the index ") ||
		!strings.Contains(r.stderr, "or give the root wheel's file (acme_echo-1.0.0-….whl, sha256 "+sum+")") ||
		m == nil || !strings.Contains(m[1], " install WHEEL --sha256 "+sum+" ") {
		t.Fatalf("the advised install, from an index without the provider: %+v", r)
	}
	// The file, as advised, proposes the pin again.
	if f := runLine(strings.Replace(m[1], "WHEEL", w.echo, 1)); f.code != 0 || !strings.Contains(f.stdout, "proposed change-set ") {
		t.Fatalf("the wheel's file, as advised: %+v", f)
	}
}

// lastWord is the last space-separated word of s: the change-set id a
// --quiet proposal prints.
func lastWord(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}
