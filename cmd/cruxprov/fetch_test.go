package main

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/internal/fixtures"
)

// fetchFixture writes two small wheels, builds a static index of them
// with `cruxprov index build`, serves it on loopback, and writes a lock
// whose URLs name another host (as a lock made against a public index
// does). It returns the index URL, the lock path and the wheels' sha256.
func fetchFixture(t *testing.T) (indexURL, lock string, sums []string) {
	t.Helper()
	return fetchFixtureWith(t, func(h http.Handler) http.Handler { return h })
}

// fetchFixtureWith is fetchFixture with the file server wrapped by wrap.
func fetchFixtureWith(t *testing.T, wrap func(http.Handler) http.Handler) (indexURL, lock string, sums []string) {
	t.Helper()
	wheels, mirror := t.TempDir(), t.TempDir()
	var b strings.Builder
	b.WriteString("lock-version = \"1.0\"\ncreated-by = \"test\"\nrequires-python = \">=3.9\"\n")
	for _, name := range []string{"alpha", "beta_pkg"} {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, m := range []struct{ n, body string }{
			{name + "/__init__.py", "x = 1\n"},
			{name + "-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\nRequires-Python: >=3.9\n\n"},
			{name + "-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n"},
		} {
			w, _ := zw.CreateHeader(&zip.FileHeader{Name: m.n, Method: zip.Store})
			w.Write([]byte(m.body))
		}
		zw.Close()
		fn := name + "-1.0-py3-none-any.whl"
		os.WriteFile(filepath.Join(wheels, fn), buf.Bytes(), 0o644)
		s := sha256.Sum256(buf.Bytes())
		h := hex.EncodeToString(s[:])
		sums = append(sums, h)
		fmt.Fprintf(&b, "\n[[packages]]\nname = %q\nversion = \"1.0\"\nindex = \"https://pypi.example.invalid/simple/\"\n\n[[packages.wheels]]\nname = %q\nurl = \"https://files.pypi.example.invalid/packages/%s\"\nsize = %d\nhashes = { sha256 = %q }\n",
			strings.ReplaceAll(name, "_", "-"), fn, fn, buf.Len(), h)
	}
	r := cruxprov(t, "index", "build", mirror, "--from", wheels, "--json")
	if r.code != 0 {
		t.Fatalf("index build: %+v", r)
	}
	var built struct {
		Schema   string `json:"schema"`
		Projects int    `json:"projects"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &built); err != nil || built.Schema != "cruxprov.index.build/v1" || built.Projects != 2 {
		t.Fatalf("index build output: %s %v", r.stdout, err)
	}
	srv := httptest.NewServer(wrap(http.FileServer(http.Dir(mirror))))
	t.Cleanup(srv.Close)
	lock = filepath.Join(t.TempDir(), "pylock.toml")
	os.WriteFile(lock, []byte(b.String()), 0o644)
	sort.Strings(sums)
	return srv.URL + "/simple/", lock, sums
}

func fetchBlobs(t *testing.T, home string) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(home, "blobs", "sha256"))
	out := []string{}
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

const fetchTestPlatform = "cp311-manylinux_2_36_x86_64"

func TestFetchCLI(t *testing.T) {
	idx, lock, sums := fetchFixture(t)
	home := t.TempDir()
	r := cruxprov(t, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx, "--home", home, "--json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("fetch: %+v", r)
	}
	var out struct {
		Schema     string `json:"schema"`
		Downloaded int    `json:"downloaded"`
		Wheels     []struct {
			URL    string `json:"url"`
			Cached bool   `json:"cached"`
		} `json:"wheels"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Schema != "cruxprov.fetch/v1" || out.Downloaded != 2 {
		t.Fatalf("fetch output %s: %v", r.stdout, err)
	}
	for _, w := range out.Wheels {
		if !strings.HasPrefix(w.URL, strings.TrimSuffix(idx, "simple/")) {
			t.Errorf("fetched from %s, not the pinned mirror", w.URL)
		}
	}
	if got := fetchBlobs(t, home); strings.Join(got, ",") != strings.Join(sums, ",") {
		t.Fatalf("store holds %v, want %v", got, sums)
	}
	// Offline after a first fetch: served from the store, no index needed.
	r = cruxprov(t, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--offline", "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, "2 already in the store") {
		t.Fatalf("offline: %+v", r)
	}
	// Offline on an empty store is a refusal.
	r = cruxprov(t, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--offline", "--home", t.TempDir(), "--json")
	var ref struct {
		Refused struct{ Code string } `json:"refused"`
	}
	if r.code != 78 || json.Unmarshal([]byte(r.stdout), &ref) != nil || ref.Refused.Code != "offline_miss" {
		t.Fatalf("offline miss: %+v", r)
	}

	// gc: nothing references the blobs (no seal, no pin) so they go; a
	// dry run only lists them.
	r = cruxprov(t, "gc", "--dry-run", "--home", home, "--json")
	var gc struct {
		Schema  string   `json:"schema"`
		Removed []string `json:"removed"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &gc) != nil || gc.Schema != "cruxprov.gc/v1" || len(gc.Removed) != 2 {
		t.Fatalf("gc --dry-run: %+v", r)
	}
	if len(fetchBlobs(t, home)) != 2 {
		t.Fatal("gc --dry-run removed blobs")
	}
	// A seal that names one blob keeps it.
	os.WriteFile(filepath.Join(home, "envs", "00.seal.json"), []byte(`{"resolution":{"packages":[{"sha256":"sha256:`+sums[0]+`"}]}}`), 0o444)
	if r = cruxprov(t, "gc", "--home", home); r.code != 0 {
		t.Fatalf("gc: %+v", r)
	}
	if got := fetchBlobs(t, home); len(got) != 1 || got[0] != sums[0] {
		t.Fatalf("after gc: %v", got)
	}
}

func TestFetchCLIRefusals(t *testing.T) {
	idx, lock, _ := fetchFixture(t)
	// A mirror that lists other bytes for a file than the lock pins.
	bad := filepath.Join(t.TempDir(), "pylock.toml")
	b, _ := os.ReadFile(lock)
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "hashes = ") {
			lines[i] = `hashes = { sha256 = "` + strings.Repeat("ab", 32) + `" }`
			break
		}
	}
	os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o644)
	home := t.TempDir()
	r := cruxprov(t, "fetch", "--lock", bad, "--platform", fetchTestPlatform, "--index", idx, "--home", home)
	if r.code != 78 || !strings.HasPrefix(r.stderr, "refused: hash_mismatch:") {
		t.Fatalf("hash mismatch: %+v", r)
	}
	if strings.Contains(r.stderr, "pypi.example.invalid") {
		t.Errorf("the refusal names the lock's URL: %s", r.stderr)
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"no index", []string{"fetch", "--lock", lock, "--platform", fetchTestPlatform}},
		{"no platform", []string{"fetch", "--lock", lock, "--index", idx}},
		{"wheel and lock", []string{"fetch", "--lock", lock, "--wheel", lock, "--platform", fetchTestPlatform, "--index", idx}},
		{"bad index", []string{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", "ftp://x/"}},
		{"index build without --from", []string{"index", "build", t.TempDir()}},
		{"gc argument", []string{"gc", "now"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if r := cruxprov(t, tt.args...); r.code != 64 {
				t.Errorf("exit %d, want 64: %+v", r.code, r)
			}
		})
	}
	// Credentials in --index never appear in output.
	withPW := strings.Replace(idx, "http://", "http://user:hunter2@", 1)
	r = cruxprov(t, "fetch", "--lock", bad, "--platform", fetchTestPlatform, "--index", withPW, "--home", t.TempDir(), "--json")
	if r.code != 78 || strings.Contains(r.stdout+r.stderr, "hunter2") {
		t.Errorf("credentials leaked or wrong exit: %+v", r)
	}
}

// TestFetchSIGINT: a real SIGINT in the middle of downloads stops the
// fetch promptly and leaves no partial blob or temp file in the store.
func TestFetchSIGINT(t *testing.T) {
	started := make(chan struct{}, 8)
	stop := make(chan struct{})
	defer close(stop)
	idx, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, ".whl") {
				h.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Length", "100000")
			w.Write([]byte("PK"))
			w.(http.Flusher).Flush()
			started <- struct{}{}
			select { // drip nothing more until the client goes away
			case <-r.Context().Done():
			case <-stop:
			}
		})
	})
	home := t.TempDir()
	cmd := exec.Command(bin, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx, "--home", home)
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-started
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("exit after SIGINT: %v (%s)", err, se.String())
	}
	if got := fetchBlobs(t, home); len(got) != 0 {
		t.Errorf("store holds %v after SIGINT", got)
	}
	if ents, _ := os.ReadDir(filepath.Join(home, "tmp")); len(ents) != 0 {
		t.Errorf("staging debris: %v", ents)
	}
}

// TestFetchWheelFixtures: fetch --wheel reads the root wheel's embedded
// lock (its URLs name the fixtures' public index) and fetches from a
// mirror built by index.Build, for two platforms.
func TestFetchWheelFixtures(t *testing.T) {
	fx := fixtures.ForTest(t, fixtures.Options{})
	idx := t.TempDir()
	if _, err := index.Build(context.Background(), idx, filepath.Dir(fx.Runtime.Path)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(idx)))
	defer srv.Close()
	home := t.TempDir()
	for _, plat := range []string{"cp311-manylinux_2_36_x86_64", "cp312-musllinux_1_2_x86_64"} {
		r := cruxprov(t, "fetch", "--wheel", fx.Native.Path, "--platform", plat, "--index", srv.URL+"/simple/", "--home", home, "--json")
		var out struct {
			Wheels []struct{ Filename string } `json:"wheels"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || len(out.Wheels) < 2 {
			t.Fatalf("%s: %+v", plat, r)
		}
	}
	// The runtime is shared; each platform added its own native lib.
	if got := fetchBlobs(t, home); len(got) != 3 {
		t.Errorf("store holds %d blobs, want 3 (runtime + two native libs): %v", len(got), got)
	}
}

// TestFetchTLSAndCredentials: an HTTPS mirror whose CA only --ca-bundle
// names, behind basic auth given by netrc or the environment; without the
// bundle or the credentials the fetch is refused, and no secret is printed.
func TestFetchTLSAndCredentials(t *testing.T) {
	var srv *httptest.Server
	_, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "ci" || p != "s3cr3t-pw" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		}))
		return h
	})
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	netrc := filepath.Join(t.TempDir(), "netrc")
	os.WriteFile(netrc, []byte("machine 127.0.0.1 login ci password s3cr3t-pw\n"), 0o600)
	idx := srv.URL + "/simple/"
	run := func(env []string, args ...string) result {
		cmd := exec.Command(bin, append([]string{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx, "--home", t.TempDir()}, args...)...)
		cmd.Env = append(os.Environ(), append([]string{"NETRC=" + filepath.Join(t.TempDir(), "none")}, env...)...)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return result{so.String(), se.String(), code}
	}
	for _, tt := range []struct {
		name string
		env  []string
		args []string
		code int
	}{
		{"netrc", []string{"NETRC=" + netrc}, []string{"--ca-bundle", ca}, 0},
		{"env", []string{"CRUXPROV_INDEX_USERNAME=ci", "CRUXPROV_INDEX_PASSWORD=s3cr3t-pw"}, []string{"--ca-bundle", ca}, 0},
		{"no bundle", []string{"NETRC=" + netrc}, nil, 78},
		{"no credentials", nil, []string{"--ca-bundle", ca}, 78},
		{"wrong password", []string{"CRUXPROV_INDEX_USERNAME=ci", "CRUXPROV_INDEX_PASSWORD=nope-pw"}, []string{"--ca-bundle", ca}, 78},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run(tt.env, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d: %+v", r.code, tt.code, r)
			}
			if strings.Contains(r.stdout+r.stderr, "s3cr3t") || strings.Contains(r.stdout+r.stderr, "nope-pw") {
				t.Errorf("a password was printed: %+v", r)
			}
		})
	}
}
