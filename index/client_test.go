package index

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/refusal"
)

// writeWheel writes a small wheel (wheeltest's) with a METADATA that
// says requiresPython, if not "", and returns its bytes.
func writeWheel(t *testing.T, dir, name, version, requiresPython string) []byte {
	t.Helper()
	meta := "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
	if requiresPython != "" {
		meta += "Requires-Python: " + requiresPython + "\n"
	}
	fn := name + "-" + version + "-py3-none-any.whl"
	b := wheeltest.Build(t, fn, map[string]string{name + "/__init__.py": "x = 1\n", "DI/METADATA": meta + "\n"})
	if err := os.WriteFile(filepath.Join(dir, fn), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

func sumHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// pythonServer serves dir with `python3 -m http.server` on loopback and
// returns its base URL.
func pythonServer(t *testing.T, dir string) string {
	t.Helper()
	py := "/root/.pyenv/versions/3.11.7/bin/python3.11"
	if _, err := os.Stat(py); err != nil {
		if py, err = exec.LookPath("python3"); err != nil {
			t.Skip("no python3")
		}
	}
	cmd := exec.Command(py, "-u", "-m", "http.server", "--bind", "127.0.0.1", "--directory", dir, "0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("http.server: %v", err)
	}
	// "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
	i := strings.Index(line, "(http://")
	j := strings.Index(line, ") ")
	if i < 0 || j < i {
		t.Fatalf("http.server said %q", line)
	}
	go io.Copy(io.Discard, out)
	return line[i+1 : j]
}

func TestBuildServedByStaticServers(t *testing.T) {
	from, dir := t.TempDir(), t.TempDir()
	a := writeWheel(t, from, "Foo_Bar", "1.0", ">=3.8")
	b := writeWheel(t, from, "foo_bar", "2.0", "")
	c := writeWheel(t, from, "zed", "0.1", "<4,>=3.9")
	rep, err := Build(context.Background(), dir, from)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Projects != 2 || len(rep.Files) != 3 {
		t.Fatalf("report %+v", rep)
	}
	// Deterministic: a second build gives the same bytes.
	before, _ := os.ReadFile(filepath.Join(dir, "simple", "foo-bar", "index.html"))
	if _, err := Build(context.Background(), dir, from); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "simple", "foo-bar", "index.html"))
	if !bytes.Equal(before, after) {
		t.Error("second build changed the page")
	}
	goSrv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer goSrv.Close()
	servers := map[string]string{"go": goSrv.URL, "python": pythonServer(t, dir)}
	want := map[string][]byte{"Foo_Bar-1.0-py3-none-any.whl": a, "foo_bar-2.0-py3-none-any.whl": b, "zed-0.1-py3-none-any.whl": c}
	for name, base := range servers {
		t.Run(name, func(t *testing.T) {
			// Without the trailing slash: the client adds it.
			cl, err := New(strings.TrimSuffix(base, "/")+"/simple", Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for _, proj := range []string{"FOO.bar", "zed"} {
				p, err := cl.Project(ctx, proj)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range p.Files {
					wb := want[f.Filename]
					if wb == nil || f.SHA256() != sumHex(wb) || !f.CoreMetadata || len(f.MetadataHashes["sha256"]) != 64 {
						t.Errorf("%s: unexpected %+v", proj, f)
					}
					if f.Filename == "zed-0.1-py3-none-any.whl" && f.RequiresPython != "<4,>=3.9" {
						t.Errorf("requires-python %q", f.RequiresPython)
					}
					rc, _, err := cl.Open(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					got, _ := io.ReadAll(rc)
					rc.Close()
					if !bytes.Equal(got, wb) {
						t.Errorf("%s: downloaded bytes differ", f.Filename)
					}
					// The PEP 658 metadata file is where the page says.
					rc, _, err = cl.Open(ctx, File{Filename: f.Filename + ".metadata", URL: f.URL + ".metadata"})
					if err != nil {
						t.Fatal(err)
					}
					mb, _ := io.ReadAll(rc)
					rc.Close()
					if sumHex(mb) != f.MetadataHashes["sha256"] {
						t.Errorf("%s: metadata hash differs", f.Filename)
					}
				}
			}
			// The static server's /simple/x -> /simple/x/ redirect stays in the index: followed.
			rc, _, err := cl.Open(ctx, File{Filename: "zed", URL: strings.TrimSuffix(base, "/") + "/simple/zed"})
			if err != nil {
				t.Fatalf("redirect to the slash form: %v", err)
			}
			page, _ := io.ReadAll(rc)
			rc.Close()
			if !strings.Contains(string(page), "zed-0.1-py3-none-any.whl") {
				t.Errorf("redirected page: %q", page)
			}
			if _, err := cl.Project(ctx, "absent"); !errors.Is(err, refusal.FetchFailed) {
				t.Errorf("absent project: %v", err)
			}
		})
	}
}

// TestJSONByNegotiation: a server that negotiates serves index.json, and
// the client reads it (only the JSON form carries sizes).
func TestJSONByNegotiation(t *testing.T) {
	from, dir := t.TempDir(), t.TempDir()
	a := writeWheel(t, from, "foo", "1.0", "")
	if _, err := Build(context.Background(), dir, from); err != nil {
		t.Fatal(err)
	}
	fs := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") && strings.Contains(r.Header.Get("Accept"), ContentTypeJSON) {
			w.Header().Set("Content-Type", ContentTypeJSON)
			http.ServeFile(w, r, filepath.Join(dir, filepath.FromSlash(r.URL.Path), "index.json"))
			return
		}
		fs.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cl, err := New(srv.URL+"/simple/", Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := cl.Project(context.Background(), "foo")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Files) != 1 || p.Files[0].Size != int64(len(a)) || p.Files[0].SHA256() != sumHex(a) {
		t.Fatalf("files %+v", p.Files)
	}
}

func TestRedirects(t *testing.T) {
	off := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<a href="/x.whl">x</a>`)
	}))
	defer off.Close()
	var srvURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/moved/":
			http.Redirect(w, r, "/simple/moved/index.html", http.StatusFound)
		case "/simple/moved/index.html":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, `<a href="../../files/a.whl">a</a><a href="../../away/b.whl">b</a>`)
		case "/simple/offsite/":
			http.Redirect(w, r, off.URL+"/simple/offsite/", http.StatusFound)
		case "/simple/loop/":
			http.Redirect(w, r, "/simple/loop/", http.StatusFound)
		case "/simple/up/":
			http.Redirect(w, r, srvURL+"/elsewhere/up/", http.StatusMovedPermanently)
		case "/files/a.whl":
			io.WriteString(w, "A")
		case "/away/b.whl":
			http.Redirect(w, r, off.URL+"/b.whl", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	srvURL = srv.URL
	cl, err := New(srv.URL+"/simple/", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := cl.Project(ctx, "moved")
	if err != nil {
		t.Fatalf("redirect within the index: %v", err)
	}
	for _, name := range []string{"offsite", "up"} {
		t.Run(name, func(t *testing.T) {
			if _, err := cl.Project(ctx, name); !errors.Is(err, refusal.IndexNotPinned) {
				t.Errorf("%s: got %v, want index_not_pinned", name, err)
			}
		})
	}
	// A redirect loop within the index is a broken index (fetch_failed),
	// not one off it; before, it was refused index_not_pinned.
	if _, err := cl.Project(ctx, "loop"); !errors.Is(err, refusal.FetchFailed) || !strings.Contains(err.Error(), "more than 10 times") {
		t.Errorf("redirect loop: got %v, want fetch_failed", err)
	}
	fa, _ := p.Find("a.whl")
	rc, _, err := cl.Open(ctx, fa)
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	fb, _ := p.Find("b.whl")
	if _, _, err := cl.Open(ctx, fb); !errors.Is(err, refusal.IndexNotPinned) {
		t.Errorf("download redirected off the index: got %v", err)
	}
}

func TestCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != "alice" || p != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/simple/foo/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<a href="a.whl">a</a>`)
	}))
	defer srv.Close()
	ctx := context.Background()
	withUser := strings.Replace(srv.URL, "http://", "http://alice:s3cret@", 1) + "/simple/"
	cl, err := New(withUser, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cl.BaseURL(), "s3cret") {
		t.Errorf("BaseURL leaks the password: %s", cl.BaseURL())
	}
	if _, err := cl.Project(ctx, "foo"); err != nil {
		t.Fatalf("URL credentials: %v", err)
	}
	_, err = cl.Project(ctx, "bar")
	if !errors.Is(err, refusal.FetchFailed) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("404 with credentials: %v", err)
	}
	cl2, _ := New(srv.URL+"/simple/", Options{Credentials: ParseNetrc([]byte("machine 127.0.0.1 login alice password s3cret"))})
	if _, err := cl2.Project(ctx, "foo"); err != nil {
		t.Fatalf("netrc credentials: %v", err)
	}
	cl3, _ := New(srv.URL+"/simple/", Options{Credentials: []Credential{{Host: "other.example", Username: "alice", Password: "s3cret"}}})
	if _, err := cl3.Project(ctx, "foo"); !errors.Is(err, refusal.FetchFailed) {
		t.Fatalf("credential for another host was sent: %v", err)
	}
}

func TestPageRetriesAndContentType(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		switch {
		case r.URL.Path == "/simple/flaky/" && n == 1:
			w.WriteHeader(http.StatusBadGateway)
		case r.URL.Path == "/simple/flaky/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, `<a href="a.whl">a</a>`)
		case r.URL.Path == "/simple/weird/":
			w.Header().Set("Content-Type", "application/octet-stream")
			io.WriteString(w, `<a href="a.whl">a</a>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cl, _ := New(srv.URL+"/simple/", Options{Backoff: time.Millisecond})
	if p, err := cl.Project(context.Background(), "flaky"); err != nil || len(p.Files) != 1 {
		t.Fatalf("flaky: %v %v", p, err)
	}
	if _, err := cl.Project(context.Background(), "weird"); !errors.Is(err, refusal.FetchFailed) {
		t.Fatalf("weird content type: %v", err)
	}
}

func TestNewRejects(t *testing.T) {
	for _, u := range []string{"", "ftp://x/simple/", "/simple/", "https://x/simple/?q=1"} {
		t.Run(fmt.Sprintf("%q", u), func(t *testing.T) {
			if _, err := New(u, Options{}); err == nil {
				t.Errorf("New(%q) accepted", u)
			}
		})
	}
}

// TestNetrcUnreadable (issue 11 item 2): a netrc file that cannot be read
// (as after sudo -u, HOME pointing at root's) is skipped with a warning;
// only an index that then answers 401 or 403 makes it a refusal, naming
// the file.
func TestNetrcUnreadable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/private/") {
			if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<a href="a.whl">a</a>`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	good := filepath.Join(dir, "netrc")
	os.WriteFile(good, []byte("machine 127.0.0.1 login alice password s3cret\n"), 0o600)
	unreadable := filepath.Join(dir, "a-directory") // unreadable as a file, even by root
	os.Mkdir(unreadable, 0o700)
	fifo := filepath.Join(dir, "fifo") // must not block
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, netrc, index string
		warn               bool
		want               refusal.Code
	}{
		{"missing, public index", filepath.Join(dir, "none"), "/public/", false, ""},
		{"readable, private index", good, "/private/", false, ""},
		{"unreadable, public index", unreadable, "/public/", true, ""},
		{"fifo, public index", fifo, "/public/", true, ""},
		{"unreadable, private index", unreadable, "/private/", true, refusal.FetchFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warnings []Event
			cl, err := New(srv.URL+tt.index, Options{Netrc: tt.netrc, Events: func(e Event) {
				if e.Kind == EventWarning {
					warnings = append(warnings, e)
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			if (len(warnings) > 0) != tt.warn {
				t.Fatalf("warnings %v, want some: %v", warnings, tt.warn)
			}
			if tt.warn && !strings.Contains(warnings[0].Err.Error(), tt.netrc) {
				t.Errorf("the warning does not name the file: %v", warnings[0].Err)
			}
			_, err = cl.Project(context.Background(), "foo")
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.netrc) || !strings.Contains(err.Error(), "could not be read") {
				t.Fatalf("401 with an unreadable netrc: %v", err)
			}
			// With what to do: name a netrc this user can read (it had
			// no remedy).
			if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionNameNetrc || rem.Target != tt.netrc {
				t.Fatalf("401 with an unreadable netrc: remedy %+v, want %s of %s", rem, refusal.ActionNameNetrc, tt.netrc)
			}
		})
	}
}

// TestNetrcWithoutTheHost: a 401 when no credentials for the index's
// host were sent (a netrc with entries for other hosts only, one that
// does not parse as a netrc, or none) says so, naming the netrc read,
// with the remedy name_netrc. It said "check the credentials for its
// host", as though some had been sent and refused, with no remedy. A
// 401 of credentials sent stays that.
func TestNetrcWithoutTheHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<a href="a.whl">a</a>`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	os.WriteFile(other, []byte("machine index.example login alice password s3cret\n"), 0o600)
	broken := filepath.Join(dir, "broken")
	os.WriteFile(broken, []byte("login alice password\n\x00\xff{"), 0o600)
	wrong := filepath.Join(dir, "wrong")
	os.WriteFile(wrong, []byte("machine 127.0.0.1 login alice password nope\n"), 0o600)
	for _, tt := range []struct{ name, netrc, want string }{
		{"entries for other hosts", other, "the netrc file " + other + " has no machine entry for it"},
		{"does not parse", broken, "the netrc file " + broken + " has no machine entry for it"},
		{"none read", "", "no netrc file was read"},
		// It said the file that is not there "has no machine entry for it".
		{"missing", filepath.Join(dir, "missing"), "the netrc file " + filepath.Join(dir, "missing") + " does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cl, err := New(srv.URL+"/simple/", Options{Netrc: tt.netrc})
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.Project(context.Background(), "foo")
			host := strings.TrimPrefix(srv.URL, "http://")
			if !errors.Is(err, refusal.FetchFailed) || !strings.Contains(err.Error(), "no credentials for its host "+host+" were sent") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("401 with no credentials sent: %v, want %q in it", err, tt.want)
			}
			if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionNameNetrc || rem.Target != tt.netrc {
				t.Fatalf("remedy %+v, want %s of %q", rem, refusal.ActionNameNetrc, tt.netrc)
			}
		})
	}
	cl, err := New(srv.URL+"/simple/", Options{Netrc: wrong})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Project(context.Background(), "foo"); !errors.Is(err, refusal.FetchFailed) || !strings.Contains(err.Error(), "the netrc file "+wrong) || strings.Contains(err.Error(), "no credentials") {
		t.Fatalf("401 of the credentials sent: %v", err)
	}
}

// TestRefusedCredentialsNameTheirSource: a 401 or 403 of credentials
// that were sent says where they came from (the index URL, the netrc
// file by its path, the caller's From) and what to correct there, with
// the remedy for that source, never the user or the password: a wrong
// password in the index URL was "check the credentials for its host
// (netrc or the environment)", as if it came from there.
func TestRefusedCredentialsNameTheirSource(t *testing.T) {
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret" {
			w.WriteHeader(int(status.Load()))
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<a href="a.whl">a</a>`)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	wrong := filepath.Join(dir, "netrc")
	os.WriteFile(wrong, []byte("machine 127.0.0.1 login alice password n0pe-netrc\n"), 0o600)
	unreadable := filepath.Join(dir, "a-directory")
	os.Mkdir(unreadable, 0o700)
	url := func(userinfo string) string { return "http://" + userinfo + "@" + host + "/simple/" }
	for _, tt := range []struct {
		name, index, netrc string
		creds              []Credential
		want, not          []string
		action             refusal.Action
		target             string
	}{
		{name: "URL password", index: url("alice:n0pe-url"), netrc: wrong,
			want: []string{"the user and password the index URL gives for " + host, "give the right ones in the index URL"}, not: []string{"netrc file", "environment"},
			action: refusal.ActionIndexCredentials},
		{name: "URL token", index: url("t0ken-n0pe"),
			want: []string{"the user (a token) the index URL gives"}, action: refusal.ActionIndexCredentials},
		// An unreadable netrc is not why: the URL's were sent.
		{name: "URL password, netrc unreadable", index: url("alice:n0pe-url"), netrc: unreadable,
			want: []string{"the index URL gives"}, not: []string{"could not be read"}, action: refusal.ActionIndexCredentials},
		{name: "netrc", index: srv.URL + "/simple/", netrc: wrong,
			want: []string{"the machine 127.0.0.1 entry of the netrc file " + wrong, "correct that entry"}, not: []string{"index URL gives"},
			action: refusal.ActionNameNetrc, target: wrong},
		{name: "the caller's", index: srv.URL + "/simple/", netrc: wrong,
			creds: []Credential{{Host: host, Username: "alice", Password: "n0pe-env", From: "the environment variables U and P"}},
			want:  []string{"from the environment variables U and P", "correct them there"}, not: []string{"netrc"}},
	} {
		for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
			t.Run(fmt.Sprintf("%s/%d", tt.name, code), func(t *testing.T) {
				status.Store(int32(code))
				cl, err := New(tt.index, Options{Netrc: tt.netrc, Credentials: tt.creds})
				if err != nil {
					t.Fatal(err)
				}
				for _, get := range []func() error{
					func() error { _, err := cl.Project(context.Background(), "foo"); return err },
					func() error {
						rc, _, err := cl.Open(context.Background(), File{Filename: "a.whl", URL: srv.URL + "/files/a.whl"})
						if rc != nil {
							rc.Close()
						}
						return err
					},
				} {
					err := get()
					if !errors.Is(err, refusal.FetchFailed) || !strings.Contains(err.Error(), fmt.Sprintf("(HTTP %d)", code)) {
						t.Fatalf("%v, want fetch_failed naming HTTP %d", err, code)
					}
					for _, w := range tt.want {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("%v, want %q in it", err, w)
						}
					}
					for _, n := range append(tt.not, "n0pe", "t0ken", "alice") {
						if strings.Contains(err.Error(), n) {
							t.Errorf("%v, has %q", err, n)
						}
					}
					rem := refusal.RemedyOf(err)
					if tt.action == "" && rem != nil || tt.action != "" && (rem == nil || rem.Action != tt.action || rem.Target != tt.target) {
						t.Errorf("remedy %+v, want %q of %q", rem, tt.action, tt.target)
					}
				}
			})
		}
	}
}

// TestPageRetryEvents (issue 11 item 9): a stalled index (it accepts and
// answers slowly, or not at all) reports each retry through Events, so a
// command can print a line per retry instead of hanging silently. One
// that drips its page a byte at a time is stalled too: a stall deadline
// needs StallBytes, not one byte (a byte each 20 ms kept the client
// waiting, silent, until the whole-request deadline).
func TestPageRetryEvents(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/silent/":
			<-r.Context().Done() // accepts, never answers
		case "/simple/slow/":
			time.Sleep(50 * time.Millisecond)
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/simple/drip/":
			w.Header().Set("Content-Type", "text/html")
			for i := 0; i < 1000; i++ {
				if _, err := w.Write([]byte(" ")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}))
	defer srv.Close()
	for _, name := range []string{"silent", "slow", "drip"} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var retries []Event
			cl, _ := New(srv.URL+"/simple/", Options{StallTimeout: 100 * time.Millisecond, Attempts: 3, Backoff: time.Millisecond,
				Events: func(e Event) { mu.Lock(); retries = append(retries, e); mu.Unlock() }})
			_, err := cl.Project(context.Background(), name)
			if !errors.Is(err, refusal.FetchFailed) {
				t.Fatalf("%v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(retries) != 2 {
				t.Fatalf("%d retry events, want 2: %v", len(retries), retries)
			}
			for i, e := range retries {
				if e.Kind != EventRetry || e.Attempt != i+1 || e.Attempts != 3 || e.URL != srv.URL+"/simple/"+name+"/" || e.Err == nil {
					t.Errorf("retry %d: %+v", i, e)
				}
			}
		})
	}
}

// TestPageTooLargeByItsLength: a page whose Content-Length is over the
// bound is refused at once, before its body is read; before, the client
// read up to 64 MiB of it first (about 180 MB of memory per page, for
// each of the pages read at once) and, from an index that then stalls,
// waited out the stall deadline before refusing.
func TestPageTooLargeByItsLength(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", fmt.Sprint(maxPage+1))
		io.WriteString(w, "<a ")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	cl, _ := New(srv.URL+"/simple/", Options{StallTimeout: 5 * time.Second, Attempts: 1})
	start := time.Now()
	_, err := cl.Project(context.Background(), "huge")
	if !errors.Is(err, refusal.FetchFailed) || !strings.Contains(err.Error(), "declares") {
		t.Fatalf("%v, want fetch_failed saying what the page declares", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refused after %v, want before reading the body", d)
	}
}

// TestRetryAfter: a 429 or 503 with Retry-After (seconds or an HTTP date)
// waits as long as the index asks, up to MaxRetryAfter, and says so in the
// retry event; before, the client retried after its own backoff (250 ms,
// then 500 ms and 1 s), hammering an index that asked for an hour.
func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		status       int
		want         time.Duration
	}{
		{"seconds", "2", http.StatusTooManyRequests, 2 * time.Second},
		{"an hour, capped", "3600", http.StatusServiceUnavailable, MaxRetryAfter},
		{"an HTTP date", time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat), http.StatusTooManyRequests, MaxRetryAfter},
		{"not a number", "soon", http.StatusTooManyRequests, time.Millisecond},
		{"on a 500 (not read)", "2", http.StatusInternalServerError, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", tc.header)
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got []time.Duration
			cl, _ := New(srv.URL+"/simple/", Options{Attempts: 2, Backoff: time.Millisecond,
				Events: func(e Event) { got = append(got, e.Wait); cancel() }}) // no need to wait it out
			cl.Project(ctx, "p")
			if len(got) != 1 || got[0] > tc.want || got[0] < tc.want-2*time.Second {
				t.Errorf("retry waits %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNoSuchHostIsNotRetried: an index whose host the name server says
// does not exist (a typo in --index) is refused at once, fetch_failed
// saying so; it was retried four times like a dropped connection, and the
// refusal said the index "failed 4 times".
func TestNoSuchHostIsNotRetried(t *testing.T) {
	const host = "cruxprov-no-such-host.invalid"
	var dns *net.DNSError
	if _, err := net.DefaultResolver.LookupHost(context.Background(), host); !errors.As(err, &dns) || !dns.IsNotFound {
		t.Skipf("this machine's resolver does not say %s does not exist: %v", host, err)
	}
	var retries int
	c, err := New("https://"+host+"/simple/", Options{Attempts: 4, Backoff: time.Second, Events: func(e Event) {
		if e.Kind == EventRetry {
			retries++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Project(context.Background(), "alpha")
	if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "check the index URL") {
		t.Errorf("Project: %v", err)
	}
	if retries != 0 {
		t.Errorf("%d retries of a host that does not exist", retries)
	}
	if Retryable(err) {
		t.Error("Retryable says yes")
	}
}

// TestErrorPageNotInRefusal: an index's (or its proxy's) error page is
// not pasted into the refusal, nor into a retry event's error: they name
// the status, one line. (The client drains and drops an error answer's
// body; this holds it there.)
func TestErrorPageNotInRefusal(t *testing.T) {
	const page = "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, page)
	}))
	defer srv.Close()
	var events []Event
	cl, _ := New(srv.URL+"/simple/", Options{Attempts: 2, Backoff: time.Millisecond, Events: func(e Event) { events = append(events, e) }})
	_, err := cl.Project(context.Background(), "down")
	rc, _, oerr := cl.Open(context.Background(), File{Filename: "down-1.0-py3-none-any.whl", URL: srv.URL + "/files/down-1.0-py3-none-any.whl"})
	if rc != nil {
		rc.Close()
	}
	msgs := []string{fmt.Sprint(err), fmt.Sprint(oerr)}
	for _, e := range events {
		msgs = append(msgs, e.Err.Error())
	}
	if !errors.Is(err, refusal.FetchFailed) || oerr == nil || len(events) != 1 {
		t.Fatalf("page: %v, file: %v, %d retry events", err, oerr, len(events))
	}
	for _, m := range msgs {
		if strings.ContainsAny(m, "<\r\n") || !strings.Contains(m, "503") {
			t.Errorf("%q: want one line naming the status, without the page", m)
		}
	}
}

// TestPageDeclaredLengthNotAllocated: a page whose declared length is
// within the bound but which sends a few bytes and hangs up costs the
// bytes sent, not the length declared. Before, the client allocated the
// declared length up front: 64 MiB per attempt, for each page read at
// once.
func TestPageDeclaredLengthNotAllocated(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", fmt.Sprint(maxPage))
		io.WriteString(w, "<html><body><a ")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	cl, _ := New(srv.URL+"/simple/", Options{Attempts: 4, Backoff: time.Millisecond})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := cl.Project(context.Background(), "short")
	runtime.ReadMemStats(&after)
	if !errors.Is(err, refusal.FetchFailed) {
		t.Fatalf("%v, want fetch_failed", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("allocated %d bytes for 4 pages of a few bytes each", got)
	}
}

// TestUntrustedCertificate: an index (or the host its files are on) whose
// certificate is signed by an authority this host does not trust is
// refused at once, naming the host that presented it, with the remedy
// ca_bundle (trust its CA besides the system pool); one whose certificate
// is for other names says so, without that remedy. Each was fetch_failed
// "cannot read its page on the index …: x509: certificate signed by
// unknown authority", which said nothing of what to do.
func TestUntrustedCertificate(t *testing.T) {
	files := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("wheel bytes"))
	}))
	defer files.Close()
	pages := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<a href="%s/files/alpha-1.0-py3-none-any.whl">alpha-1.0-py3-none-any.whl</a>`, files.URL)
	})
	secure := httptest.NewTLSServer(pages)
	defer secure.Close()
	plain := httptest.NewServer(pages)
	defer plain.Close()
	trusting := &http.Client{Transport: secure.Client().Transport}
	client := func(t *testing.T, base string, hc *http.Client) (*Client, *int) {
		retries := new(int)
		c, err := New(base, Options{HTTPClient: hc, Attempts: 4, Backoff: time.Second, Events: func(e Event) {
			if e.Kind == EventRetry {
				*retries++
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		return c, retries
	}
	host := strings.TrimPrefix(secure.URL, "https://")
	t.Run("page", func(t *testing.T) {
		c, retries := client(t, secure.URL+"/simple/", nil)
		_, err := c.Project(context.Background(), "alpha")
		rem := refusal.RemedyOf(err)
		if refusal.CodeOf(err) != refusal.FetchFailed || rem == nil || rem.Action != refusal.ActionCABundle ||
			!strings.Contains(err.Error(), "the certificate "+host+" presented") || !strings.Contains(err.Error(), "trust the CA that signed it") {
			t.Fatalf("Project: %v (remedy %+v)", err, rem)
		}
		if *retries != 0 {
			t.Errorf("%d retries of an untrusted certificate", *retries)
		}
	})
	t.Run("file", func(t *testing.T) {
		c, _ := client(t, plain.URL+"/simple/", nil)
		p, err := c.Project(context.Background(), "alpha")
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Open(context.Background(), p.Files[0])
		rem := refusal.RemedyOf(err)
		if refusal.CodeOf(err) != refusal.FetchFailed || rem == nil || rem.Action != refusal.ActionCABundle ||
			!strings.Contains(err.Error(), "the certificate "+strings.TrimPrefix(files.URL, "https://")+" presented") {
			t.Fatalf("Open: %v (remedy %+v)", err, rem)
		}
	})
	t.Run("other name", func(t *testing.T) {
		// httptest's certificate is for 127.0.0.1 and example.com, not localhost.
		_, port, _ := net.SplitHostPort(host)
		c, retries := client(t, "https://localhost:"+port+"/simple/", trusting)
		_, err := c.Project(context.Background(), "alpha")
		if refusal.CodeOf(err) != refusal.FetchFailed || refusal.RemedyOf(err) != nil || !strings.Contains(err.Error(), "is not for that name") {
			t.Fatalf("Project: %v", err)
		}
		if *retries != 0 {
			t.Errorf("%d retries of a certificate for other names", *retries)
		}
	})
	t.Run("an https proxy", func(t *testing.T) {
		// The proxy's certificate: it named the index's host.
		pu, _ := url.Parse(secure.URL)
		c, _ := client(t, "https://index.example/simple/", &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}})
		_, err := c.Project(context.Background(), "alpha")
		rem := refusal.RemedyOf(err)
		if refusal.CodeOf(err) != refusal.FetchFailed || rem == nil || rem.Action != refusal.ActionCABundle ||
			!strings.Contains(err.Error(), "the certificate the proxy "+secure.URL+" presented") {
			t.Fatalf("Project: %v (remedy %+v)", err, rem)
		}
	})
	t.Run("trusted", func(t *testing.T) {
		c, _ := client(t, secure.URL+"/simple/", trusting)
		if _, err := c.Project(context.Background(), "alpha"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestProxyRefusal: a proxy that answers 407 (it wants credentials), to
// the CONNECT of an https index or to a plain http request, is refused at
// once naming the proxy (its password redacted) and saying to give it
// credentials; a CONNECT it answers 403 (the host not allowed) says that.
// The CONNECT's answers were transport failures, retried four times and
// said as "check the index and retry"; the plain 407 named no next step.
func TestProxyRefusal(t *testing.T) {
	var status atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Proxy-Authenticate", `Basic realm="proxy"`)
		w.WriteHeader(int(status.Load()))
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	pu.User = url.UserPassword("puser", "proxy-s3cret")
	for _, tt := range []struct {
		name, index string
		status      int
		want        string
	}{
		{"connect 407", "https://index.example.invalid/simple/", 407, "asks for credentials (HTTP 407)"},
		{"plain 407", "http://index.example.invalid/simple/", 407, "asks for credentials (HTTP 407)"},
		{"connect 403", "https://index.example.invalid/simple/", 403, "would not connect to the host"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status.Store(int32(tt.status))
			tr := &http.Transport{Proxy: http.ProxyURL(pu), OnProxyConnectResponse: CheckProxyConnect}
			var retries int
			c, err := New(tt.index, Options{HTTPClient: &http.Client{Transport: tr}, Attempts: 4, Backoff: time.Second, Events: func(e Event) {
				if e.Kind == EventRetry {
					retries++
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Project(context.Background(), "alpha")
			if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Project: %v, want fetch_failed saying %q", err, tt.want)
			}
			if strings.HasPrefix(tt.index, "https") && !strings.Contains(err.Error(), "the proxy http://puser:xxxxx@"+pu.Host) {
				t.Errorf("Project: %v, want the proxy named, redacted", err)
			}
			if strings.Contains(err.Error(), "proxy-s3cret") {
				t.Errorf("the proxy's password is in %v", err)
			}
			if retries != 0 {
				t.Errorf("%d retries of a proxy's refusal", retries)
			}
		})
	}
}

// tlsCloser listens on loopback and answers every connection with a TLS
// handshake (the certificate of an httptest TLS server), closing it when
// the handshake fails, with a reset where reset is set: how python's ssl
// server (a reset) and openssl s_server (a close) answer a plain HTTP
// request, where Go's answers a 400.
func tlsCloser(t *testing.T, reset bool) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.StartTLS()
	cfg := srv.TLS.Clone()
	srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				if err := tls.Server(conn, cfg).Handshake(); err != nil && reset {
					conn.(*net.TCPConn).SetLinger(0)
				}
				conn.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// TestSchemeMismatch: an http:// index whose port speaks TLS (Go's
// server answers a 400, python's resets, openssl's closes), or an https://
// index whose port answers in plain HTTP (Go's server, or one that
// answers a ClientHello with an HTML error page), is refused at once,
// not retried, saying to pin it with the other scheme (remedy
// index_scheme); a file listed at another host with the wrong scheme
// says to fix the index's links. Each was retried four times as a reset
// or garbled connection, then "check the index and retry". A plain port
// that resets is still retried.
func TestSchemeMismatch(t *testing.T) {
	goTLS := httptest.NewTLSServer(http.NotFoundHandler())
	defer goTLS.Close()
	goPlain := httptest.NewServer(http.NotFoundHandler())
	defer goPlain.Close()
	htmlOnly, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer htmlOnly.Close()
	go func() {
		for {
			conn, err := htmlOnly.Accept()
			if err != nil {
				return
			}
			io.WriteString(conn, "<!DOCTYPE HTML>\n<html><body>Error response</body></html>\n")
			conn.Close()
		}
	}()
	// A plain port that resets every connection: a transport failure, retried.
	resetting, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer resetting.Close()
	go func() {
		for {
			conn, err := resetting.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 4096)
				conn.Read(buf)
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}()
		}
	}()
	for _, tt := range []struct {
		name, index, want, scheme string
		retried                   bool
	}{
		{"http to Go's TLS server", "http://" + goTLS.Listener.Addr().String() + "/simple/", "https://" + goTLS.Listener.Addr().String() + "/simple/", "https", false},
		{"http to a TLS port that resets", "http://" + tlsCloser(t, true) + "/simple/", "speaks TLS (HTTPS)", "https", false},
		{"http to a TLS port that closes", "http://" + tlsCloser(t, false) + "/simple/", "speaks TLS (HTTPS)", "https", false},
		{"https to Go's plain server", "https://" + goPlain.Listener.Addr().String() + "/simple/", "http://" + goPlain.Listener.Addr().String() + "/simple/", "http", false},
		{"https to a plain port that answers HTML", "https://" + htmlOnly.Addr().String() + "/simple/", "answers in plain HTTP, not TLS", "http", false},
		{"http to a plain port that resets", "http://" + resetting.Addr().String() + "/simple/", "failed 2 times", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var retries atomic.Int32
			c, err := New(tt.index, Options{Attempts: 2, Backoff: time.Millisecond, Events: func(e Event) {
				if e.Kind == EventRetry {
					retries.Add(1)
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Project(context.Background(), "alpha")
			rem := refusal.RemedyOf(err)
			if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Project: %v, want fetch_failed saying %q", err, tt.want)
			}
			if tt.retried {
				if rem != nil || retries.Load() != 1 {
					t.Errorf("a plain port that resets: %d retries, remedy %+v", retries.Load(), rem)
				}
				return
			}
			if rem == nil || rem.Action != refusal.ActionIndexScheme || rem.Target != tt.scheme {
				t.Errorf("Project: %v: remedy %+v, want %s %q", err, rem, refusal.ActionIndexScheme, tt.scheme)
			}
			if retries.Load() != 0 {
				t.Errorf("%d retries of a scheme the port does not speak", retries.Load())
			}
		})
	}
	t.Run("an https proxy that answers in plain HTTP", func(t *testing.T) {
		// The proxy's failure, not the index's: no advice to pin the
		// index as http://.
		pu, _ := url.Parse("https://" + goPlain.Listener.Addr().String())
		c, err := New("https://index.example/simple/", Options{HTTPClient: &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}, Attempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Project(context.Background(), "alpha")
		if err == nil || refusal.RemedyOf(err) != nil || strings.Contains(err.Error(), "pinned as https://") {
			t.Errorf("Project: %v (remedy %+v), want no advice to pin the index as http://", err, refusal.RemedyOf(err))
		}
	})
	t.Run("a file listed with the wrong scheme", func(t *testing.T) {
		c, err := New(goPlain.URL+"/simple/", Options{Attempts: 2, Backoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"http://" + goTLS.Listener.Addr().String() + "/a.whl", "https://" + htmlOnly.Addr().String() + "/a.whl?sig=s3cret"} {
			_, _, err = c.Open(context.Background(), File{Filename: "a.whl", URL: u})
			if refusal.CodeOf(err) != refusal.FetchFailed || refusal.RemedyOf(err) != nil || !strings.Contains(err.Error(), "fix the index's links") || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Open %s: %v, want fetch_failed saying to fix the links, no remedy", u, err)
			}
		}
	})
}

// TestFailuresSayWhatToDo: a failure of the index, or of the proxy the
// request went through, names which it was and what to check. A proxy
// whose host does not exist was "the index …: its host … does not exist;
// check the index URL", one that accepts no connections "index … failed 4
// times; check the index and retry", as was an index nothing listens at;
// a plain request's 407 named no proxy; an index URL without /simple/
// ("mirror it there or pin another index"), a page or file answered 400
// or 405 ("cannot read its page"; "GET …: HTTP 405"), or a file host that
// does not exist, or a page that is not a project page (an API version 2)
// named no next step.
func TestFailuresSayWhatToDo(t *testing.T) {
	const noHost = "cruxprov-no-such-host.invalid"
	var dns *net.DNSError
	resolves := true
	if _, err := net.DefaultResolver.LookupHost(context.Background(), noHost); !errors.As(err, &dns) || !dns.IsNotFound {
		resolves = false
	}
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := status.Load(); s == 299 {
			w.Header().Set("Content-Type", ContentTypeJSON)
			io.WriteString(w, `{"meta": {"api-version": "2.0"}, "files": []}`)
			return
		} else if s != 0 {
			w.WriteHeader(int(s))
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<a href="a.whl">a</a>`)
	}))
	defer srv.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := closed.Addr().String()
	closed.Close() // nothing accepts connections there
	via := func(proxy string) *http.Client {
		pu, _ := url.Parse(proxy)
		return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	}
	for _, tt := range []struct {
		name, index string
		hc          *http.Client
		status      int32
		file        string // Open this URL rather than read a page
		dns         bool
		want, not   string
	}{
		{name: "proxy host does not exist", index: "http://index.example/simple/", hc: via("http://u:pw-s3cret@" + noHost + ":3128"), dns: true,
			want: "the proxy http://u:xxxxx@" + noHost + ":3128: its host " + noHost + " does not exist (no such host); check the proxy's URL", not: "check the index URL"},
		{name: "proxy accepts no connections", index: "http://index.example/simple/", hc: via("http://" + dead),
			want: "the proxy http://" + dead + " could not be reached, 2 times", not: "check the index and retry"},
		{name: "proxy asks for credentials", index: "http://index.example/simple/", hc: via(srv.URL), status: http.StatusProxyAuthRequired,
			want: "the proxy " + srv.URL + " asks for credentials (HTTP 407)"},
		{name: "nothing accepts connections at the index", index: "http://" + dead + "/simple/",
			want: "nothing accepts connections at " + dead + ", 2 times", not: "check the index and retry"},
		{name: "an index URL without /simple/", index: srv.URL + "/", status: http.StatusNotFound,
			want: "usually ends in /simple/"},
		{name: "an index URL with /simple/", index: srv.URL + "/simple/", status: http.StatusNotFound,
			want: "project foo is not on the index", not: "usually ends in /simple/"},
		{name: "a page answered 405", index: srv.URL + "/simple/", status: http.StatusMethodNotAllowed,
			want: "would not serve its page; check the index URL"},
		{name: "a page that is not a project page", index: srv.URL + "/simple/", status: 299,
			want: "is not a valid project page; check the index URL, and fix the index or pin one"},
		{name: "a file answered 405", index: srv.URL + "/simple/", status: http.StatusMethodNotAllowed, file: srv.URL + "/files/a.whl",
			want: "a.whl: the index " + srv.URL + "/simple/ lists it at " + srv.URL + "/files/a.whl, which would not serve it (HTTP 405); fix the index"},
		{name: "a file's host does not exist", index: srv.URL + "/simple/", file: "https://" + noHost + "/a.whl", dns: true,
			want: "whose host " + noHost + " does not exist (no such host); fix the index's links"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.dns && !resolves {
				t.Skipf("this machine's resolver does not say %s does not exist", noHost)
			}
			status.Store(tt.status)
			var retries int
			c, err := New(tt.index, Options{HTTPClient: tt.hc, Attempts: 2, Backoff: time.Millisecond, Events: func(e Event) {
				if e.Kind == EventRetry {
					retries++
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			if tt.file != "" {
				_, _, err = c.Open(context.Background(), File{Filename: "a.whl", URL: tt.file})
			} else {
				_, err = c.Project(context.Background(), "foo")
			}
			if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), tt.want) || (tt.not != "" && strings.Contains(err.Error(), tt.not)) {
				t.Fatalf("%v, want fetch_failed saying %q (and not %q)", err, tt.want, tt.not)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the proxy's password is in %v", err)
			}
		})
	}
}

// TestTLSHandshakeRefused: a server that refuses this client's TLS
// handshake (it wants a client certificate, or shares no TLS version with
// it) is refused at once, saying which and what to do; each was retried
// four times, then "check the index and retry".
func TestTLSHandshakeRefused(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<a href="a.whl">a</a>`)
	})
	for _, tt := range []struct {
		name  string
		setup func(*tls.Config)
		want  string
	}{
		{"client certificate required", func(c *tls.Config) { c.ClientAuth = tls.RequireAnyClientCert }, "asks for a TLS client certificate"},
		{"TLS 1.1 only", func(c *tls.Config) { c.MinVersion, c.MaxVersion = tls.VersionTLS10, tls.VersionTLS11 }, "share no TLS version and cipher suite"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(page)
			srv.TLS = &tls.Config{}
			tt.setup(srv.TLS)
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.StartTLS()
			defer srv.Close()
			var retries int
			c, err := New(srv.URL+"/simple/", Options{HTTPClient: &http.Client{Transport: srv.Client().Transport}, Attempts: 4, Backoff: time.Millisecond, Events: func(e Event) {
				if e.Kind == EventRetry {
					retries++
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Project(context.Background(), "alpha")
			host := strings.TrimPrefix(srv.URL, "https://")
			if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Project: %v, want fetch_failed saying %q", err, tt.want)
			}
			if retries != 0 {
				t.Errorf("%d retries of a handshake the server refuses", retries)
			}
			_, _, err = c.Open(context.Background(), File{Filename: "a.whl", URL: srv.URL + "/files/a.whl"})
			if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open: %v, want fetch_failed saying %q", err, tt.want)
			}
		})
	}
}
