package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/store"
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
	return fetchFixturePadded(t, wrap, 0)
}

// fetchFixturePadded is fetchFixtureWith with pad more (incompressible)
// bytes in each wheel.
func fetchFixturePadded(t *testing.T, wrap func(http.Handler) http.Handler, pad int) (indexURL, lock string, sums []string) {
	t.Helper()
	padding := make([]byte, pad)
	rand.Read(padding)
	wheels, mirror := t.TempDir(), t.TempDir()
	var b strings.Builder
	b.WriteString("lock-version = \"1.0\"\ncreated-by = \"test\"\nrequires-python = \">=3.9\"\n")
	for _, name := range []string{"alpha", "beta_pkg"} {
		fn := name + "-1.0-py3-none-any.whl"
		whl := wheeltest.Build(t, fn, map[string]string{
			name + "/__init__.py": "x = 1\n",
			"DI/METADATA":         "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\nRequires-Python: >=3.9\n\n",
			name + "/padding.bin": string(padding),
		})
		os.WriteFile(filepath.Join(wheels, fn), whl, 0o644)
		buf := bytes.NewBuffer(whl)
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
	if err := json.Unmarshal([]byte(r.stdout), &built); err != nil || built.Schema != "cruxprov.index.build/v2" || built.Projects != 2 {
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
	r, err := fetchSIGINT(t)
	if r.code == 0 {
		t.Fatalf("exit after SIGINT: %v (%s)", err, r.stderr)
	}
}

// TestFetchSIGINTSaysInterrupted: SIGINT in the middle of a fetch says
// it was interrupted and what to do (exit 1, one line, one JSON document
// with --json); it used to print "error: context canceled" (and an
// interrupted interpreter probe blamed --python).
func TestFetchSIGINTSaysInterrupted(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		name := "text"
		if asJSON {
			name = "json"
		}
		t.Run(name, func(t *testing.T) { fetchInterrupted(t, asJSON) })
	}
}

func fetchInterrupted(t *testing.T, asJSON bool) {
	var args []string
	if asJSON {
		args = append(args, "--json")
	}
	r, err := fetchSIGINT(t, args...)
	if r.code != exitFailure {
		t.Fatalf("exit after SIGINT: %v (%s)", err, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "error: interrupted") || strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "context canceled") {
		t.Errorf("json=%v: %+v", asJSON, r)
	}
	if asJSON {
		v := jsonDoc(t, r)
		if e, _ := v["error"].(map[string]any); v["schema"] != "cruxprov.fetch/v1" || e["kind"] != "interrupted" {
			t.Errorf("json: %v", v)
		}
	} else if r.stdout != "" {
		t.Errorf("stdout: %q", r.stdout)
	}
}

// fetchSIGINT runs fetch (with extra arguments) against an index whose
// wheel downloads send the wheel's first two bytes, announced whole, and
// then nothing until the client goes away; once a download has started
// it sends fetch SIGINT, checks the store holds no blob and no staging
// debris, and returns what fetch printed and how it exited (code -1 when
// it did not exit on its own) with its Wait error.
func fetchSIGINT(t *testing.T, extra ...string) (result, error) {
	t.Helper()
	started := make(chan struct{}, 8)
	stop := make(chan struct{})
	idx, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, ".whl") {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body[:2])
			w.(http.Flusher).Flush()
			started <- struct{}{}
			select { // the rest never comes
			case <-r.Context().Done():
			case <-stop:
			}
		})
	})
	t.Cleanup(func() { close(stop) }) // before the server's Close, which waits for the handlers
	home := t.TempDir()
	cmd := exec.Command(bin, append([]string{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx, "--home", home}, extra...)...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-started
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if got := fetchBlobs(t, home); len(got) != 0 {
		t.Errorf("store holds %v after SIGINT", got)
	}
	if ents, _ := os.ReadDir(filepath.Join(home, "tmp")); len(ents) != 0 {
		t.Errorf("staging debris: %v", ents)
	}
	return result{so.String(), se.String(), cmd.ProcessState.ExitCode()}, err
}

// TestFetchWheelFixtures: fetch --wheel reads the root wheel's embedded
// lock (its URLs name the fixtures' public index) and fetches from a
// mirror built by index.Build, for two platforms.
func TestFetchWheelFixtures(t *testing.T) {
	fx, idx := fixtureindex.Serve(t, t.TempDir())
	home := t.TempDir()
	for _, plat := range []string{"cp311-manylinux_2_36_x86_64", "cp312-musllinux_1_2_x86_64"} {
		t.Run(plat, func(t *testing.T) {
			r := cruxprov(t, "fetch", "--wheel", fx.Native.Path, "--platform", plat, "--index", idx, "--home", home, "--json")
			var out struct {
				Wheels []struct{ Filename string } `json:"wheels"`
			}
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || len(out.Wheels) < 2 {
				t.Fatalf("%s: %+v", plat, r)
			}
		})
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
	run := func(t *testing.T, env []string, args ...string) result {
		cmd := exec.Command(bin, append([]string{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx, "--home", t.TempDir()}, args...)...)
		cmd.Env = append(os.Environ(), append([]string{"NETRC=" + filepath.Join(t.TempDir(), "none")}, env...)...)
		return runCmd(t, cmd)
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
			r := run(t, tt.env, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d: %+v", r.code, tt.code, r)
			}
			if strings.Contains(r.stdout+r.stderr, "s3cr3t") || strings.Contains(r.stdout+r.stderr, "nope-pw") {
				t.Errorf("a password was printed: %+v", r)
			}
		})
	}
}

// TestFetchIndexURLNeverPrintsSecrets: a malformed --index that carries
// a credential (no scheme separator, a fragment, no host) is a usage
// error that never prints the secret; each used to be echoed verbatim.
func TestFetchIndexURLNeverPrintsSecrets(t *testing.T) {
	for _, u := range []string{
		"u:SEKRET@127.0.0.1/simple/",
		"http:u:SEKRET@127.0.0.1/simple/",
		"http://127.0.0.1:1/simple/#SEKRET",
		"http://127.0.0.1:1/simple/?#SEKRET",
		"http:///u:SEKRET@127.0.0.1/simple/",
		"http://u:SEKRET@/simple/",
		"ftp://u:SEKRET@127.0.0.1:1/simple/",
	} {
		t.Run(u, func(t *testing.T) {
			for _, j := range []string{"--quiet", "--json"} {
				t.Run(j, func(t *testing.T) {
					r := cruxprov(t, "fetch", "--lock", "pylock.toml", "--platform", fetchTestPlatform, "--index", u, j)
					if r.code != exitUsage || strings.Contains(r.stdout+r.stderr, "SEKRET") {
						t.Errorf("%s %s: %+v", u, j, r)
					}
				})
			}
		})
	}
}

// TestFetchIndexURLSaysWhatIsWrong: a malformed --index is a usage
// error (64) whose one line says what is wrong with the URL. A scheme
// followed by one slash or none (https:/host/simple/, http:host) was
// refused as having no scheme.
func TestFetchIndexURLSaysWhatIsWrong(t *testing.T) {
	for _, c := range []struct{ name, url, want string }{
		{"one slash", "https:/127.0.0.1:1/simple/", "--index https:/127.0.0.1:1/simple/: https: is followed by one slash, not two: write https://127.0.0.1:1/simple/"},
		{"no slash", "http:127.0.0.1", "--index http:127.0.0.1: http: is followed by no slash, not two: write http://127.0.0.1"},
		{"no scheme", "127.0.0.1:1/simple/", "it has no scheme: begin it with https:// or http://"},
		{"no host", "https:///simple/", "--index https:///simple/: it has no host"},
		{"another scheme", "ftp://127.0.0.1:1/simple/", "its scheme, ftp, is not http or https"},
		{"port out of range", "http://127.0.0.1:65536/simple/", "its port 65536 is not a port number"},
		{"query", "http://127.0.0.1:1/simple/?x=1", "it has a query"},
		{"fragment", "http://127.0.0.1:1/simple/#x", "it has a fragment"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cruxprov(t, "fetch", "--lock", "pylock.toml", "--platform", fetchTestPlatform, "--index", c.url)
			if r.code != exitUsage || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("--index %s: want exit %d and one line with %q, got %+v", c.url, exitUsage, c.want, r)
			}
			if c.name != "no scheme" && strings.Contains(r.stderr, "no scheme") {
				t.Errorf("--index %s has a scheme: %s", c.url, r.stderr)
			}
		})
	}
}

// damageBlob writes 7 bytes into a store blob in place, as
// `dd conv=notrunc` does (size unchanged), and puts its mtime back.
func damageBlob(t *testing.T, home, hex string) {
	t.Helper()
	p := filepath.Join(home, "blobs", "sha256", hex)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // past the coarse clock tick of the stamp's ctime
	// The owner's write permission first (root ignores the 0444; an
	// operator damaging it by mistake would have to give it), then back.
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("DAMAGED"), 40); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chmod(p, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
}

// blobGood reports whether the blob hex in home hashes to its name.
func blobGood(t *testing.T, home, hex string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "blobs", "sha256", hex))
	s := sha256.Sum256(b)
	return err == nil && fmt.Sprintf("%x", s) == hex
}

// TestFetchDamagedBlob (issue 11 item 6): a blob damaged in place is not
// "in store, cached": fetch --offline removes it and refuses saying so,
// fetch replaces it, and gc removes it even while a seal names it — so
// the advice env create gives after such damage (gc, then fetch) works.
func TestFetchDamagedBlob(t *testing.T) {
	idx, lock, sums := fetchFixture(t)
	home := t.TempDir()
	fetch := func(extra ...string) result {
		return cruxprov(t, append([]string{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--home", home}, extra...)...)
	}
	if r := fetch("--index", idx); r.code != 0 {
		t.Fatalf("fetch: %+v", r)
	}
	bad := sums[0]

	damageBlob(t, home, bad)
	r := fetch("--offline")
	if r.code != 78 || !strings.HasPrefix(r.stderr, "refused: offline_miss:") || !strings.Contains(r.stderr, "damaged") ||
		!strings.Contains(r.stderr, "removed") || !strings.Contains(r.stderr, "online") || !strings.Contains(r.stderr, "to fix: cruxprov fetch") {
		t.Fatalf("offline after damage: %+v", r)
	}
	if r := fetch("--index", idx); r.code != 0 || !strings.Contains(r.stdout, "fetched  "+bad[:12]) || !blobGood(t, home, bad) {
		t.Fatalf("fetch after the offline refusal: %+v", r)
	}

	damageBlob(t, home, bad)
	r = fetch("--index", idx)
	if r.code != 0 || !strings.Contains(r.stdout, "fetched  "+bad[:12]) || !strings.Contains(r.stderr, "damaged") || !blobGood(t, home, bad) {
		t.Fatalf("online after damage: %+v", r)
	}
	// With --json the warning is the document's, as every warning is
	// (operator.md): not on stderr, in "warnings".
	damageBlob(t, home, bad)
	r = fetch("--index", idx, "--json")
	var doc struct {
		Warnings []string `json:"warnings"`
		Wheels   []struct {
			Damaged bool `json:"damaged"`
		} `json:"wheels"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); r.code != 0 || err != nil || len(doc.Warnings) != 1 ||
		!strings.Contains(doc.Warnings[0], "damaged") || strings.Contains(r.stderr, "damaged") || !blobGood(t, home, bad) {
		t.Fatalf("online after damage, --json: %+v (%v, %+v)", r, err, doc)
	}

	// gc, then fetch (what env create advises): gc drops the damaged blob
	// although a seal names it, fetch brings it back.
	os.WriteFile(filepath.Join(home, "envs", "00.seal.json"), []byte(`{"packages":["sha256:`+sums[0]+`","sha256:`+sums[1]+`"]}`), 0o444)
	damageBlob(t, home, bad)
	r = cruxprov(t, "gc", "--home", home)
	if r.code != 0 || !strings.Contains(r.stdout, "removed blobs/sha256/"+bad+" (damaged") {
		t.Fatalf("gc after damage: %+v", r)
	}
	if got := fetchBlobs(t, home); len(got) != 1 || got[0] != sums[1] {
		t.Fatalf("after gc: %v", got)
	}
	if r := fetch("--index", idx); r.code != 0 || !blobGood(t, home, bad) {
		t.Fatalf("fetch after gc: %+v", r)
	}
	if r := fetch("--offline"); r.code != 0 || !strings.Contains(r.stdout, "2 already in the store") {
		t.Fatalf("offline, repaired: %+v", r)
	}
}

// TestFetchStalledIndex (issue 11 item 9): an index that answers slowly
// with errors prints one line per retry on stderr when stderr is not a
// TTY, for pages and downloads, then refuses.
func TestFetchStalledIndex(t *testing.T) {
	for _, what := range []string{"page", "download"} {
		t.Run(what, func(t *testing.T) {
			idx, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if (what == "page" && strings.HasPrefix(r.URL.Path, "/simple/alpha")) || (what == "download" && strings.HasSuffix(r.URL.Path, ".whl")) {
						time.Sleep(100 * time.Millisecond)
						w.WriteHeader(http.StatusServiceUnavailable)
						return
					}
					h.ServeHTTP(w, r)
				})
			})
			r := cruxprov(t, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx)
			retries := retryLines(r.stderr)
			if r.code != 78 || !strings.Contains(r.stderr, "refused: fetch_failed") || len(retries) < 3 {
				t.Fatalf("exit %d, %d retry lines, want 3 or more (one per retry): %s", r.code, len(retries), r.stderr)
			}
			if !strings.Contains(retries[0], "attempt 1") || !strings.Contains(retries[0], "503") {
				t.Errorf("first retry line: %q", retries[0])
			}
		})
	}
}

// TestFetchDownloadRetrySaysHowLong: a download's retry line says how
// long it waits, as a page's does: a 429 with Retry-After: 2 waits two
// seconds, and the line said only "trying again".
func TestFetchDownloadRetrySaysHowLong(t *testing.T) {
	var once sync.Map
	idx, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, ".whl") {
				if _, seen := once.LoadOrStore(r.URL.Path, true); !seen {
					w.Header().Set("Retry-After", "2")
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	r := cruxprov(t, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx)
	retries := retryLines(r.stderr)
	if r.code != 0 || len(retries) != 2 {
		t.Fatalf("exit %d, %d retry lines, want one per wheel: %s", r.code, len(retries), r.stderr)
	}
	for _, l := range retries {
		if !strings.Contains(l, "-1.0-py3-none-any.whl: attempt 1 failed: ") || !strings.HasSuffix(l, "429 Too Many Requests; trying again in 2s") {
			t.Errorf("retry line does not say how long it waits: %q", l)
		}
	}
}

// TestRetryWaitRounds: a Retry-After given as a date waits a fraction of
// a second more or less than whole seconds; its line showed all nine
// digits ("trying again in 2.260176021s").
func TestRetryWaitRounds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2260176021 * time.Nanosecond: "2.26s",
		250 * time.Millisecond:       "250ms",
		2 * time.Second:              "2s",
	} {
		if got := retryWait(d).String(); got != want {
			t.Errorf("retryWait(%v) = %s, want %s", d, got, want)
		}
	}
}

// TestFetchStalledIndexOnATerminal: on a terminal, where progress bars are
// drawn, a page's retries still get a line each (no bar shows a page):
// they were printed only without bars, so an index that failed its pages
// kept fetch, env create and install silent on a terminal.
func TestFetchStalledIndexOnATerminal(t *testing.T) {
	idx, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/simple/alpha") {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ptmx, pts := ptyPair(t)
	cmd := exec.Command(bin, "--home", t.TempDir(), "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx)
	cmd.Stdout, cmd.Stderr = io.Discard, pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	shown := make(chan string, 1)
	go func() { b, _ := io.ReadAll(ptmx); shown <- string(b) }()
	cmd.Wait()
	pts.Close()
	var out string
	select {
	case out = <-shown:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output did not end")
	}
	// A line printed above the bars begins with the cursor moves that
	// clear them (ESC [ N A, ESC [ J): the line is what follows.
	n := 0
	for _, l := range strings.Split(csiRE.ReplaceAllString(out, ""), "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, "\r"), "retry: ") {
			n++
		}
	}
	if cmd.ProcessState.ExitCode() != 78 || n < 3 || !strings.Contains(out, "attempt 1 of 4 failed") {
		t.Fatalf("exit %d, %d retry lines on the terminal, want 3: %q", cmd.ProcessState.ExitCode(), n, out)
	}
	// Each is printed above the bars, once they are drawn, which are
	// cleared first (it was written under them, into the lines the next
	// redraw moved up over and cleared).
	if i := strings.Index(out, "total ("); i >= 0 && !strings.Contains(out[i:], "\x1b[J"+"retry: ") {
		t.Errorf("no retry line printed above the bars once they were drawn: %q", out)
	}
}

// csiRE matches a terminal control sequence (ESC [ parameters final).
var csiRE = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// TestFetchNoSpace (issue 11 item 9): a full disk while fetching is a
// failure (exit 1, one line) naming the store and what frees space, not a
// refusal blaming the index. The store is a real small tmpfs.
func TestFetchNoSpace(t *testing.T) {
	home := testdir.Tmpfs(t, "256k")
	idx, lock, _ := fetchFixturePadded(t, func(h http.Handler) http.Handler { return h }, 200<<10)
	for _, asJSON := range []bool{false, true} {
		name := "text"
		if asJSON {
			name = "json"
		}
		t.Run(name, func(t *testing.T) {
			args := []string{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx, "--home", home}
			if asJSON {
				args = append(args, "--json")
			}
			r := cruxprov(t, args...)
			if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "error: no space left for the store "+home) ||
				!strings.Contains(r.stderr, "cruxprov gc --envs --dry-run --home "+home+" lists the envs no accepted pin") || strings.Contains(r.stderr, "fetch_failed") || strings.Contains(r.stderr, "check the index") {
				t.Fatalf("json=%v: %+v", asJSON, r)
			}
			if asJSON && !strings.Contains(r.stdout, `"kind": "failure"`) {
				t.Errorf("json: %s", r.stdout)
			}
		})
	}
	if ents, _ := filepath.Glob(filepath.Join(home, "blobs", "sha256", ".tmp-*")); len(ents) != 0 {
		t.Errorf("temps left: %v", ents)
	}
}

// TestFetchStoreNotOurs: fetching into another user's store (an executor
// given the operator's) fails (exit 1, one line) naming the store and
// saying to fetch as its owner or into a store of one's own, not a
// refusal blaming the index: it was "refused: fetch_failed: alpha… from
// http://…: store: open …: permission denied; …".
func TestFetchStoreNotOurs(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-notours-", "")
	idx, lock, _ := fetchFixture(t)
	lb, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	lockCopy := filepath.Join(base, "pylock.toml")
	if err := os.WriteFile(lockCopy, lb, 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	if _, err := store.Open(home); err != nil { // root's, empty
		t.Fatal(err)
	}
	r := asNobody(t, exe, []string{"HOME=/nonexistent"}, "fetch", "--lock", lockCopy, "--platform", fetchTestPlatform, "--index", idx, "--home", home)
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "error: cannot write "+home+": ") ||
		!strings.Contains(r.stderr, "the store cannot be written; it is not writable by this user (uid 65534; its owner is uid 0): fetch as its owner, or into a store of your own") || strings.Contains(r.stderr, "fetch_failed") {
		t.Fatalf("%+v", r)
	}
	// Its lock file gone (or unreadable), which every reader takes and
	// only the owner can mend: said so, with how.
	lockFile := filepath.Join(home, ".lock")
	if err := os.Remove(lockFile); err != nil {
		t.Fatal(err)
	}
	r = asNobody(t, exe, []string{"HOME=/nonexistent"}, "fetch", "--lock", lockCopy, "--platform", fetchTestPlatform, "--index", idx, "--home", home)
	if r.code != exitRefused || !strings.Contains(r.stderr, "its lock file "+lockFile+" is missing and this user (uid 65534) cannot make it; as the store's owner") {
		t.Errorf("no lock file: %+v", r)
	}
	// The owner fetches, then makes one blob unreadable: named as the
	// store's, with what to do (it was "error: alpha….whl: open …:
	// permission denied").
	if r := cruxprov(t, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx, "--home", home); r.code != 0 {
		t.Fatalf("fetch as the owner: %+v", r)
	}
	blobs, _ := filepath.Glob(filepath.Join(home, "blobs", "sha256", "[0-9a-f]*"))
	if len(blobs) == 0 {
		t.Fatal("no blob fetched")
	}
	for _, b := range blobs {
		os.Chmod(b, 0o400)
	}
	r = asNobody(t, exe, []string{"HOME=/nonexistent"}, "fetch", "--lock", lockCopy, "--platform", fetchTestPlatform, "--offline", "--home", home)
	if r.code != 1 || !strings.Contains(r.stderr, "error: cannot read the store's blob of ") || !strings.Contains(r.stderr, "run as a user who can read the store "+home) {
		t.Errorf("an unreadable blob: %+v", r)
	}
	// A store home this user cannot enter (an operator's 0700): said so
	// (exit 1), not blamed on the command line ("usage: …/config.yaml:
	// permission denied", exit 64) nor on the lock file.
	os.Chmod(home, 0o700)
	r = asNobody(t, exe, []string{"HOME=/nonexistent"}, "fetch", "--lock", lockCopy, "--platform", fetchTestPlatform, "--offline", "--home", home)
	if r.code != 1 || !strings.Contains(r.stderr, "error: cannot read the store's "+filepath.Join(home, "config.yaml")+": permission denied to this user (uid 65534); run as a user who can read the store") {
		t.Errorf("a home this user cannot enter: %+v", r)
	}
	os.Chmod(home, 0o755)
}

// asNobody runs the binary exe as uid 65534 with umask 022 and env.
func asNobody(t *testing.T, exe string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", "sh", "-c", `umask 022 && exec "$@"`, "sh", exe}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	return runCmd(t, cmd)
}

// modes lists the mode and owner of every path under root, relative.
func modes(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = fmt.Sprintf("%v %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
		return nil
	})
	return out
}

// TestOperatorAsNobody (issue 11 item 2, DESIGN §14): index build, fetch
// and gc run end to end as an ordinary user owning its own store, and
// write what they write with the documented modes.
func TestOperatorAsNobody(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-operator-", bin)
	idxSrc, lock, sums := fetchFixture(t)
	op := filepath.Join(base, "op")
	wheels := filepath.Join(base, "wheels")
	for _, d := range []string{op, wheels} {
		os.Mkdir(d, 0o755)
	}
	os.Chown(op, 65534, 65534)
	// The operator's wheels, and a lock naming them, readable by all.
	lockCopy := filepath.Join(base, "pylock.toml")
	b, _ := os.ReadFile(lock)
	os.WriteFile(lockCopy, b, 0o644)
	srcIdx := strings.TrimSuffix(strings.TrimPrefix(idxSrc, "http://"), "/simple/")
	for _, name := range []string{"alpha-1.0-py3-none-any.whl", "beta_pkg-1.0-py3-none-any.whl"} {
		resp, err := http.Get("http://" + srcIdx + "/files/" + name)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		os.WriteFile(filepath.Join(wheels, name), buf.Bytes(), 0o644)
	}
	mirror := filepath.Join(op, "mirror")
	home := filepath.Join(op, "home")
	env := []string{"HOME=" + op, "CRUXPROV_HOME=" + home}

	if r := asNobody(t, exe, env, "index", "build", mirror, "--from", wheels); r.code != 0 {
		t.Fatalf("index build: %+v", r)
	}
	for p, m := range modes(t, mirror) {
		want := "-rw-r--r-- 65534"
		if fi, _ := os.Lstat(filepath.Join(mirror, p)); fi.IsDir() {
			want = "drwxr-xr-x 65534"
		}
		if m != want {
			t.Errorf("mirror/%s: %s, want %s", p, m, want)
		}
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(mirror)))
	defer srv.Close()
	idx := srv.URL + "/simple/"

	fetch := []string{"fetch", "--lock", lockCopy, "--platform", fetchTestPlatform, "--index", idx}
	if r := asNobody(t, exe, env, fetch...); r.code != 0 || r.stderr != "" {
		t.Fatalf("fetch: %+v", r)
	}
	want := map[string]string{".": "drwxr-xr-x 65534", ".lock": "-rw-r--r-- 65534", ".gate": "-rw-r--r-- 65534"}
	for _, d := range []string{"blobs", "blobs/sha256", "blobs/stamps", "envs", "oci", "registry", "receipts", "tmp"} {
		want[d] = "drwxr-xr-x 65534"
	}
	for _, s := range sums {
		want["blobs/sha256/"+s] = "-r--r--r-- 65534"
		want["blobs/stamps/"+s] = "-r--r--r-- 65534"
	}
	got := modes(t, home)
	for p, m := range want {
		if got[p] != m {
			t.Errorf("%s: %q, want %q", p, got[p], m)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected %s (%s)", p, got[p])
		}
	}
	if r := asNobody(t, exe, env, append(fetch, "--offline")...); r.code != 0 || !strings.Contains(r.stdout, "2 already in the store") {
		t.Fatalf("fetch --offline: %+v", r)
	}
	// A blob the operator damaged (its own file: chmod, write) is noticed.
	p := filepath.Join(home, "blobs", "sha256", sums[0])
	time.Sleep(20 * time.Millisecond) // past the coarse clock tick of the stamp's ctime
	if r := asNobody(t, "/bin/sh", nil, "-c", "chmod u+w "+p+" && printf DAMAGED | dd of="+p+" conv=notrunc status=none && chmod 0444 "+p); r.code != 0 {
		t.Fatalf("damage as the owner: %+v", r)
	}
	if r := asNobody(t, exe, env, fetch...); r.code != 0 || !strings.Contains(r.stderr, "damaged") || !blobGood(t, home, sums[0]) {
		t.Fatalf("fetch after damage: %+v", r)
	}
	if r := asNobody(t, exe, env, "gc"); r.code != 0 || !strings.Contains(r.stdout, "removed 2 entries") {
		t.Fatalf("gc: %+v", r)
	}
	if got := fetchBlobs(t, home); len(got) != 0 {
		t.Errorf("after gc: %v", got)
	}
}

// TestFetchUnreadableNetrc (issue 11 item 2): an operator whose HOME is
// still root's (sudo -u) cannot read ~/.netrc: fetch warns and goes on,
// even with every wheel in the store and an index that wants
// credentials; only the index's 401 makes it a refusal naming the file.
func TestFetchUnreadableNetrc(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-netrc-", bin)
	var private *httptest.Server
	_, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		private = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "ci" || p != "s3cr3t-pw" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		}))
		return h
	})
	defer private.Close()
	rootHome := filepath.Join(base, "root")
	os.Mkdir(rootHome, 0o700) // root's, as /root is
	netrc := filepath.Join(rootHome, ".netrc")
	os.WriteFile(netrc, []byte("machine 127.0.0.1 login ci password s3cr3t-pw\n"), 0o600)
	lockCopy := filepath.Join(base, "pylock.toml")
	b, _ := os.ReadFile(lock)
	os.WriteFile(lockCopy, b, 0o644)
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)
	os.Chown(home, 65534, 65534)
	env := []string{"HOME=" + rootHome, "CRUXPROV_HOME=" + home}
	fetch := []string{"fetch", "--lock", lockCopy, "--platform", fetchTestPlatform, "--index", private.URL + "/simple/"}

	r := asNobody(t, exe, env, fetch...)
	if r.code != 78 || !strings.Contains(r.stderr, "refused: fetch_failed") || !strings.Contains(r.stderr, netrc) ||
		!strings.Contains(r.stderr, "could not be read") || !strings.Contains(r.stderr, "warning: netrc "+netrc+" skipped") {
		t.Fatalf("401 with an unreadable netrc: %+v", r)
	}
	// The remedy: a netrc this user can read, named with NETRC (it had
	// none). Run as printed, FILE the operator's own netrc.
	mine := filepath.Join(base, "netrc-nobody")
	os.WriteFile(mine, []byte("machine 127.0.0.1 login ci password s3cr3t-pw\n"), 0o600)
	os.Chown(mine, 65534, 65534)
	m := regexp.MustCompile(`; to fix: NETRC=FILE cruxprov (.*)$`).FindStringSubmatch(strings.TrimSpace(r.stderr))
	if m == nil {
		t.Fatalf("401 with an unreadable netrc: %+v, want the remedy NETRC=FILE cruxprov …", r)
	}
	fix := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "sh", "-c", "NETRC="+mine+" "+exe+" "+m[1])
	fix.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	if f := runCmd(t, fix); f.code != 0 || strings.Contains(f.stdout+f.stderr, "s3cr3t") {
		t.Fatalf("the remedy, %s: %+v", m[0], f)
	}
	// Fill the store as root (who can read the netrc), then the operator
	// fetches again: nothing to download, so no credentials needed.
	cmd := exec.Command(bin, append(fetch, "--home", home)...)
	cmd.Env = append(os.Environ(), "NETRC="+netrc)
	if r := runCmd(t, cmd); r.code != 0 {
		t.Fatalf("fetch as root: %+v", r)
	}
	chownTree(t, home)
	r = asNobody(t, exe, env, fetch...)
	if r.code != 0 || !strings.Contains(r.stdout, "2 already in the store") || !strings.Contains(r.stderr, "warning: netrc "+netrc+" skipped") || strings.Contains(r.stdout+r.stderr, "s3cr3t") {
		t.Fatalf("everything in the store, netrc unreadable: %+v", r)
	}
}

// chownTree gives everything under root to uid/gid 65534.
func chownTree(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			os.Lchown(p, 65534, 65534)
		}
		return nil
	})
}

// TestFetchYankedReasonOneLine: the reason a hostile index gives for a
// yanked file (a newline, a terminal's escape sequence) is shown on one
// line with its controls escaped, like every other warning; before, the
// fetch printed it raw: the warning broke over two lines and the escape
// reached the operator's terminal.
func TestFetchYankedReasonOneLine(t *testing.T) {
	idx, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/simple/alpha/") {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			page := strings.Replace(rec.Body.String(), "<a href=", "<a data-yanked=\"bad\n\x1b[2Jbuild\" href=", 1)
			w.Header().Set("Content-Type", rec.Header().Get("Content-Type"))
			w.Write([]byte(page))
		})
	})
	r := cruxprov(t, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx)
	if r.code != 0 {
		t.Fatalf("fetch: %+v", r)
	}
	if strings.ContainsAny(r.stderr, "\x1b") || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "warning: alpha-1.0-py3-none-any.whl is yanked on the index (bad ") {
		t.Fatalf("the yanked warning is not one clean line: %q", r.stderr)
	}
}

// TestIndexWarningInTheJSONDocument: walking operator.md as
// cruxprov-rootless with an unreadable ~/.netrc, `fetch --json` wrote
// "warning: netrc … skipped" on stderr and the document had no warnings:
// operator.md says --json carries the warnings stderr would have shown,
// and stderr is quiet under --json. The index's warning is now the
// document's (with --quiet too: it changes only the human output), and
// without --json stderr still says it. A netrc that is a directory is
// unreadable to root as well.
func TestIndexWarningInTheJSONDocument(t *testing.T) {
	fx := fixtures.ForTest(t, fixtures.Options{})
	idx := fixtureindex.ServeSet(t, fx, t.TempDir())
	home := t.TempDir()
	netrc := t.TempDir()
	run := func(extra ...string) result {
		cmd := exec.Command(bin, append([]string{"--home", home, "fetch", "--wheel", fx.Echo.Path, "--platform", fetchTestPlatform, "--index", idx}, extra...)...)
		cmd.Env = append(os.Environ(), "NETRC="+netrc)
		return runCmd(t, cmd)
	}
	want := "netrc " + netrc + " skipped"
	for _, extra := range [][]string{{"--json"}, {"--json", "--quiet"}} {
		r := run(extra...)
		var doc struct{ Warnings []string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil {
			t.Fatalf("%v: %+v", extra, r)
		}
		if len(doc.Warnings) != 1 || !strings.HasPrefix(doc.Warnings[0], want) || strings.Contains(r.stderr, "warning:") {
			t.Errorf("%v: the netrc warning is not the document's alone: warnings %q, stderr %q", extra, doc.Warnings, r.stderr)
		}
	}
	if r := run(); r.code != 0 || !strings.Contains(r.stderr, "warning: "+want) {
		t.Errorf("without --json: %+v", r)
	}
}

// TestFetchNetrcWithoutTheHost: a fetch from an index that asks for
// credentials, with a netrc holding none for its host, is refused
// fetch_failed saying no credentials for the host were sent and which
// netrc was read, with the remedy "; to fix: NETRC=FILE cruxprov fetch
// …", which, run as printed with FILE a netrc holding the host's entry,
// fetches. It said "check the credentials for its host", with no remedy.
// Any user: nothing here depends on modes.
func TestFetchNetrcWithoutTheHost(t *testing.T) {
	var private *httptest.Server
	_, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		private = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "ci" || p != "s3cr3t-pw" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		}))
		return h
	})
	defer private.Close()
	dir := t.TempDir()
	other := filepath.Join(dir, "other.netrc")
	os.WriteFile(other, []byte("machine index.example login ci password s3cr3t-pw\n"), 0o600)
	good := filepath.Join(dir, "good.netrc")
	os.WriteFile(good, []byte("machine 127.0.0.1 login ci password s3cr3t-pw\n"), 0o600)
	home := filepath.Join(dir, "home")
	cmd := exec.Command(bin, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", private.URL+"/simple/", "--home", home)
	cmd.Env = append(os.Environ(), "NETRC="+other)
	r := runCmd(t, cmd)
	host := strings.TrimPrefix(private.URL, "http://")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: fetch_failed: ") || !strings.Contains(r.stderr, "no credentials for its host "+host+" were sent") ||
		!strings.Contains(r.stderr, "the netrc file "+other+" has no machine entry for it") {
		t.Fatalf("401 with a netrc without the host: %+v", r)
	}
	m := regexp.MustCompile(`; to fix: NETRC=FILE (cruxprov .*)$`).FindStringSubmatch(strings.TrimSpace(r.stderr))
	if m == nil {
		t.Fatalf("401 with a netrc without the host: %+v, want the remedy NETRC=FILE cruxprov …", r)
	}
	fix := exec.Command("sh", "-c", "NETRC="+shellQuote(good)+" "+m[1])
	fix.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	if f := runCmd(t, fix); f.code != 0 || strings.Contains(f.stdout+f.stderr, "s3cr3t") {
		t.Fatalf("the remedy, %s: %+v", m[0], f)
	}
}

// TestRemedyNeverPrintsIndexCredentials: a refusal whose advice is the
// refused command again (here name_python, an interpreter that is not
// there) renders an --index that carries a user and password with
// USER:PASSWORD in their place, on stderr and in the --json remedy: it
// printed the refused command line verbatim, password and all (DESIGN
// §14: credentials are never printed).
func TestRemedyNeverPrintsIndexCredentials(t *testing.T) {
	var private *httptest.Server
	_, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		private = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "ci-user" || p != "s3cr3t-pw" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		}))
		return h
	})
	defer private.Close()
	host := strings.TrimPrefix(private.URL, "http://")
	for _, form := range [][]string{
		{"--index", "http://ci-user:s3cr3t-pw@" + host + "/simple/"},
		{"--index=http://ci-user:s3cr3t-pw@" + host + "/simple/"},
	} {
		for _, j := range []string{"--quiet", "--json"} {
			t.Run(fmt.Sprintf("%d-args%s", len(form), j), func(t *testing.T) {
				args := append([]string{"--home", t.TempDir(), "env", "create", "--lock", lock, "--platform", fetchTestPlatform,
					"--python", filepath.Join(t.TempDir(), "no-python"), j}, form...)
				r := cruxprov(t, args...)
				if r.code != exitRefused || !strings.Contains(r.stderr, "; to fix: cruxprov ") {
					t.Fatalf("want a refusal with the command again: %+v", r)
				}
				if strings.Contains(r.stdout+r.stderr, "s3cr3t") || strings.Contains(r.stdout+r.stderr, "ci-user") {
					t.Errorf("the credentials were printed: %+v", r)
				}
				if !strings.Contains(r.stderr, "http://USER:PASSWORD@"+host+"/simple/") {
					t.Errorf("the advice does not hold the index with placeholders: %+v", r)
				}
			})
		}
	}
	// Credentials the index refuses: the refusal says where they came
	// from (a wrong password in the index URL was reported as netrc's
	// or the environment's), with what to do there, and prints neither
	// the user nor the password.
	dir := t.TempDir()
	wrongNetrc := filepath.Join(dir, "netrc")
	os.WriteFile(wrongNetrc, []byte("machine 127.0.0.1 login ci-user password s3cr3t-typo\n"), 0o600)
	for _, tc := range []struct {
		name, index string
		env         []string
		want        string
		fix         *regexp.Regexp // the remedy rendered; nil: none
		fixed       func(string) (string, []string)
	}{
		{"the index URL", "http://ci-user:s3cr3t-typo@" + host + "/simple/", nil,
			"was sent the user and password the index URL gives for " + host,
			regexp.MustCompile(`; to fix: (cruxprov fetch .*--index http://USER:PASSWORD@` + regexp.QuoteMeta(host) + `/simple/.*)$`),
			func(cmd string) (string, []string) {
				return strings.Replace(cmd, "USER:PASSWORD", "ci-user:s3cr3t-pw", 1), nil
			}},
		{"the netrc file", private.URL + "/simple/", []string{"NETRC=" + wrongNetrc},
			"the machine 127.0.0.1 entry of the netrc file " + wrongNetrc,
			regexp.MustCompile(`; to fix: NETRC=FILE (cruxprov fetch .*)$`),
			func(cmd string) (string, []string) {
				good := filepath.Join(dir, "good.netrc")
				os.WriteFile(good, []byte("machine 127.0.0.1 login ci-user password s3cr3t-pw\n"), 0o600)
				return cmd, []string{"NETRC=" + good}
			}},
		{"the environment", private.URL + "/simple/", []string{"CRUXPROV_INDEX_USERNAME=ci-user", "CRUXPROV_INDEX_PASSWORD=s3cr3t-typo"},
			"from the environment variables CRUXPROV_INDEX_USERNAME and CRUXPROV_INDEX_PASSWORD", nil, nil},
	} {
		for _, j := range []string{"--quiet", "--json"} {
			t.Run("refused from "+tc.name+j, func(t *testing.T) {
				home := filepath.Join(t.TempDir(), "home")
				cmd := exec.Command(bin, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", tc.index, "--home", home, j)
				cmd.Env = append(append(os.Environ(), "NETRC="+filepath.Join(dir, "none")), tc.env...)
				r := runCmd(t, cmd)
				out := r.stdout + r.stderr
				if r.code != exitRefused || !strings.Contains(out, "fetch_failed") || !strings.Contains(out, tc.want) || !strings.Contains(out, "HTTP 401") {
					t.Fatalf("want fetch_failed with %q: %+v", tc.want, r)
				}
				if strings.Contains(out, "s3cr3t") || strings.Contains(out, "ci-user") {
					t.Errorf("the credentials were printed: %+v", r)
				}
				if j == "--json" {
					return
				}
				m := tc.fix
				if m == nil {
					if strings.Contains(r.stderr, "; to fix:") {
						t.Errorf("want no command: %+v", r)
					}
					return
				}
				got := m.FindStringSubmatch(strings.TrimSpace(r.stderr))
				if got == nil {
					t.Fatalf("want the remedy %s: %+v", m, r)
				}
				line, env := tc.fixed(got[1])
				fix := exec.Command("sh", "-c", line)
				fix.Env = append(append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "NETRC="+filepath.Join(dir, "none")), env...)
				if f := runCmd(t, fix); f.code != 0 {
					t.Fatalf("the remedy %s: %+v", line, f)
				}
			})
		}
	}
}

// TestFetchSchemeMismatch: --index http:// of a port that speaks TLS, or
// https:// of one that answers in plain HTTP, is refused at once (no
// retry line) saying to pin the other scheme, with the remedy
// index_scheme: the command again with that scheme, the port kept, which,
// run as printed, fetches. Each was retried four times as a reset or
// garbled connection, then "check the index and retry".
func TestFetchSchemeMismatch(t *testing.T) {
	var tlsSrv *httptest.Server
	plainIdx, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		tlsSrv = httptest.NewTLSServer(h)
		return h
	})
	defer tlsSrv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o644)
	tlsHost := strings.TrimPrefix(tlsSrv.URL, "https://")
	plainHost := strings.TrimPrefix(strings.TrimSuffix(plainIdx, "/simple/"), "http://")
	for _, tc := range []struct{ name, index, want, fixed string }{
		{"http to a TLS port", "http://ci:s3cr3t-pw@" + tlsHost + "/simple/", "speaks TLS (HTTPS), not plain HTTP; pin it as https://" + tlsHost + "/simple/", "--index https://USER:PASSWORD@" + tlsHost + "/simple/"},
		{"https to a plain port", "https://" + plainHost + "/simple/", "answers in plain HTTP, not TLS; pin it as http://" + plainHost + "/simple/", "--index http://" + plainHost + "/simple/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			args := []string{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", tc.index, "--home", home, "--ca-bundle", ca}
			r := cruxprov(t, args...)
			m := regexp.MustCompile(`; to fix: (cruxprov .*)$`).FindStringSubmatch(strings.TrimSpace(r.stderr))
			if r.code != exitRefused || !strings.Contains(r.stderr, "refused: fetch_failed: ") || !strings.Contains(r.stderr, tc.want) || m == nil || !strings.Contains(m[1], tc.fixed) {
				t.Fatalf("%+v, want fetch_failed saying %q, with the command again with %q", r, tc.want, tc.fixed)
			}
			if strings.Contains(r.stderr, "retry:") || strings.Contains(r.stderr, "s3cr3t") {
				t.Errorf("retried, or printed the password: %+v", r)
			}
			j := cruxprov(t, append(args, "--json")...)
			var doc struct {
				Refused struct {
					Remedy struct{ Action, Target, Command string }
				}
			}
			if json.Unmarshal([]byte(j.stdout), &doc) != nil || doc.Refused.Remedy.Action != "index_scheme" || doc.Refused.Remedy.Command != m[1] {
				t.Errorf("--json: %+v", j)
			}
			fix := exec.Command("sh", "-c", strings.Replace(m[1], "USER:PASSWORD", "ci:s3cr3t-pw", 1))
			fix.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
			if f := runCmd(t, fix); f.code != 0 {
				t.Fatalf("the remedy %s: %+v", m[1], f)
			}
		})
	}
}

// TestFetchUntrustedCA: a fetch from an HTTPS index whose certificate's
// CA this host does not trust is refused with the remedy "; to fix:
// cruxprov fetch … --ca-bundle FILE" (a --ca-bundle given, which did not
// sign it, replaced), which, run as printed with FILE the CA's PEM,
// fetches; under --json the remedy is ca_bundle. It was fetch_failed
// "x509: certificate signed by unknown authority" with no advice.
func TestFetchUntrustedCA(t *testing.T) {
	var srv *httptest.Server
	_, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		srv = httptest.NewTLSServer(h)
		return h
	})
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	// A bundle of another CA: it signed nothing here.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	otherCA := filepath.Join(dir, "other.pem")
	os.WriteFile(otherCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	home := filepath.Join(dir, "home")
	for _, extra := range [][]string{nil, {"--ca-bundle", otherCA}} {
		args := append([]string{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", srv.URL + "/simple/", "--home", home}, extra...)
		r := cruxprov(t, args...)
		m := regexp.MustCompile(`; to fix: (cruxprov .* --ca-bundle FILE)$`).FindStringSubmatch(strings.TrimSpace(r.stderr))
		if r.code != exitRefused || !strings.Contains(r.stderr, "refused: fetch_failed: ") || !strings.Contains(r.stderr, "is signed by an authority this host does not trust") || m == nil {
			t.Fatalf("%v: %+v, want fetch_failed with the remedy … --ca-bundle FILE", extra, r)
		}
		if strings.Contains(m[1], otherCA) {
			t.Errorf("the remedy keeps the bundle that did not sign it: %s", m[1])
		}
		j := cruxprov(t, append(args, "--json")...)
		var doc struct {
			Refused struct {
				Remedy struct{ Action, Command string }
			}
		}
		if json.Unmarshal([]byte(j.stdout), &doc) != nil || doc.Refused.Remedy.Action != "ca_bundle" || doc.Refused.Remedy.Command != m[1] {
			t.Errorf("--json: %+v", j)
		}
		fix := exec.Command("sh", "-c", strings.Replace(m[1], "FILE", shellQuote(ca), 1))
		fix.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
		if f := runCmd(t, fix); f.code != 0 {
			t.Fatalf("the remedy, %s: %+v", m[1], f)
		}
		os.RemoveAll(home)
	}
}

// retryLines are the "retry: " lines of a fetch's stderr.
func retryLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "retry: ") {
			out = append(out, l)
		}
	}
	return out
}
