package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/python"
)

// TestLockAndEnvRequiresDist: a root wheel whose METADATA requires what
// its lock does not pin (absent, or at a version the specifier excludes)
// is refused lock_invalid by lock resolve and env create, which leaves no
// env; requirements whose marker excludes the platform, or that apply only
// with an extra, are not the lock's to meet.
func TestLockAndEnvRequiresDist(t *testing.T) {
	fx, idx := fixtureindex.Serve(t, t.TempDir())
	echo := members(t, fx.Echo.Path)
	// acmeEcho is acme-echo 1.0.0 (its code, manifest and lock) whose
	// METADATA declares requires.
	acmeEcho := func(t *testing.T, requires ...string) string {
		files := map[string]string{}
		for n, b := range echo {
			if !strings.HasSuffix(n, ".dist-info/RECORD") && !strings.HasSuffix(n, ".dist-info/METADATA") {
				files[n] = string(b)
			}
		}
		md := "Metadata-Version: 2.1\nName: acme-echo\nVersion: 1.0.0\nRequires-Python: >=3.9\n"
		for _, r := range requires {
			md += "Requires-Dist: " + r + "\n"
		}
		files["DI/METADATA"] = md
		return wheeltest.Write(t, t.TempDir(), "acme_echo-1.0.0-py3-none-any.whl", files)
	}
	const plat = "cp312-manylinux_2_39_x86_64"
	for _, tc := range []struct {
		name     string
		requires []string
		// want: substrings of the lock_invalid detail; none = accepted.
		want []string
		// inspect: inspect refuses it too (a requirement without a marker).
		inspect bool
	}{
		{name: "absent", requires: []string{"cruxible-provider-runtime==" + python.RuntimeVersion, "httpx==0.27.2"}, inspect: true,
			want: []string{`acme-echo 1.0.0 requires`, `"httpx==0.27.2", but the lock has no httpx for `, "uv export --format pylock.toml", "cruxprov package embed"}},
		{name: "absent where its marker holds", requires: []string{"cruxible-provider-runtime==" + python.RuntimeVersion, `httpx==0.27.2; python_version >= "3.9"`},
			want: []string{`"httpx==0.27.2; python_version >= \"3.9\"", but the lock has no httpx for `}},
		{name: "version outside the specifier", requires: []string{"cruxible-provider-runtime>=9.2"}, inspect: true,
			want: []string{`"cruxible-provider-runtime>=9.2", but the lock pins cruxible-provider-runtime ` + python.RuntimeVersion + ` for `}},
		{name: "marker excludes the platform, extras only", requires: []string{
			"Cruxible_Provider.Runtime==0.*", `pywin32>=306; sys_platform == "win32"`, `httpx; extra == "http"`, `rich; python_version < "3.9"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := acmeEcho(t, tc.requires...)
			check := func(what string, r result) {
				t.Helper()
				if tc.want == nil {
					if r.code != 0 {
						t.Errorf("%s refused: %+v", what, r)
					}
					return
				}
				if r.code != exitRefused || !strings.Contains(r.stderr, "lock_invalid") {
					t.Errorf("%s: want lock_invalid (exit 78), got %+v", what, r)
					return
				}
				for _, s := range tc.want {
					if !strings.Contains(r.stdout+r.stderr, s) {
						t.Errorf("%s: output lacks %q:\n%s%s", what, s, r.stdout, r.stderr)
					}
				}
			}
			r := cruxprov(t, "lock", "resolve", "--wheel", w, "--platform", plat)
			check("lock resolve", r)
			if tc.want != nil && !strings.Contains(r.stdout, plat+": refused: lock_invalid:") {
				t.Errorf("lock resolve names no refused platform:\n%s", r.stdout)
			}
			r = cruxprov(t, "lock", "resolve", "--wheel", w, "--platform", plat, "--json")
			var doc struct {
				Platforms []struct {
					Refused *struct{ Code string } `json:"refused"`
				} `json:"platforms"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Platforms) != 1 || (doc.Platforms[0].Refused != nil) != (tc.want != nil) ||
				tc.want != nil && doc.Platforms[0].Refused.Code != "lock_invalid" {
				t.Errorf("lock resolve --json: %v %+v", err, r)
			}
			if r := cruxprov(t, "inspect", w); (r.code != 0) != tc.inspect || tc.inspect && !strings.Contains(r.stderr, "lock_invalid") {
				t.Errorf("inspect (refused: %v): %+v", tc.inspect, r)
			}
			if _, err := os.Stat(envPython); err != nil {
				t.Skipf("no %s", envPython)
			}
			home := testdir.New(t)
			r = cruxprov(t, "--home", home, "env", "create", "--wheel", w, "--platform", "host", "--python", envPython, "--index", idx)
			check("env create", r)
			var envs []string // the env directories (beside them: a seal and an index each)
			all, _ := filepath.Glob(filepath.Join(home, "envs", "[^.]*"))
			for _, e := range all {
				if fi, err := os.Stat(e); err == nil && fi.IsDir() {
					envs = append(envs, e)
				}
			}
			if tc.want != nil && len(envs) != 0 {
				t.Errorf("a refused env create left %v", envs)
			}
			if tc.want == nil && len(envs) != 1 {
				t.Errorf("envs: %v", envs)
			}
		})
	}
}
