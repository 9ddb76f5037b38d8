package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestImageBuildWithoutRuntimeRefused: image build of a provider whose
// lock resolves no runtime (cruxible-provider-runtime) is refused
// runtime_missing, exit 78, one stderr line (and with --json the refusal
// document), before the base is read or anything is written or pushed:
// the registry of the base and the push gets no request, and the output
// layout's directory stays empty. Every run of such an image is refused
// runtime_missing (TestContainerRunWithoutRuntimeRefused); it was built,
// signed, written and pushed, exit 0, and a CI pipeline went on with it.
func TestImageBuildWithoutRuntimeRefused(t *testing.T) {
	dir := t.TempDir()
	bare, err := fixtures.BuildBare(filepath.Join(dir, "bare"), fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	priv, _, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "builder.key")
	if err := os.WriteFile(key, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	shim := imagetest.Shim(t)
	for _, asJSON := range []bool{false, true} {
		args := []string{"--home", filepath.Join(dir, "home"), "image", "build", "--wheel", bare.Path, "--offline",
			"--platform", imagetest.Platform, "--base", host + "/debian@sha256:" + strings.Repeat("ab", 32),
			"--shim", shim, "--output", "oci:" + out, "--push", host + "/acme/bare:1.0.0",
			"--sign-key", key, "--builder-id", "https://ci.example/builder"}
		if asJSON {
			args = append(args, "--json")
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000")
		r := runCmd(t, cmd)
		prefix := "refused: " + string(refusal.RuntimeMissing) + ": "
		if r.code != exitRefused || !strings.HasPrefix(r.stderr, prefix) || strings.Count(r.stderr, "\n") != 1 ||
			!strings.Contains(r.stderr, "cruxible-provider-runtime") || !strings.Contains(r.stderr, "docs/provider-authors.md") {
			t.Fatalf("image build of a provider without the runtime (--json %v): %+v, want exit %d and one line %q…", asJSON, r, exitRefused, prefix)
		}
		if asJSON {
			var doc struct {
				Refused struct{ Code, Detail string } `json:"refused"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Refused.Code != string(refusal.RuntimeMissing) ||
				"refused: "+doc.Refused.Code+": "+doc.Refused.Detail+"\n" != r.stderr {
				t.Errorf("--json: stdout %q (%v), want the refusal document of %q", r.stdout, err, r.stderr)
			}
		} else if r.stdout != "" {
			t.Errorf("stdout %q, want nothing", r.stdout)
		}
		if n := requests.Load(); n != 0 {
			t.Errorf("the registry got %d requests, want none", n)
		}
		if ents, err := os.ReadDir(out); err != nil || len(ents) != 0 {
			t.Errorf("the output layout's directory: %v %v, want it empty", ents, err)
		}
	}
}

// TestInstallWithoutRuntimeRefused: install of a provider whose lock
// resolves no runtime is refused runtime_missing, exit 78, one stderr line
// (with --json the refusal document), before anything is built or
// proposed: the change-sets stay none and the store holds no env. It was
// built and proposed with a warning, and the approved pin was one every
// run refused runtime_missing.
func TestInstallWithoutRuntimeRefused(t *testing.T) {
	dir := t.TempDir()
	bare, err := fixtures.BuildBare(filepath.Join(dir, "bare"), fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if r := cruxprov(t, "--home", home, "interface", "register", "acme.bare", "--schema", filepath.Join(dir, "bare", "interfaces", "acme.bare.json"), "--quiet"); r.code != 0 {
		t.Fatalf("interface register: %+v", r)
	}
	for _, asJSON := range []bool{false, true} {
		args := []string{"--home", home, "install", bare.Path, "--offline", "--platform", "host", "--python", envPython, "--no-compile"}
		if asJSON {
			args = append(args, "--json")
		}
		r := cruxprov(t, args...)
		prefix := "refused: " + string(refusal.RuntimeMissing) + ": "
		if r.code != exitRefused || !strings.HasPrefix(r.stderr, prefix) || strings.Count(r.stderr, "\n") != 1 ||
			!strings.Contains(r.stderr, "cruxible-provider-runtime") || !strings.Contains(r.stderr, "nothing was built or proposed") {
			t.Fatalf("install of a provider without the runtime (--json %v): %+v, want exit %d and one line %q…", asJSON, r, exitRefused, prefix)
		}
		if asJSON {
			var doc struct {
				Refused struct{ Code, Detail string } `json:"refused"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Refused.Code != string(refusal.RuntimeMissing) {
				t.Errorf("--json: stdout %q (%v), want the refusal document", r.stdout, err)
			}
		} else if r.stdout != "" {
			t.Errorf("stdout %q, want nothing", r.stdout)
		}
	}
	var list struct{ ChangeSets []any }
	if r := cruxprov(t, "--home", home, "changeset", "list", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list.ChangeSets) != 0 {
		t.Errorf("changeset list after the refused installs: %+v, want none", r)
	}
	// The interpreter's probe (.interpreters) is remembered, as by any
	// command that ran it; no env, staged or sealed.
	if envs, _ := filepath.Glob(filepath.Join(home, "envs", "[^.]*")); len(envs) != 0 {
		t.Errorf("the refused installs left %v", envs)
	}
}
