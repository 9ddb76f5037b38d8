package pipeline

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/manifest"
	"github.com/cruxible/cruxprov/pep440"
	"github.com/cruxible/cruxprov/pep508"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/wheel"
)

// RootWheel is a provider's root wheel, read once (OpenRoot, FetchRoot):
// its bytes copied into a private temp file of the store while they are
// hashed (store.Ingest; in a store this user cannot write, an unnamed
// file outside it), its manifest and lock read from that copy. The
// bytes the pipeline stores and installs are that copy, so they are the
// bytes hashed and whose manifest and lock were read, whatever becomes of
// the file or the download they came from; nothing of them is held in
// memory but the manifest and the lock. A Run that builds an env (or a
// tree) puts the copy in the store, as its blob; fetch, resolve and Plan
// leave it out. Close removes the copy unless a Run stored it.
//
// A RootWheel belongs to the store it was read into, and serves any
// number of Runs and Plans there (install and image build run one per
// platform); it is not safe for concurrent use.
type RootWheel struct {
	// Wheel is its identity: distribution name, version, file name, size
	// and sha256.
	Wheel lockfile.ResolvedWheel
	// Manifest is its provider.toml and ManifestData that file's bytes;
	// LockData is its pylock.toml's.
	Manifest     *manifest.Manifest
	ManifestData []byte
	LockData     []byte
	// Requires are its own requirements (METADATA Requires-Dist), which
	// its lock must meet on every platform it is resolved for.
	Requires []pep508.Requirement

	st     *store.Store
	p      *store.Pending
	putErr error // a failed put discarded the copy
	closed bool  // Close was called: the copy is gone (Run refuses it)
	// fetched is that FetchRoot downloaded it from the index, and added
	// that a Run's put added its blob to the store (none was there): a
	// wheel this command fetched, which nothing names yet (fetchedRoot).
	fetched, added bool
}

// fetchedRoot is how many wheels the root wheel w adds to those a
// create downloaded (materialize.Request.Fetched): 1 when it was fetched
// from the index and its blob is one a Run of this command added, else 0.
func fetchedRoot(w *RootWheel) int {
	if w != nil && w.fetched && w.added {
		return 1
	}
	return 0
}

// OpenRoot reads the root wheel named name (its file name) from r, to
// r's end, once: into a private copy in st (hashed as it is written), then
// its manifest and lock from that copy. When sum is not zero the bytes
// must hash to it (hash_mismatch otherwise). A wheel that is not a
// provider's is refused with its code (wheel_invalid, manifest_missing,
// lock_missing, …); a full disk is a *store.SpaceError; an error of r is
// returned as it is. On error nothing is left in the store. The caller
// closes r, and the RootWheel once done.
func OpenRoot(ctx context.Context, st *store.Store, r io.Reader, name string, sum digest.Digest) (*RootWheel, error) {
	p, err := st.Ingest(ctx, r)
	if err != nil {
		return nil, err
	}
	if !sum.IsZero() && p.Digest() != sum {
		p.Discard()
		return nil, refusal.New(refusal.HashMismatch, "%s hashes to %s, not %s", name, p.Digest(), sum)
	}
	return readRoot(st, p, name)
}

// readRoot reads the manifest and the lock of the root wheel pending as
// p, and discards p when they cannot be read.
func readRoot(st *store.Store, p *store.Pending, name string) (_ *RootWheel, err error) {
	defer func() {
		if err != nil {
			p.Discard()
		}
	}()
	w, err := wheel.OpenReader(p, p.Size(), name)
	if err != nil {
		return nil, err
	}
	m, raw, err := manifest.FromWheel(w)
	if err != nil {
		return nil, err
	}
	lock, err := manifest.LockFromWheel(w)
	if err != nil {
		return nil, err
	}
	reqs, err := manifest.Requires(w)
	if err != nil {
		return nil, err
	}
	return &RootWheel{
		Wheel:    lockfile.ResolvedWheel{Name: w.Filename().Name, Version: w.Metadata().Version, Filename: name, Size: p.Size(), SHA256: p.Digest()},
		Manifest: m, ManifestData: raw, LockData: lock, Requires: reqs,
		st: st, p: p,
	}, nil
}

// Close removes the private copy of the root wheel, unless a Run put it
// in the store. Safe to repeat, and on a nil RootWheel.
func (w *RootWheel) Close() {
	if w != nil && w.p != nil {
		w.closed = true
		w.p.Discard()
	}
}

// put puts the root wheel in the store (the env installs it from there; a
// rebuild finds it there). Once stored, putting it again does nothing.
func (w *RootWheel) put(ctx context.Context) error {
	if w.putErr != nil {
		return w.putErr
	}
	had, _ := w.st.Has(w.Wheel.SHA256)
	err := w.st.Commit(ctx, []*store.Pending{w.p})
	var se *store.SpaceError
	switch {
	case err == nil:
		w.added = w.added || !had
		return nil
	case errors.As(err, &se) || ctx.Err() != nil:
	default:
		err = refusal.Wrap(refusal.MaterializeFailed, err, "cannot store the root wheel")
	}
	w.putErr = err
	return err
}

// FetchRoot downloads a provider's root wheel name==version from the
// pinned index c into st (as OpenRoot reads a file): the file the index
// lists for that name and version whose bytes hash to sum (only those
// bytes are accepted, whatever else the index lists). Refusals:
// offline_miss without an index, hash_missing without a sha256,
// fetch_failed when no listed wheel has those bytes, and OpenRoot's for
// a wheel that is not a provider's. install and image build take
// NAME==VERSION --sha256 HEX through it. The caller closes the RootWheel.
func FetchRoot(ctx context.Context, st *store.Store, c *index.Client, name, version string, sum digest.Digest) (*RootWheel, error) {
	file := strings.ReplaceAll(name, "-", "_") + "-" + version + "-….whl"
	if c == nil {
		// The store keeps wheels by content, not by the file name the
		// index published, which the image's provenance records: offline,
		// the root wheel is given as its file.
		// The detail names no command: the one that ran (install, env
		// create, image build) renders the two remedies its own way.
		return nil, refusal.New(refusal.OfflineMiss, "%s==%s comes from the index only, and offline there is none: fetch it online, or give the root wheel's file (%s, sha256 %s)", name, version, file, sum.Hex()).WithRemedy(refusal.ActionFetch, "").OrRemedy(refusal.ActionWheelFile, file)
	}
	if sum.IsZero() {
		return nil, refusal.New(refusal.HashMissing, "%s==%s: give the root wheel's sha256, so that only those bytes install", name, version)
	}
	proj, err := c.Project(ctx, name)
	if err != nil {
		return nil, notOnIndex(err, file, sum)
	}
	var ofVersion []string
	versions := map[string]pep440.Version{}
	for _, f := range proj.Files {
		fn, err := wheel.ParseFilename(f.Filename)
		if err != nil || fn.Name != proj.Name {
			continue
		}
		if v, err := pep440.Parse(fn.Version); err == nil {
			versions[v.String()] = v
		}
		if fn.Version != version {
			continue
		}
		if h := f.Hashes["sha256"]; h != "" {
			ofVersion = append(ofVersion, f.Filename+" (sha256 "+h+")")
		} else {
			ofVersion = append(ofVersion, f.Filename+" (other bytes)")
		}
		if h := f.Hashes["sha256"]; h != "" && h != sum.Hex() {
			continue
		}
		p, err := downloadRoot(ctx, st, c, f, sum)
		if err != nil {
			return nil, err
		}
		if p == nil {
			continue // other bytes, and the page listed no sha256 for them: another file may be the one
		}
		w, err := readRoot(st, p, path.Base(f.Filename))
		if w != nil {
			w.fetched = true
		}
		return w, err
	}
	// What it does list, and what to check: it said only how many
	// wheels of the project it lists.
	if len(ofVersion) == 0 {
		// The versions it does list, newest first: it said only how
		// many wheels it lists ("of the 1 wheels of NAME it lists").
		if len(versions) == 0 {
			return nil, refusal.New(refusal.FetchFailed, "the index %s lists no wheel of %s %s: it lists no wheel of %s at all; check the name, or mirror that wheel there, or give the root wheel's file (%s, sha256 %s)",
				index.Redact(c.BaseURL()), name, version, proj.Name, file, sum.Hex()).WithRemedy(refusal.ActionWheelFile, file)
		}
		return nil, refusal.New(refusal.FetchFailed, "the index %s lists no wheel of %s %s: the versions of %s it lists are %s; check the version, or mirror that wheel there, or give the root wheel's file (%s, sha256 %s)",
			index.Redact(c.BaseURL()), name, version, proj.Name, listVersions(versions), file, sum.Hex()).WithRemedy(refusal.ActionWheelFile, file)
	}
	if len(ofVersion) > 5 {
		ofVersion = append(ofVersion[:5], "and "+strconv.Itoa(len(ofVersion)-5)+" more")
	}
	return nil, refusal.New(refusal.FetchFailed, "the index %s lists no wheel of %s %s with sha256 %s: its wheels of %s %s are %s; check the sha256 given (the root wheel's own), or mirror that wheel there",
		index.Redact(c.BaseURL()), name, version, sum, proj.Name, version, strings.Join(ofVersion, ", "))
}

// notOnIndex is err, the index's refusal of the project's page, with the
// root wheel's file as the other way to give it where the index has no
// such project (HTTP 404 or 410). A provider's own wheel is often on no
// index: installed from its file, then advised by verify (a threshold
// raised since, pin_unapproved) to be proposed again as NAME==VERSION
// --sha256 HEX, it was refused "mirror it there or pin another index",
// and the file the store had installed it from went unmentioned.
func notOnIndex(err error, file string, sum digest.Digest) error {
	var re *refusal.Error
	var se *index.StatusError
	if !errors.As(err, &re) || re.Code != refusal.FetchFailed || re.Remedy != nil ||
		!errors.As(err, &se) || (se.StatusCode != http.StatusNotFound && se.StatusCode != http.StatusGone) {
		return err
	}
	return refusal.Wrap(refusal.FetchFailed, re.Err, "%s, or give the root wheel's file (%s, sha256 %s)", re.Detail, file, sum.Hex()).
		WithRemedy(refusal.ActionWheelFile, file)
}

// listVersions is versions, newest first, the ten newest and how many more.
func listVersions(versions map[string]pep440.Version) string {
	vs := make([]pep440.Version, 0, len(versions))
	for _, v := range versions {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return pep440.Compare(vs[i], vs[j]) > 0 })
	out := make([]string, 0, 11)
	for i, v := range vs {
		if i == 10 {
			out = append(out, "and "+strconv.Itoa(len(vs)-10)+" more")
			break
		}
		out = append(out, v.String())
	}
	return strings.Join(out, ", ")
}

// maxRoot bounds a root wheel fetched as NAME==VERSION: its bytes are
// written to the store's disk before their sha256 is known, and a hostile
// index must not fill it.
var maxRoot int64 = 1 << 30

// rootAttempts and rootBackoff are the fetch's: transient failures of
// the root's download are retried as any wheel's (docs/index.md).
const (
	rootAttempts = 4
	rootBackoff  = 250 * time.Millisecond
)

// downloadRoot downloads the root wheel candidate f into st, retrying
// transport failures, and returns it pending. It returns nil when its
// bytes are not sum's and the page listed no sha256 for f (another
// candidate may be the one); other bytes than the sha256 the page listed
// is hash_mismatch. Bytes that are not sum's are removed at once.
func downloadRoot(ctx context.Context, st *store.Store, c *index.Client, f index.File, sum digest.Digest) (*store.Pending, error) {
	delay := rootBackoff
	var last error
	for attempt := 1; attempt <= rootAttempts; attempt++ {
		p, err := ingestRoot(ctx, st, c, f)
		if err == nil {
			if got := p.Digest(); got != sum {
				p.Discard()
				if f.Hashes["sha256"] == sum.Hex() {
					return nil, refusal.New(refusal.HashMismatch, "%s from %s: got %s, but the index lists it with sha256 %s, the sha256 pinned; the index serves other bytes than it lists", f.Filename, index.Redact(f.URL), got, sum)
				}
				return nil, nil
			}
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if refusal.CodeOf(err) != "" || store.IsWriteFailure(err) {
			return nil, err // the store's failure, not the index's
		}
		if !index.Retryable(err) {
			return nil, refusal.Wrap(refusal.FetchFailed, err, "downloading %s from %s", f.Filename, index.Redact(f.URL))
		}
		last = err
		if attempt < rootAttempts {
			wait := index.RetryDelay(err, delay)
			c.Emit(index.Event{Kind: index.EventRetry, URL: index.Redact(f.URL), Attempt: attempt, Attempts: rootAttempts, Wait: wait, Err: err})
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
			delay *= 2
		}
	}
	return nil, c.GaveUp("downloading "+f.Filename+" from "+index.Redact(f.URL), f.URL, rootAttempts, last)
}

// ingestRoot downloads f once into st, at most maxRoot bytes, hashing
// them as they are written (store.Ingest): memory does not grow with the
// bytes received, and a length the index declares is a bound (over
// maxRoot is refused before a byte is read), never an allocation, so an
// index that declares 1 GiB and sends nothing costs nothing. A body cut
// short of its declared length is an unexpected EOF (retried): the
// transport holds a body to its declared length. On error nothing is
// left in the store.
func ingestRoot(ctx context.Context, st *store.Store, c *index.Client, f index.File) (*store.Pending, error) {
	rc, n, err := c.Open(ctx, f)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tooBig := refusal.New(refusal.FetchFailed, "%s from %s is larger than %d bytes, more than a root wheel fetched as NAME==VERSION may be; download it and give it as its file", f.Filename, index.Redact(f.URL), int64(maxRoot))
	if n > maxRoot {
		return nil, tooBig
	}
	// One byte past the bound is read, so that a body longer than it is
	// told from one of exactly maxRoot bytes.
	p, err := st.Ingest(ctx, io.LimitReader(rc, maxRoot+1))
	if err != nil {
		return nil, err
	}
	if p.Size() > maxRoot {
		p.Discard()
		return nil, tooBig
	}
	return p, nil
}
