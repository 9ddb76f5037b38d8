package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/platform"
)

func TestPlatformListCLI(t *testing.T) {
	r := cruxprov(t, "platform", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "cp312-manylinux_2_39_x86_64") || !strings.Contains(r.stdout, "cp39-musllinux_1_1_aarch64") {
		t.Fatalf("%+v", r)
	}
	r = cruxprov(t, "platform", "list", "--json")
	var doc struct {
		Schema    string `json:"schema"`
		Platforms []struct {
			ID string `json:"id"`
		} `json:"platforms"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 || doc.Schema != "cruxprov.platform.list/v1" || len(doc.Platforms) < 300 {
		t.Fatalf("%v %+v", err, r.code)
	}
	if r := cruxprov(t, "platform", "list", "extra"); r.code != 64 {
		t.Errorf("extra arg: %+v", r)
	}
}

// TestPlatformListIsTheListOnly: platform list prints its header and a
// row a preset on stdout and nothing else, as every other list does (env,
// key, provider, changeset, interface, receipts list); a count line after
// the rows ("420 presets; …") was one more row to a script reading them.
// --json is the document alone.
func TestPlatformListIsTheListOnly(t *testing.T) {
	presets := platform.Presets()
	r := cruxprov(t, "platform", "list")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || r.stderr != "" || len(lines) != 1+len(presets) || !strings.HasPrefix(lines[0], "ID ") {
		t.Fatalf("want the header and %d rows: %d lines, last %q, stderr %q", len(presets), len(lines), lines[len(lines)-1], r.stderr)
	}
	for i, l := range lines[1:] {
		if f := strings.Fields(l); len(f) != 5 || f[0] != presets[i] {
			t.Errorf("row %d is not preset %s's: %q", i+1, presets[i], l)
		}
	}
	r = cruxprov(t, "platform", "list", "--json")
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || r.code != 0 || r.stderr != "" || dec.More() {
		t.Errorf("--json: %v %+v", err, r)
	}
}

func TestPlatformShowCLI(t *testing.T) {
	r := cruxprov(t, "platform", "show", "cp311-win_amd64")
	if r.code != 0 || !strings.Contains(r.stdout, `"nt"`) || !strings.Contains(r.stdout, "cp311-cp311-win_amd64") {
		t.Fatalf("%+v", r)
	}
	if r := cruxprov(t, "platform", "show", "cp27-linux_x86_64"); r.code != 78 || !strings.Contains(r.stderr, "platform_unsupported") {
		t.Errorf("unknown: %+v", r)
	}
	if r := cruxprov(t, "platform", "show"); r.code != 64 {
		t.Errorf("no name: %+v", r)
	}
	py := "/root/.pyenv/versions/3.11.7/bin/python3.11"
	if _, err := os.Stat(py); err == nil {
		r := cruxprov(t, "platform", "show", "host", "--python", py, "--json")
		var doc struct {
			Platform struct {
				ID          string `json:"id"`
				Interpreter string `json:"interpreter"`
			} `json:"platform"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 || !strings.HasPrefix(doc.Platform.ID, "cp311-") || doc.Platform.Interpreter != py {
			t.Errorf("host: %v %+v", err, r)
		}
	}
}

// TestLockResolveFixtures resolves the fixture providers' embedded locks
// for every platform their wheels cover, and shows the gap for one they
// do not cover.
func TestLockResolveFixtures(t *testing.T) {
	dir := t.TempDir()
	set, err := fixtures.Build(dir, fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	native := set.Native.Path
	covered := "cp312-manylinux_2_17_x86_64,cp312-manylinux_2_28_aarch64,cp312-musllinux_1_2_x86_64,cp312-macosx_14_0_arm64,cp312-win_amd64"
	r := cruxprov(t, "lock", "resolve", "--wheel", native, "--platform", covered)
	if r.code != 0 {
		t.Fatalf("covered platforms: %+v", r)
	}
	for _, want := range []string{"acme-native-lib 1.0.0", "py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64", "py3-none-win_amd64", "resolution_digest sha256:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	// macOS x86_64 is not covered: the table still shows every platform,
	// the gap is named, and the exit is 78.
	r = cruxprov(t, "lock", "resolve", "--wheel", native, "--platform", "cp312-manylinux_2_17_x86_64,cp312-macosx_13_0_x86_64")
	if r.code != 78 || !strings.Contains(r.stdout, "✗ no_compatible_wheel") || !strings.Contains(r.stdout, "cp312-manylinux_2_17_x86_64: 2 packages") ||
		!strings.Contains(r.stderr, "refused: no_compatible_wheel: package acme-native-lib") {
		t.Errorf("uncovered platform: %+v", r)
	}
	r = cruxprov(t, "lock", "resolve", "--wheel", native, "--platform", "cp312-manylinux_2_17_x86_64,cp312-macosx_13_0_x86_64", "--json")
	var doc struct {
		Schema    string `json:"schema"`
		Refused   *struct{ Code, Detail string }
		Platforms []struct {
			Platform         string  `json:"platform"`
			ResolutionDigest *string `json:"resolution_digest"`
			Refused          *struct{ Code, Detail string }
			Outcomes         []struct {
				Name, Filename, Code string
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 78 {
		t.Fatalf("json: %v %+v", err, r)
	}
	if doc.Schema != "cruxprov.lock.resolve/v1" || doc.Refused == nil || doc.Refused.Code != "no_compatible_wheel" || len(doc.Platforms) != 2 ||
		doc.Platforms[0].ResolutionDigest == nil || doc.Platforms[1].Refused == nil || doc.Platforms[1].Outcomes[0].Code != "no_compatible_wheel" {
		t.Errorf("json doc: %+v", doc)
	}
	// The digest is the same whichever way the lock is given.
	lockFile := filepath.Join(dir, "pylock.toml")
	if err := os.WriteFile(lockFile, set.Native.Lock, 0o644); err != nil {
		t.Fatal(err)
	}
	a := cruxprov(t, "lock", "resolve", "--wheel", native, "--platform", "cp312-manylinux_2_17_x86_64", "--json")
	b := cruxprov(t, "lock", "resolve", "--lock", lockFile, "--platform", "cp312-manylinux_2_17_x86_64", "--json")
	if digestOf(t, a.stdout) == "" || digestOf(t, a.stdout) != digestOf(t, b.stdout) {
		t.Errorf("digests differ: %s vs %s", a.stdout, b.stdout)
	}
	// A platform file from 'platform show --json' works like the preset.
	pf := filepath.Join(dir, "p.json")
	if err := os.WriteFile(pf, []byte(cruxprov(t, "platform", "show", "cp312-manylinux_2_17_x86_64", "--json").stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	c := cruxprov(t, "lock", "resolve", "--lock", lockFile, "--platform-file", pf, "--json")
	if digestOf(t, c.stdout) != digestOf(t, a.stdout) {
		t.Errorf("platform file: %+v", c)
	}
	// A wheel without an embedded lock.
	if r := cruxprov(t, "lock", "resolve", "--wheel", set.Runtime.Path, "--platform", "cp312-win_amd64"); r.code != 78 || !strings.Contains(r.stderr, "lock_missing") {
		t.Errorf("no embedded lock: %+v", r)
	}
}

func digestOf(t *testing.T, stdout string) string {
	t.Helper()
	var doc struct {
		Platforms []struct {
			ResolutionDigest string `json:"resolution_digest"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || len(doc.Platforms) == 0 {
		t.Fatalf("%v: %s", err, stdout)
	}
	return doc.Platforms[0].ResolutionDigest
}

func TestLockResolveUsageAndRefusals(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("lock-version = \"1.0\"\ncreated-by = \"t\"\nextras = [\"fast\"]\npackages = []\n"), 0o644)
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("lock-version = \"1.0\"\npackages = []\n"), 0o644)
	v2 := filepath.Join(dir, "v2.toml")
	os.WriteFile(v2, []byte("lock-version = \"2.0\"\ncreated-by = \"t\"\npackages = []\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no platform", []string{"lock", "resolve", "--lock", good}, 64, "--platform"},
		{"no lock or wheel", []string{"lock", "resolve", "--platform", "cp312-win_amd64"}, 64, "--wheel"},
		{"lock and wheel", []string{"lock", "resolve", "--lock", good, "--wheel", good, "--platform", "cp312-win_amd64"}, 64, "not both"},
		{"unknown extra", []string{"lock", "resolve", "--lock", good, "--platform", "cp312-win_amd64", "--extra", "slow"}, 64, "slow"},
		{"empty platform", []string{"lock", "resolve", "--lock", good, "--platform", "cp312-win_amd64,"}, 64, "empty platform"},
		{"lock missing", []string{"lock", "resolve", "--lock", filepath.Join(dir, "none.toml"), "--platform", "cp312-win_amd64"}, 64, "no such file"},
		{"lock invalid", []string{"lock", "resolve", "--lock", bad, "--platform", "cp312-win_amd64"}, 78, "lock_invalid"},
		{"lock version 2", []string{"lock", "resolve", "--lock", v2, "--platform", "cp312-win_amd64"}, 78, "lock_version_unsupported"},
		{"unknown platform", []string{"lock", "resolve", "--lock", good, "--platform", "cp312-solaris"}, 78, "platform_unsupported"},
		{"platform file not a platform", []string{"lock", "resolve", "--lock", good, "--platform-file", good}, 78, "platform_unsupported"},
		// The refusal names the file: with several, "platform file: …" did not say which.
		{"platform file named", []string{"lock", "resolve", "--lock", good, "--platform", "cp312-win_amd64", "--platform-file", bad}, 78, "platform_unsupported: platform file " + bad + ": "},
		{"extra spelled otherwise", []string{"lock", "resolve", "--lock", good, "--platform", "cp312-win_amd64", "--extra", "FAST"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cruxprov(t, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("%v: %+v", tc.args, r)
			}
		})
	}
}

// TestLockFlagNotARegularFile: fetch and env create refuse a --lock that
// is a directory with lock_missing, as lock resolve does; they used to
// exit 1 with a bare "read D: is a directory".
func TestLockFlagNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range [][]string{{"fetch"}, {"env", "create"}} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			r := cruxprov(t, append(cmd, "--lock", dir, "--platform", fetchTestPlatform, "--offline", "--json")...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "not a regular file") {
				t.Errorf("%v: %+v", cmd, r)
			}
		})
	}
}

// TestLockResolveRedactsURLs: a lock whose wheel URLs carry a credential
// (a private index's user:token@) is resolved without printing it; lock
// resolve --json used to print every url verbatim.
func TestLockResolveRedactsURLs(t *testing.T) {
	_, lock, _ := fetchFixture(t)
	b, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	cred := filepath.Join(t.TempDir(), "pylock.toml")
	if err := os.WriteFile(cred, []byte(strings.ReplaceAll(string(b), "url = \"https://", "url = \"https://user:SEKRET@")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, j := range []string{"--json", "--quiet"} {
		t.Run(j, func(t *testing.T) {
			r := cruxprov(t, "lock", "resolve", "--lock", cred, "--platform", fetchTestPlatform, j)
			if r.code != 0 || strings.Contains(r.stdout+r.stderr, "SEKRET") || (j == "--json" && !strings.Contains(r.stdout, "user:xxxxx@")) {
				t.Errorf("%s: %+v", j, r)
			}
		})
	}
}

// TestLockErrorsNeverPrintSecrets: a lock whose URL carries a credential
// is refused without printing it; a bad escape, an unparseable URL, a
// non-http scheme and a VCS source printed the URL verbatim.
func TestLockErrorsNeverPrintSecrets(t *testing.T) {
	const head = "lock-version = \"1.0\"\ncreated-by = \"t\"\nrequires-python = \">=3.9\"\n\n[[packages]]\nname = \"a\"\nversion = \"1.0\"\n"
	const sha = "hashes = { sha256 = \"97a580f79f45eaea31fb43cf7dd287dc66ccf6ac6e2f9287526f67fca6d17724\" }\n"
	dir := t.TempDir()
	for i, tc := range []struct{ name, body string }{
		{"bad escape", "\n[[packages.wheels]]\nurl = \"https://user:SEKRET@h.example/files/a-1.0-py3-none-any%zz.whl\"\n" + sha},
		{"unparseable url", "\n[[packages.wheels]]\nurl = \"https://user:SEKRET@[::1/a-1.0-py3-none-any.whl\"\n" + sha},
		{"non-http scheme", "\n[[packages.wheels]]\nurl = \"ftp://user:SEKRET@h.example/a-1.0-py3-none-any.whl\"\n" + sha},
		{"vcs source", "vcs = { type = \"git\", url = \"https://user:SEKRET@github.com/x/a.git\", commit-id = \"0123456789abcdef0123456789abcdef01234567\" }\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lock := filepath.Join(dir, fmt.Sprintf("l%d.toml", i))
			if err := os.WriteFile(lock, []byte(head+tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"lock", "resolve", "--lock", lock, "--platform", fetchTestPlatform, "--json"},
				{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--offline"},
			} {
				t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
					r := cruxprov(t, args...)
					if r.code != exitRefused || strings.Contains(r.stdout+r.stderr, "SEKRET") {
						t.Errorf("lock %d %v: %+v", i, args[:2], r)
					}
				})
			}
		})
	}
}
