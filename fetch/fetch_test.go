package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cruxible/cruxprov/internal/testdir"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
)

type wheelFixture struct {
	name, version, filename string
	data                    []byte
}

// fixtures are three "wheels": any bytes will do, they are blobs here.
func fixtures() []wheelFixture {
	var out []wheelFixture
	for i, n := range []string{"alpha", "beta", "gamma"} {
		data := bytes.Repeat([]byte(fmt.Sprintf("PK %s wheel bytes %d\n", n, i)), 4000+i*1000)
		out = append(out, wheelFixture{n, "1.0", n + "-1.0-py3-none-any.whl", data})
	}
	return out
}

func hexOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// resolution locks the fixtures with URLs on another host, as a lock made
// against a public index names them.
func resolution(fx []wheelFixture) lockfile.Resolution {
	r := lockfile.Resolution{Platform: "cp311-manylinux_2_36_x86_64"}
	for _, f := range fx {
		r.Packages = append(r.Packages, lockfile.ResolvedWheel{Name: f.name, Version: f.version, Filename: f.filename,
			URL: "https://files.pypi.example.invalid/packages/" + f.filename, Size: int64(len(f.data)), SHA256: digest.Sum(f.data)})
	}
	return r
}

// faultServer is an index that misbehaves on purpose, for one file.
type faultServer struct {
	t      testing.TB
	srv    *httptest.Server
	off    *httptest.Server
	fx     []wheelFixture
	target string // the filename the fault applies to
	mode   string
	delay  time.Duration // per 8 KiB chunk, for every file

	mu    sync.Mutex
	hits  map[string]int
	pages map[string]int
}

func newFaultServer(t testing.TB, fx []wheelFixture, target, mode string) *faultServer {
	t.Helper()
	s := &faultServer{t: t, fx: fx, target: target, mode: mode, hits: map[string]int{}, pages: map[string]int{}}
	s.off = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "elsewhere") }))
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() { s.srv.Close(); s.off.Close() })
	return s
}

func (s *faultServer) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if moved, ok := strings.CutPrefix(p, "/simple/_moved/"); ok {
		p = "/files/" + moved
	} else if strings.HasPrefix(p, "/simple/") {
		name := strings.Trim(strings.TrimPrefix(p, "/simple/"), "/")
		if !strings.HasSuffix(p, "/") { // as static servers do
			http.Redirect(w, r, p+"/", http.StatusMovedPermanently)
			return
		}
		s.mu.Lock()
		s.pages[name]++
		s.mu.Unlock()
		var b strings.Builder
		found := false
		for _, f := range s.fx {
			if f.name != name {
				continue
			}
			found = true
			h := hexOf(f.data)
			attrs := ""
			if f.filename == s.target {
				switch s.mode {
				case "unlisted":
					continue
				case "listed-hash":
					h = hexOf([]byte("other"))
				case "yanked":
					attrs = ` data-yanked="superseded"`
				}
			}
			href := "../../files/" + f.filename
			if f.filename == s.target && strings.HasPrefix(s.mode, "at:") {
				href = "http://" + strings.TrimPrefix(s.mode, "at:") + "/files/" + f.filename // listed on another host
			}
			fmt.Fprintf(&b, "<a href=\"%s#sha256=%s\"%s>%s</a>\n", href, h, attrs, f.filename)
		}
		if !found || (name == "beta" && s.mode == "page404") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, b.String())
		return
	}
	fn := strings.TrimPrefix(p, "/files/")
	var f *wheelFixture
	for i := range s.fx {
		if s.fx[i].filename == fn {
			f = &s.fx[i]
		}
	}
	if f == nil {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.hits[fn]++
	n := s.hits[fn]
	delay := s.delay
	s.mu.Unlock()
	data := f.data
	if fn == s.target {
		switch s.mode {
		case "500once":
			if n == 1 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		case "503always":
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case "resetonce", "truncateonce", "truncate":
			if n == 1 || s.mode == "truncate" {
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					s.t.Error(err)
					return
				}
				fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(data))
				buf.Write(data[:len(data)/2])
				buf.Flush()
				if s.mode == "resetonce" {
					conn.(*net.TCPConn).SetLinger(0) // RST, not FIN
				}
				conn.Close()
				return
			}
		case "wrong":
			data = bytes.ToUpper(data)
		case "short":
			data = data[:len(data)-10]
		case "drip":
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			for i := 0; i < len(data); i++ {
				if _, err := w.Write(data[i : i+1]); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				time.Sleep(20 * time.Millisecond)
			}
			return
		case "redirect-off":
			http.Redirect(w, r, s.off.URL+"/"+fn, http.StatusFound)
			return
		case "redirect-in":
			if !strings.HasPrefix(r.URL.Path, "/simple/_moved/") {
				http.Redirect(w, r, "/simple/_moved/"+fn, http.StatusFound)
				return
			}
		case "404":
			http.NotFound(w, r)
			return
		}
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	for off := 0; off < len(data); off += 8 << 10 {
		end := min(off+8<<10, len(data))
		if _, err := w.Write(data[off:end]); err != nil {
			return
		}
		if delay > 0 {
			w.(http.Flusher).Flush()
			time.Sleep(delay)
		}
	}
}

func client(t testing.TB, base string) *index.Client {
	t.Helper()
	c, err := index.New(base+"/simple", index.Options{Timeout: 500 * time.Millisecond, StallTimeout: 400 * time.Millisecond, Backoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// storeContents lists the store's blob directory and checks every blob's
// bytes against its name.
func storeContents(t *testing.T, st *store.Store) []string {
	t.Helper()
	dir := filepath.Join(st.Home(), store.BlobsDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, e := range ents {
		out = append(out, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if hexOf(b) != e.Name() {
			t.Errorf("store holds %s with other bytes", e.Name())
		}
	}
	for _, sub := range []string{store.TmpDir} {
		if ents, _ := os.ReadDir(filepath.Join(st.Home(), sub)); len(ents) != 0 {
			t.Errorf("debris in %s: %v", sub, ents)
		}
	}
	sort.Strings(out)
	return out
}

func TestFaults(t *testing.T) {
	fx := fixtures()
	target := fx[1].filename
	tests := []struct {
		mode     string
		want     refusal.Code // "" = success
		attempts int          // of the target, on success
	}{
		{"none", "", 1},
		{"500once", "", 2},
		{"resetonce", "", 2},
		{"truncateonce", "", 2},
		{"redirect-in", "", 1},
		{"yanked", "", 1},
		{"503always", refusal.FetchFailed, 0},
		{"truncate", refusal.FetchFailed, 0},
		{"wrong", refusal.HashMismatch, 0},
		{"short", refusal.SizeMismatch, 0},
		{"drip", refusal.FetchFailed, 0},
		{"redirect-off", refusal.IndexNotPinned, 0},
		{"404", refusal.FetchFailed, 0},
		{"unlisted", refusal.FetchFailed, 0},
		{"listed-hash", refusal.HashMismatch, 0},
		{"page404", refusal.FetchFailed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			srv := newFaultServer(t, fx, target, tt.mode)
			st, err := store.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var evMu sync.Mutex
			var events []Event
			rep, err := Fetch(context.Background(), st, client(t, srv.srv.URL), resolution(fx), Options{Jobs: 3, Backoff: 5 * time.Millisecond,
				Events: func(e Event) { evMu.Lock(); events = append(events, e); evMu.Unlock() }})
			got := storeContents(t, st)
			if tt.want != "" {
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %s", err, tt.want)
				}
				for _, h := range got {
					if h == hexOf(fx[1].data) {
						t.Errorf("the faulty wheel is in the store")
					}
				}
				if strings.Contains(err.Error(), "pypi.example.invalid") {
					t.Errorf("the lock's URL was used: %v", err)
				}
				if tt.mode == "unlisted" {
					// DESIGN §4: a file the index does not list is
					// fetch_failed naming the file and the index.
					if !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), srv.srv.URL+"/simple/") {
						t.Errorf("%v: does not name %s and the index %s/simple/", err, target, srv.srv.URL)
					}
				}
				if tt.want == refusal.HashMismatch || tt.want == refusal.SizeMismatch {
					// Issue 11: the refusal names the wheel and its URL.
					if u := srv.srv.URL + "/files/" + target; !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), u) {
						t.Errorf("%v: does not name %s and %s", err, target, u)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := []string{hexOf(fx[0].data), hexOf(fx[1].data), hexOf(fx[2].data)}
			sort.Strings(want)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("store holds %v, want %v", got, want)
			}
			if rep.Downloaded != 3 || rep.Wheels[1].Attempts != tt.attempts {
				t.Errorf("report %+v", rep)
			}
			if !strings.HasPrefix(rep.Wheels[1].URL, srv.srv.URL) {
				t.Errorf("downloaded from %s, not the pinned index", rep.Wheels[1].URL)
			}
			if tt.mode == "yanked" && (!rep.Wheels[1].Yanked || rep.Wheels[1].YankedReason != "superseded") {
				t.Errorf("yanked not reported: %+v", rep.Wheels[1])
			}
			for name, n := range srv.pages {
				if n != 1 {
					t.Errorf("page %s fetched %d times", name, n)
				}
			}
			done := 0
			for _, e := range events {
				if e.Kind == EventDone {
					done++
				}
			}
			if done != 3 {
				t.Errorf("%d done events", done)
			}
		})
	}
}

func TestOffline(t *testing.T) {
	fx := fixtures()
	srv := newFaultServer(t, fx, "", "none")
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res := resolution(fx)
	if _, err := Fetch(context.Background(), st, nil, res, Options{Offline: true}); !errors.Is(err, refusal.OfflineMiss) {
		t.Fatalf("offline on an empty store: %v", err)
	}
	if _, err := Fetch(context.Background(), st, client(t, srv.srv.URL), res, Options{}); err != nil {
		t.Fatal(err)
	}
	srv.srv.Close() // nothing may touch the network now
	rep, err := Fetch(context.Background(), st, nil, res, Options{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range rep.Wheels {
		if !w.Cached {
			t.Errorf("%s not served from the store", w.Filename)
		}
	}
	// Online again, the store serves what it has: no request is made.
	if _, err := Fetch(context.Background(), st, client(t, srv.srv.URL), res, Options{}); err != nil {
		t.Fatalf("second online fetch touched the network: %v", err)
	}
	// A lock whose size disagrees with the stored blob is refused.
	res.Packages[0].Size++
	if _, err := Fetch(context.Background(), st, nil, res, Options{Offline: true}); !errors.Is(err, refusal.SizeMismatch) {
		t.Errorf("size disagreement: %v", err)
	}
}

func TestCancel(t *testing.T) {
	fx := fixtures()
	srv := newFaultServer(t, fx, fx[0].filename, "drip")
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(150*time.Millisecond, cancel)
	c, _ := index.New(srv.srv.URL+"/simple/", index.Options{})
	_, err = Fetch(ctx, st, c, resolution(fx), Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	for _, h := range storeContents(t, st) {
		if strings.HasPrefix(h, ".tmp-") || h == hexOf(fx[0].data) {
			t.Errorf("store holds %s after cancellation", h)
		}
	}
}

// TestCancelKeepsVerified: the wheels downloaded and verified before a
// cancellation (Ctrl-C) are kept in the store, while the one in flight
// leaves nothing: the interrupted command says the wheels it fetched stay
// and the run again does not fetch them twice, but they were discarded
// (up to 63 of them, a commit batch), and fetched again.
func TestCancelKeepsVerified(t *testing.T) {
	fx := fixtures()
	srv := newFaultServer(t, fx, fx[0].filename, "drip")
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var done atomic.Int32
	c, _ := index.New(srv.srv.URL+"/simple/", index.Options{})
	_, err = Fetch(ctx, st, c, resolution(fx), Options{Events: func(e Event) {
		if e.Kind == EventDone && done.Add(1) == 2 {
			cancel() // beta and gamma verified; alpha still dripping
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	got := storeContents(t, st)
	want := []string{hexOf(fx[1].data), hexOf(fx[2].data)}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("store after cancellation holds %v, want the two wheels verified before it, %v", got, want)
	}
}

// TestListedFileMissing: a file the index's page lists but does not
// serve (404) is fetch_failed naming the file, the URL the page lists and
// what to do, at once; it said only "… from URL: GET URL: HTTP 404 Not
// Found".
func TestListedFileMissing(t *testing.T) {
	fx := fixtures()
	srv := newFaultServer(t, fx, fx[1].filename, "404")
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Fetch(context.Background(), st, client(t, srv.srv.URL), resolution(fx), Options{})
	want := fx[1].filename + ": the index " + srv.srv.URL + "/simple/ lists it at " + srv.srv.URL + "/files/" + fx[1].filename + ", which is not there (HTTP 404); the index links a file it does not serve: fix the index, or pin one that serves it"
	if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want fetch_failed saying %q", err, want)
	}
	srv.mu.Lock() // the other files' requests may still be served
	n := srv.hits[fx[1].filename]
	srv.mu.Unlock()
	if n != 1 {
		t.Errorf("the missing file was requested %d times", n)
	}
}

// TestListedHostNotServing: a file listed on a host where nothing
// accepts connections is retried, then says so, naming the host and that
// the index lists the file there; it said "check the index and retry".
func TestListedHostNotServing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	fx := fixtures()
	srv := newFaultServer(t, fx, fx[1].filename, "at:"+dead)
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Fetch(context.Background(), st, client(t, srv.srv.URL), resolution(fx), Options{Backoff: time.Millisecond})
	want := "nothing accepts connections at " + dead + ", where the index " + srv.srv.URL + "/simple/ lists it, 4 times; check that host is serving, or fix the index's links"
	if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), fx[1].filename) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want fetch_failed saying %q", err, want)
	}
}

// TestMain doubles as the child of TestTwoProcesses: with
// CRUXPROV_FETCH_CHILD set it fetches one resolution and exits.
func TestMain(m *testing.M) {
	if spec := os.Getenv("CRUXPROV_FETCH_CHILD"); spec != "" {
		var args struct {
			Index, Home string
			Res         lockfile.Resolution
		}
		if err := json.Unmarshal([]byte(spec), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		st, err := store.Open(args.Home)
		if err == nil {
			var c *index.Client
			if c, err = index.New(args.Index, index.Options{}); err == nil {
				_, err = Fetch(context.Background(), st, c, args.Res, Options{Jobs: 2})
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestTwoProcesses(t *testing.T) {
	fx := fixtures()
	srv := newFaultServer(t, fx, "", "none")
	srv.mu.Lock()
	srv.delay = 5 * time.Millisecond // slow enough that the two overlap
	srv.mu.Unlock()
	home := t.TempDir()
	spec, _ := json.Marshal(map[string]any{"Index": srv.srv.URL + "/simple/", "Home": home, "Res": resolution(fx)})
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CRUXPROV_FETCH_CHILD="+string(spec))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v: %s", i, err, outs[i])
		}
	}
	st, _ := store.Open(home)
	got := storeContents(t, st)
	want := []string{hexOf(fx[0].data), hexOf(fx[1].data), hexOf(fx[2].data)}
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("store holds %v, want %v", got, want)
	}
	srv.mu.Lock()
	t.Logf("downloads per file: %v", srv.hits)
	srv.mu.Unlock()
}

// TestUnsized: a lock without sizes still fetches (the hash decides), and
// wrong bytes are still refused.
func TestUnsized(t *testing.T) {
	fx := fixtures()
	for _, mode := range []string{"none", "wrong"} {
		t.Run(mode, func(t *testing.T) {
			srv := newFaultServer(t, fx, fx[2].filename, mode)
			st, err := store.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			res := resolution(fx)
			for i := range res.Packages {
				res.Packages[i].Size = 0
			}
			rep, err := Fetch(context.Background(), st, client(t, srv.srv.URL), res, Options{})
			got := storeContents(t, st)
			if mode == "none" {
				if err != nil || len(got) != 3 || rep.Wheels[2].Size != int64(len(fx[2].data)) {
					t.Fatalf("unsized: %v %v %+v", err, got, rep)
				}
				return
			}
			if !errors.Is(err, refusal.HashMismatch) {
				t.Fatalf("unsized wrong bytes: %v", err)
			}
			for _, h := range got {
				if h == hexOf(fx[2].data) {
					t.Error("wrong bytes stored")
				}
			}
		})
	}
}

// TestHashMismatchRedactsURL: the URL a hash_mismatch names carries no
// credentials.
func TestHashMismatchRedactsURL(t *testing.T) {
	fx := fixtures()
	srv := newFaultServer(t, fx, fx[0].filename, "wrong")
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := index.New(strings.Replace(srv.srv.URL, "http://", "http://ci:hunter2@", 1)+"/simple/", index.Options{Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Fetch(context.Background(), st, c, resolution(fx), Options{})
	if !errors.Is(err, refusal.HashMismatch) || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), fx[0].filename) {
		t.Fatalf("%v", err)
	}
}

// damage writes 7 bytes into the file at p in place (size and mtime
// unchanged), as `dd conv=notrunc` does; the sleep lets the kernel's
// coarse clock, which sets ctime, tick past the stamp's.
func damage(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	os.Chmod(p, 0o644)
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("DAMAGED"), 100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Chmod(p, 0o444)
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
}

// TestDamagedBlobRefetched (issue 11 item 6): a blob written to in place
// is not "cached": offline, it is removed and refused as such (to be
// fetched online); online, it is removed and fetched again.
func TestDamagedBlobRefetched(t *testing.T) {
	fx := fixtures()
	srv := newFaultServer(t, fx, "", "none")
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res := resolution(fx)
	c := client(t, srv.srv.URL)
	if _, err := Fetch(context.Background(), st, c, res, Options{}); err != nil {
		t.Fatal(err)
	}
	bad := res.Packages[1]

	damage(t, st.Path(bad.SHA256))
	_, err = Fetch(context.Background(), st, nil, res, Options{Offline: true})
	if !errors.Is(err, refusal.OfflineMiss) || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "removed") ||
		!strings.Contains(err.Error(), bad.Filename) || !strings.Contains(err.Error(), "online") {
		t.Fatalf("offline, damaged: %v", err)
	}
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionFetch {
		t.Errorf("remedy %+v, want fetch", r)
	}
	if ok, _ := st.Has(bad.SHA256); ok {
		t.Fatal("the damaged blob is still in the store")
	}
	if _, err := Fetch(context.Background(), st, c, res, Options{}); err != nil {
		t.Fatal(err)
	}

	damage(t, st.Path(bad.SHA256))
	var mu sync.Mutex
	var kinds []EventKind
	rep, err := Fetch(context.Background(), st, c, res, Options{Events: func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Filename == bad.Filename {
			kinds = append(kinds, e.Kind)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	w := rep.Wheels[1]
	if w.Filename != bad.Filename || w.Cached || !w.Damaged || rep.Downloaded != 1 {
		t.Errorf("online, damaged: %+v", rep)
	}
	if len(kinds) == 0 || kinds[0] != EventDamaged || kinds[len(kinds)-1] != EventDone {
		t.Errorf("events %v", kinds)
	}
	if got := storeContents(t, st); len(got) != 3 {
		t.Errorf("store %v", got)
	}
}

// TestNoSpace (issue 11 item 9): a full disk while fetching is a
// *store.SpaceError naming the store, not a refusal that blames the
// index, and nothing is retried or left behind.
func TestNoSpace(t *testing.T) {
	dir := testdir.Tmpfs(t, "64k")
	fx := fixtures()
	srv := newFaultServer(t, fx, "", "none")
	st, err := store.Open(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Fetch(context.Background(), st, client(t, srv.srv.URL), resolution(fx), Options{Jobs: 1})
	var se *store.SpaceError
	if !errors.As(err, &se) || refusal.CodeOf(err) != "" || !strings.Contains(err.Error(), st.Home()) {
		t.Fatalf("fetch onto a full disk: %v", err)
	}
	srv.mu.Lock()
	for f, n := range srv.hits {
		if n > 1 {
			t.Errorf("%s downloaded %d times: a full disk is not worth a retry", f, n)
		}
	}
	srv.mu.Unlock()
	for _, h := range storeContents(t, st) {
		if strings.HasPrefix(h, ".tmp-") {
			t.Errorf("temp left: %s", h)
		}
	}
}

// TestStoreWriteFailure: a store that cannot be written for a reason other
// than a full disk (TestNoSpace) is the host's failure too: a
// *store.WriteError naming the store and what to do, never fetch_failed
// blaming the index (which it was: "refused: fetch_failed: alpha… from
// http://…: store: open …: permission denied"), not retried, and nothing
// is left behind. Real failures of the kernel: a store this user may not
// write (a read-only mount for root, who ignores modes; a directory
// without write permission for anyone else), and a file larger than the
// process may write (RLIMIT_FSIZE: EFBIG, as a failing disk's EIO is
// neither a full disk nor a permission).
func TestStoreWriteFailure(t *testing.T) {
	fx := fixtures()
	check := func(t *testing.T, st *store.Store, srv *faultServer, want string) {
		t.Helper()
		_, err := Fetch(context.Background(), st, client(t, srv.srv.URL), resolution(fx), Options{Jobs: 1})
		var we *store.WriteError
		if !errors.As(err, &we) || refusal.CodeOf(err) != "" || !strings.Contains(err.Error(), st.Home()) || !strings.Contains(err.Error(), want) {
			t.Fatalf("fetch into a store that cannot be written: %v, want a *store.WriteError naming %s and %q", err, st.Home(), want)
		}
		srv.mu.Lock()
		for f, n := range srv.hits {
			if n > 1 {
				t.Errorf("%s downloaded %d times: the store's failure is not worth a retry", f, n)
			}
		}
		srv.mu.Unlock()
	}
	// lockable is a store the test can make unwritable (lockOut): on a
	// tmpfs for root (who ignores modes), in a directory for anyone else.
	lockable := func(t *testing.T) (string, *store.Store) {
		var home string
		if os.Geteuid() == 0 {
			home = filepath.Join(testdir.Tmpfs(t, "1m"), "home")
		} else {
			home = filepath.Join(testdir.New(t), "home")
		}
		st, err := store.Open(home)
		if err != nil {
			t.Fatal(err)
		}
		return home, st
	}
	// lockOut makes the store's blobs unwritable: its tmpfs remounted
	// read-only for root, the blobs directory 0555 for anyone else.
	lockOut := func(t *testing.T, home string) (blobs string) {
		blobs = filepath.Join(home, store.BlobsDir)
		if os.Geteuid() == 0 {
			if out, err := exec.Command("mount", "-o", "remount,ro", filepath.Dir(home)).CombinedOutput(); err != nil {
				t.Skipf("cannot make the tmpfs read-only: %v %s", err, out)
			}
		} else if err := os.Chmod(blobs, 0o555); err != nil {
			t.Fatal(err)
		}
		return blobs
	}
	t.Run("not writable", func(t *testing.T) {
		home, st := lockable(t)
		blobs := lockOut(t, home)
		// Each says what would let it: root's read-only mount, this
		// user's own store without its write permission.
		want := "the store cannot be written; it is this user's, without write permission: chmod u+w " + blobs
		if os.Geteuid() == 0 {
			want = "the store cannot be written; its file system is mounted read-only: remount it read-write"
		}
		check(t, st, newFaultServer(t, fx, "", "none"), want)
		if ents, _ := os.ReadDir(blobs); len(ents) != 0 {
			t.Errorf("the store holds %v", ents)
		}
	})
	// A damaged blob the fetch cannot remove (written to in place, then
	// the store made unwritable): the store's failure saying to remove
	// it as the owner, and no "fetching it again" event; it was refused
	// hash_mismatch, whose remedy blames the mirror.
	t.Run("damaged, not removable", func(t *testing.T) {
		home, st := lockable(t)
		srv := newFaultServer(t, fx, "", "none")
		if _, err := Fetch(context.Background(), st, client(t, srv.srv.URL), resolution(fx), Options{}); err != nil {
			t.Fatal(err)
		}
		damage(t, filepath.Join(home, store.BlobsDir, hexOf(fx[0].data)))
		lockOut(t, home)
		var kinds []EventKind
		_, err := Fetch(context.Background(), st, client(t, srv.srv.URL), resolution(fx), Options{Events: func(e Event) { kinds = append(kinds, e.Kind) }})
		var we *store.WriteError
		if !errors.As(err, &we) || refusal.CodeOf(err) != "" || !strings.Contains(err.Error(), "removing the damaged blob of "+fx[0].filename) ||
			!strings.Contains(err.Error(), "remove it as the store's owner, then fetch again") {
			t.Fatalf("a damaged blob that cannot be removed: %v, want a *store.WriteError saying to remove it as the owner", err)
		}
		if slices.Contains(kinds, EventDamaged) {
			t.Errorf("events %v: it said it would fetch the blob again", kinds)
		}
	})
	t.Run("EFBIG", func(t *testing.T) {
		// In a child: the limit is the process's, and go test's own log
		// file must not meet it.
		if os.Getenv("CRUXPROV_TEST_FSIZE") == "" {
			asuser.RunChild(t, t.Name(), "CRUXPROV_TEST_FSIZE=1")
			return
		}
		st, err := store.Open(filepath.Join(testdir.New(t), "home"))
		if err != nil {
			t.Fatal(err)
		}
		srv := newFaultServer(t, fx, "", "none")
		func() {
			// The wheels are 80–150 KB: the first one written fails.
			defer asuser.LimitFileSize(t, 32<<10)()
			check(t, st, srv, "file too large")
		}()
		if got := storeContents(t, st); len(got) != 0 {
			t.Errorf("the store holds %v", got)
		}
	})
}

// TestUnsizedEndless: a lock without sizes and an index that sends a
// wheel without end (chunked, no Content-Length) cannot fill the store's
// disk: the download is refused size_mismatch, saying to lock it with its
// size, once it has taken half of the space that was free when it began,
// and nothing is kept. Before, it wrote until the disk was full (up to
// store.MaxUnsized, 8 GiB), and every other writer of that disk failed
// meanwhile. The store is a real small tmpfs; the index a loopback server.
func TestUnsizedEndless(t *testing.T) {
	dir := testdir.Tmpfs(t, "48m")
	const file = "alpha-1.0-py3-none-any.whl"
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/alpha/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<a href="/files/%s">%s</a>`, file, file)
		case "/files/" + file:
			stream(w, r, &sent, 1<<30, "PK endless ")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	st, err := store.Open(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := index.New(srv.URL+"/simple", index.Options{Backoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res := lockfile.Resolution{Platform: "cp311-manylinux_2_36_x86_64", Packages: []lockfile.ResolvedWheel{
		{Name: "alpha", Version: "1.0", Filename: file, SHA256: digest.Sum([]byte("the locked bytes"))}}}
	_, err = Fetch(context.Background(), st, c, res, Options{Jobs: 1})
	t.Logf("after %d bytes sent: %v", sent.Load(), err)
	if refusal.CodeOf(err) != refusal.SizeMismatch || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "lock it with its size") {
		t.Fatalf("an endless unsized download: %v (code %q), want size_mismatch saying to lock it with its size", err, refusal.CodeOf(err))
	}
	if sent.Load() > 40<<20 {
		t.Errorf("the server sent %d bytes: the download went on past half the free space", sent.Load())
	}
	for _, h := range storeContents(t, st) {
		t.Errorf("left in the store: %s", h)
	}
}

// TestUnsizedListedSize: a lock without sizes, on an index whose JSON
// page lists the file's size (PEP 700), stops the download at that size:
// a body that goes on past it (chunked, no Content-Length) is
// size_mismatch naming the size the index lists, after a few KiB rather
// than after half the disk; so is a Content-Length other than it. Before, only the hash at the end (or half the
// free space) stopped it.
func TestUnsizedListedSize(t *testing.T) {
	const file = "alpha-1.0-py3-none-any.whl"
	var sent atomic.Int64
	var dirName atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/alpha/":
			w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
			fmt.Fprintf(w, `{"meta":{"api-version":"1.1"},"name":"alpha","files":[{"filename":%q,"url":"/%s/%s","hashes":{},"size":4096}]}`, file, dirName.Load(), file)
		case "/declared/" + file:
			w.Header().Set("Content-Length", "5000")
			w.Write(bytes.Repeat([]byte("x"), 5000))
		case "/files/" + file:
			stream(w, r, &sent, 8<<20, "PK listed ")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res := lockfile.Resolution{Platform: "cp311-manylinux_2_36_x86_64", Packages: []lockfile.ResolvedWheel{
		{Name: "alpha", Version: "1.0", Filename: file, SHA256: digest.Sum([]byte("the locked bytes"))}}}
	dirName.Store("files")
	_, err = Fetch(context.Background(), st, client(t, srv.URL), res, Options{Jobs: 1})
	t.Logf("after %d bytes sent: %v", sent.Load(), err)
	if refusal.CodeOf(err) != refusal.SizeMismatch || !strings.Contains(err.Error(), "4096 bytes the index lists") {
		t.Fatalf("a body past the size the index lists: %v (code %q)", err, refusal.CodeOf(err))
	}
	dirName.Store("declared")
	_, err = Fetch(context.Background(), st, client(t, srv.URL), res, Options{Jobs: 1})
	if refusal.CodeOf(err) != refusal.SizeMismatch || !strings.Contains(err.Error(), "declares 5000 bytes, the 4096 bytes the index lists differ") {
		t.Fatalf("a Content-Length other than the size the index lists: %v (code %q)", err, refusal.CodeOf(err))
	}
	for _, h := range storeContents(t, st) {
		t.Errorf("left in the store: %s", h)
	}
}

// stream writes pattern over and over, flushed, with no Content-Length,
// until the client goes or limit bytes were sent (counted in sent).
func stream(w http.ResponseWriter, r *http.Request, sent *atomic.Int64, limit int64, pattern string) {
	buf := bytes.Repeat([]byte(pattern), 64<<10/len(pattern))
	for r.Context().Err() == nil && sent.Load() < limit {
		n, err := w.Write(buf)
		sent.Add(int64(n))
		if err != nil {
			return
		}
		w.(http.Flusher).Flush()
	}
}
