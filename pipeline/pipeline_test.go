package pipeline_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/materialize"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
)

// setup builds the fixtures, serves them as a pinned index and opens a
// store; it skips where there is no python3.
func setup(t *testing.T) (*fixtures.Set, *index.Client, *store.Store, string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	dir := testdir.New(t) // the env is sealed read-only
	fx, url := fixtureindex.Serve(t, dir)
	c, err := index.New(url, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	return fx, c, st, py
}

// TestRunHoldsTheStoreLock: the pipeline holds the store lock from the
// fetch to the seal, so a gc between the fetch and the create (the wheels
// fetched, the env that roots them not yet sealed) cannot remove them: a gc that will not wait is told the store is busy, one that waits
// runs only after the env is sealed, and keeps every wheel the seal
// names. (Before the pipeline was one call, fetch released the lock and
// create took it again: a gc in that gap deleted the wheels just fetched.)
func TestRunHoldsTheStoreLock(t *testing.T) {
	fx, c, st, py := setup(t)
	root := pipelinetest.OpenRoot(t, st, fx.Echo.Path)
	ctx := context.Background()
	var (
		once     sync.Once
		busyErr  error
		waited   = make(chan error, 1)
		gcReport store.GCReport
		gcAt     time.Time
	)
	events := func(e materialize.Event) {
		// "probe" is the first step after the fetch, before materialize
		// takes the lock of its own: only the pipeline's holds it here.
		if e.Stage != "probe" {
			return
		}
		once.Do(func() {
			_, busyErr = st.GC(ctx, store.GCOptions{})
			go func() {
				rep, err := st.GC(ctx, store.GCOptions{Wait: true})
				gcReport, gcAt = rep, time.Now()
				waited <- err
			}()
			time.Sleep(200 * time.Millisecond) // the waiting gc is waiting
		})
	}
	r, err := pipeline.Run(ctx, st, pipeline.Options{
		Source: pipeline.Source{Root: root}, Platform: "host", Python: py,
		Client: c, NoCompile: true, Events: events,
	})
	sealedAt := time.Now()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !errors.Is(busyErr, store.ErrBusy) {
		t.Errorf("a gc during the create: %v, want ErrBusy", busyErr)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the waiting gc: %v", err)
	}
	if gcAt.Before(sealedAt.Add(-50 * time.Millisecond)) {
		t.Errorf("the waiting gc finished %v before the create", sealedAt.Sub(gcAt))
	}
	for _, w := range append(r.Resolution.Packages, *r.Root) {
		if ok, _ := st.Has(w.SHA256); !ok {
			t.Errorf("%s was removed (gc removed %v)", w.Filename, gcReport.Removed)
		}
	}
	if len(gcReport.Removed) != 0 {
		t.Errorf("gc removed %v", gcReport.Removed)
	}
}

// TestPlan: the materialization digest Plan computes without fetching or
// building is the one Run seals, for an env of the store and for a tree;
// Plan fetches nothing (a store without the wheels stays empty).
func TestPlan(t *testing.T) {
	fx, c, st, py := setup(t)
	ctx := context.Background()
	o := pipeline.Options{Source: pipeline.Source{Root: pipelinetest.OpenRoot(t, st, fx.Echo.Path)}, Platform: "host", Python: py, Client: c, NoCompile: true}
	_, planned, err := pipeline.Plan(ctx, st, o)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if blobs := blobNames(t, st); len(blobs) != 1 || !strings.HasPrefix(blobs[0], ".tmp-ingest-") {
		t.Errorf("Plan stored %v (want the root wheel's private copy alone)", blobs)
	}
	r, err := pipeline.Run(ctx, st, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Env.Digest != planned || planned.IsZero() {
		t.Errorf("planned %s, sealed %s", planned, r.Env.Digest)
	}
	o.Tree = &pipeline.TreeTarget{Out: filepath.Join(testdir.New(t), "tree"), Final: "/opt/env"}
	if _, tp, err := pipeline.Plan(ctx, st, o); err != nil || tp != planned {
		t.Errorf("a tree's plan: %s, %v (want %s: the digest does not name the path)", tp, err, planned)
	}
	if _, _, err := pipeline.Plan(ctx, st, pipeline.Options{FetchOnly: true}); err == nil {
		t.Error("Plan of a fetch")
	}
}

// TestFetchedRootCounts: a root wheel named NAME==VERSION, downloaded
// from the index and stored by the create, is one of the wheels the
// create fetched (materialize.Request.Fetched, which the free-space
// refusal counts): it counted the lock's wheels only. A root wheel given
// as its file, or whose blob the store held already, is not.
func TestFetchedRootCounts(t *testing.T) {
	fx, c, st, _ := setup(t)
	ctx := context.Background()
	put := func(w *pipeline.RootWheel, err error) *pipeline.RootWheel {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		if err := w.Put(ctx); err != nil {
			t.Fatal(err)
		}
		return w
	}
	fetched := put(pipeline.FetchRoot(ctx, st, c, fx.Echo.Name, fx.Echo.Version, fx.Echo.SHA256))
	if n := pipeline.FetchedRoot(fetched); n != 1 {
		t.Errorf("a root wheel fetched and stored counts %d, want 1", n)
	}
	if err := fetched.Put(ctx); err != nil || pipeline.FetchedRoot(fetched) != 1 {
		t.Errorf("stored again (the next platform's Run): %v, counts %d, want 1", err, pipeline.FetchedRoot(fetched))
	}
	if n := pipeline.FetchedRoot(put(pipeline.FetchRoot(ctx, st, c, fx.Echo.Name, fx.Echo.Version, fx.Echo.SHA256))); n != 0 {
		t.Errorf("a root wheel whose blob the store held counts %d, want 0", n)
	}
	other, err := store.Open(filepath.Join(testdir.New(t), "home"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(fx.Echo.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := pipeline.FetchedRoot(put(pipeline.OpenRoot(ctx, other, f, fx.Echo.Filename, digest.Digest{}))); n != 0 {
		t.Errorf("a root wheel given as its file counts %d, want 0", n)
	}
}

// TestFetchRoot: NAME==VERSION comes from the index only as the bytes of
// the given sha256; without an index, a sha256 or a matching file it is
// refused with its code.
func TestFetchRoot(t *testing.T) {
	fx, c, st, _ := setup(t)
	ctx := context.Background()
	root, err := pipeline.FetchRoot(ctx, st, c, fx.Echo.Name, fx.Echo.Version, fx.Echo.SHA256)
	if err != nil || root.Wheel.Filename != fx.Echo.Filename || root.Wheel.SHA256 != fx.Echo.SHA256 || root.Manifest.Name != fx.Echo.Name {
		t.Fatalf("FetchRoot: %+v, %v", root, err)
	}
	root.Close()
	for _, tc := range []struct {
		name    string
		c       *index.Client
		project string
		version string
		sum     digest.Digest
		code    refusal.Code
		// want: what the refusal says is listed, and what to check (it
		// said only how many wheels of the project the index lists).
		want string
		// file: the wheel is not on the index, and the refusal says to
		// give its file instead, its remedy wheel_file (a provider's
		// own wheel, installed from its file, is on no index: it said
		// only to mirror it there).
		file string
	}{
		{"no index", nil, fx.Echo.Name, fx.Echo.Version, fx.Echo.SHA256, refusal.OfflineMiss, "", ""},
		{"no sha256", c, fx.Echo.Name, fx.Echo.Version, digest.Digest{}, refusal.HashMissing, "", ""},
		{"other bytes", c, fx.Echo.Name, fx.Echo.Version, digest.Sum([]byte("other")), refusal.FetchFailed,
			fx.Echo.Filename + " (sha256 " + fx.Echo.SHA256.Hex() + "); check the sha256 given", ""},
		{"other version", c, fx.Echo.Name, "9.9.9", fx.Echo.SHA256, refusal.FetchFailed, "the versions of " + fx.Echo.Name + " it lists are " + fx.Echo.Version + "; check the version",
			"acme_echo-9.9.9-….whl"},
		{"project not on the index", c, "acme-web-fetch", "1.0.0", fx.Echo.SHA256, refusal.FetchFailed, "project acme-web-fetch is not on the index",
			"acme_web_fetch-1.0.0-….whl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pipeline.FetchRoot(ctx, st, tc.c, tc.project, tc.version, tc.sum)
			if refusal.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.project) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want %s saying %q", err, tc.code, tc.want)
			}
			if r := refusal.RemedyOf(err); tc.file != "" && (r == nil || r.Action != refusal.ActionWheelFile || r.Target != tc.file ||
				!strings.Contains(err.Error(), "or give the root wheel's file ("+tc.file+", sha256 "+tc.sum.Hex()+")")) {
				t.Errorf("not on the index: %v, remedy %+v, want %s %s", err, r, refusal.ActionWheelFile, tc.file)
			}
			// Offline, the advice that works: the file (a fetch done
			// before does not make NAME==VERSION resolvable offline).
			if tc.c == nil && !strings.Contains(err.Error(), "give the root wheel's file") {
				t.Errorf("offline: %v does not say to give the wheel file", err)
			}
			// Or to fetch it online: the remedy that runs it so, and the
			// file the other, which the command renders its own way.
			if r := refusal.RemedyOf(err); tc.c == nil && (r == nil || r.Action != refusal.ActionFetch || r.Or == nil || r.Or.Action != refusal.ActionWheelFile) {
				t.Errorf("offline: remedy %+v, want %s or %s", r, refusal.ActionFetch, refusal.ActionWheelFile)
			}
		})
	}
	// A store that fails to write the copy (EFBIG: RLIMIT_FSIZE below the
	// wheel's size; Go ignores the SIGXFSZ) is the host's failure, a
	// *store.WriteError, not fetch_failed blaming the index, and is not
	// retried.
	t.Run("store write failure", func(t *testing.T) {
		// In a child: the limit is the process's, and go test's own log
		// file must not meet it.
		if os.Getenv("CRUXPROV_TEST_FSIZE") == "" {
			asuser.RunChild(t, t.Name(), "CRUXPROV_TEST_FSIZE=1")
			return
		}
		restore := asuser.LimitFileSize(t, uint64(fx.Echo.Size/2))
		_, err := pipeline.FetchRoot(ctx, st, c, fx.Echo.Name, fx.Echo.Version, fx.Echo.SHA256)
		restore()
		var we *store.WriteError
		if !errors.As(err, &we) || refusal.CodeOf(err) != "" || !strings.Contains(err.Error(), st.Home()) {
			t.Errorf("%v, want a *store.WriteError naming the store", err)
		}
	})
	if blobs := blobNames(t, st); len(blobs) != 0 {
		t.Errorf("left in the store: %v", blobs)
	}
}

// blobNames lists the store's blobs directory, temps included.
func blobNames(t *testing.T, st *store.Store) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(st.Home(), store.BlobsDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestRunWarnsOfYankedWheels: a wheel the index marks yanked is fetched
// (the lock pins it) and the pipeline says so through Warn, for env
// create and install as for fetch; before, only the fetch command said
// it, and an env create or install from that index was silent.
func TestRunWarnsOfYankedWheels(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	dir := testdir.New(t)
	fx, c := serveWrapped(t, dir, index.Options{}, func(files http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/simple/cruxible-provider-runtime/") {
				files.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			files.ServeHTTP(rec, r)
			w.Header().Set("Content-Type", rec.Header().Get("Content-Type"))
			w.Write([]byte(strings.ReplaceAll(rec.Body.String(), "<a href=", `<a data-yanked="broken build" href=`)))
		})
	})
	st, err := store.Open(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	var warnings []string
	if _, err := pipeline.Run(context.Background(), st, pipeline.Options{
		Source: pipeline.Source{Root: pipelinetest.OpenRoot(t, st, fx.Echo.Path)}, Platform: "host", Python: py,
		Client: c, NoCompile: true, Warn: func(s string) { warnings = append(warnings, s) },
	}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := fx.Runtime.Filename + " is yanked on the index (broken build)"
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) {
		t.Fatalf("warnings %q, want one starting %q", warnings, want)
	}
}

// serveWrapped builds the fixtures and their index under dir and serves
// the index through wrap (a misbehaving index), returning a client of it.
func serveWrapped(t *testing.T, dir string, opts index.Options, wrap func(http.Handler) http.Handler) (*fixtures.Set, *index.Client) {
	t.Helper()
	fx, err := fixtures.Build(filepath.Join(dir, "fx"), fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mirror := filepath.Join(dir, "index")
	if _, err := index.Build(context.Background(), mirror, filepath.Dir(fx.Runtime.Path)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wrap(http.FileServer(http.Dir(mirror))))
	t.Cleanup(srv.Close)
	c, err := index.New(srv.URL+"/simple/", opts)
	if err != nil {
		t.Fatal(err)
	}
	return fx, c
}

// TestFetchRootHostileIndex: the root wheel of NAME==VERSION is downloaded
// as every wheel is: a 5xx is retried (and each retry reported), a 404 is
// a fetch_failed refusal, other bytes than the sha256 the page lists are
// hash_mismatch naming the file and where it came from. Before, a 500 was
// a bare error (exit 1) with no retry, a 404 too, and other bytes were
// "the index lists no wheel … with sha256", which the index did list.
func TestFetchRootHostileIndex(t *testing.T) {
	var mode atomic.Value
	var failures, retries atomic.Int32
	opts := index.Options{Backoff: time.Millisecond, Events: func(e index.Event) {
		if e.Kind == index.EventRetry {
			retries.Add(1)
		}
	}}
	fx, c := serveWrapped(t, testdir.New(t), opts, func(files http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.URL.Path, "/files/") {
				files.ServeHTTP(w, r)
				return
			}
			switch mode.Load().(string) {
			case "500 twice":
				if failures.Add(1) <= 2 {
					http.Error(w, "busy", http.StatusInternalServerError)
					return
				}
			case "404":
				http.NotFound(w, r)
				return
			case "other bytes":
				w.Write([]byte("not the wheel"))
				return
			case "undeclared, past the bound", "undeclared, at the bound":
				// No Content-Length: the body is sent chunked, and only
				// its end tells its size.
				rec := httptest.NewRecorder()
				files.ServeHTTP(rec, r)
				b := rec.Body.Bytes()
				for len(b) > 0 {
					k := min(len(b), 512)
					w.Write(b[:k])
					w.(http.Flusher).Flush()
					b = b[k:]
				}
				return
			case "too large":
				w.Header().Set("Content-Length", strconv.Itoa(1<<30+1))
				w.WriteHeader(http.StatusOK)
				w.Write([]byte("PK\x03\x04"))
				panic(http.ErrAbortHandler)
			}
			files.ServeHTTP(w, r)
		})
	})
	dir := testdir.New(t)
	st, err := store.Open(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mode.Store("500 twice")
	root, err := pipeline.FetchRoot(ctx, st, c, fx.Echo.Name, fx.Echo.Version, fx.Echo.SHA256)
	if err != nil || root.Wheel.Filename != fx.Echo.Filename || root.Wheel.SHA256 != fx.Echo.SHA256 {
		t.Fatalf("after two 500s: %+v, %v", root, err)
	}
	root.Close()
	if n := retries.Load(); n != 2 {
		t.Errorf("%d retries reported, want 2", n)
	}
	for _, tc := range []struct {
		mode string
		code refusal.Code
	}{{"404", refusal.FetchFailed}, {"other bytes", refusal.HashMismatch}, {"too large", refusal.FetchFailed}} {
		t.Run(tc.mode, func(t *testing.T) {
			mode.Store(tc.mode)
			_, err := pipeline.FetchRoot(ctx, st, c, fx.Echo.Name, fx.Echo.Version, fx.Echo.SHA256)
			if refusal.CodeOf(err) != tc.code || !strings.Contains(err.Error(), fx.Echo.Filename) || !strings.Contains(err.Error(), "/files/") {
				t.Errorf("%v, want %s naming the file and its URL", err, tc.code)
			}
		})
	}
	// A body sent without its length is bounded by what arrives: one byte
	// past the bound is refused, a body of exactly the bound is taken.
	restore := pipeline.SetMaxRoot(fx.Echo.Size - 1)
	mode.Store("undeclared, past the bound")
	_, err = pipeline.FetchRoot(ctx, st, c, fx.Echo.Name, fx.Echo.Version, fx.Echo.SHA256)
	if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a body past the bound, undeclared: %v, want fetch_failed saying it is larger", err)
	}
	pipeline.SetMaxRoot(fx.Echo.Size)
	mode.Store("undeclared, at the bound")
	if root, err := pipeline.FetchRoot(ctx, st, c, fx.Echo.Name, fx.Echo.Version, fx.Echo.SHA256); err != nil {
		t.Errorf("a body of exactly the bound, undeclared: %v", err)
	} else {
		root.Close()
	}
	restore()
	// Nothing is left of the downloads: the one closed, the ones refused.
	if blobs := blobNames(t, st); len(blobs) != 0 {
		t.Errorf("left in the store: %v", blobs)
	}
}

// TestFetchRootDeclaredLength: an index that declares a root wheel of 1
// GiB (as much as one may be) and sends a few bytes, then hangs up or
// stalls, costs the bytes it sent, not the length it declared, and is a
// fetch_failed refusal once the retries are spent. Before, readRoot
// allocated the declared length up front: 1 GiB per attempt.
func TestFetchRootDeclaredLength(t *testing.T) {
	const declared = 1 << 30
	for _, mode := range []string{"hang up", "stall"} {
		t.Run(mode, func(t *testing.T) {
			opts := index.Options{StallTimeout: 100 * time.Millisecond}
			fx, c := serveWrapped(t, testdir.New(t), opts, func(files http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !strings.Contains(r.URL.Path, "/files/") {
						files.ServeHTTP(w, r)
						return
					}
					w.Header().Set("Content-Length", strconv.Itoa(declared))
					w.Write([]byte("PK\x03\x04 a few bytes of a wheel"))
					w.(http.Flusher).Flush()
					if mode == "stall" {
						<-r.Context().Done()
					}
					panic(http.ErrAbortHandler) // close the connection short of the length
				})
			})
			st, err := store.Open(filepath.Join(testdir.New(t), "home"))
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = pipeline.FetchRoot(context.Background(), st, c, fx.Echo.Name, fx.Echo.Version, fx.Echo.SHA256)
			runtime.ReadMemStats(&after)
			if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), fx.Echo.Filename) {
				t.Fatalf("a body cut short of its declared length: %v, want fetch_failed naming the file", err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
				t.Fatalf("allocated %d bytes for a body of a few bytes declaring %d", got, declared)
			}
			if blobs := blobNames(t, st); len(blobs) != 0 {
				t.Errorf("left in the store: %v", blobs)
			}
		})
	}
}
