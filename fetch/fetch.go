// Package fetch owns getting the wheels of a lockfile.Resolution into the
// store (DESIGN §4, §6): each from the URL its project's page on the
// pinned index lists (never the lock's URL), in bounded parallel, checked
// against the lock's sha256 and size while the bytes stream, with retries
// and backoff on transient failures, or from the store alone (Offline).
//
// It does not parse locks or choose wheels (lockfile/ does), speak HTTP
// itself (index/ does), or lay out the store (store/ does). It never
// prints: progress goes to Options.Events.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
)

// Options tune a fetch.
type Options struct {
	// Jobs bounds concurrent downloads (default DefaultJobs).
	Jobs int
	// Offline serves only from the store: a wheel not there is offline_miss.
	Offline bool
	// Attempts is how many times a download is tried (default 4).
	Attempts int
	// Backoff is the wait before the first retry, doubled each time (default 250ms).
	Backoff time.Duration
	// Events, when set, receives progress (from several goroutines at
	// once; it must be safe for that and quick).
	Events func(Event)
}

// commitBatch bounds the verified blobs (open temp files) waiting for one
// Commit, so a lock of thousands of wheels stays within file limits.
const commitBatch = 64

// DefaultJobs is the default download concurrency: downloads wait on the
// network and the disk, not the CPU, so a few more than the two cores.
const DefaultJobs = 6

// EventKind says what an Event reports.
type EventKind string

// The kinds of Event, in the order one wheel sees them.
const (
	EventPlan     EventKind = "plan"     // Total = bytes to download (sizes from the lock), Count = wheels to download
	EventCached   EventKind = "cached"   // the wheel is in the store already
	EventDamaged  EventKind = "damaged"  // the store's blob of the wheel had other bytes and was removed (Err says how); it is fetched again
	EventStart    EventKind = "start"    // a download attempt begins; Total = expected size or -1
	EventProgress EventKind = "progress" // Bytes = bytes of this wheel so far in this attempt
	EventRetry    EventKind = "retry"    // the attempt failed (Err) and will be retried after Wait
	EventDone     EventKind = "done"     // the wheel is stored
	EventFailed   EventKind = "failed"   // the wheel could not be fetched (Err)
)

// Event is one step of a fetch, for progress display. URLs are redacted.
type Event struct {
	Kind     EventKind
	Filename string
	Bytes    int64
	Total    int64
	Count    int
	Attempt  int
	Err      error
	// Wait is how long a retry waits before the next attempt: the
	// backoff, or what a 429's or 503's Retry-After asks (up to
	// index.MaxRetryAfter), so the line that shows it says how long.
	Wait time.Duration
}

// Wheel is what happened to one wheel.
type Wheel struct {
	// ResolvedWheel is the wheel (the one model of a resolved wheel);
	// its URL is what the index listed (redacted), empty when cached.
	digest.ResolvedWheel
	Path   string `json:"path"`   // the blob in the store
	Cached bool   `json:"cached"` // in the store before this fetch
	// Yanked is set when the index marks the file yanked: it is fetched
	// anyway (the lock pinned it) and the change-set names it.
	Yanked       bool   `json:"yanked,omitempty"`
	YankedReason string `json:"yanked_reason,omitempty"`
	Attempts     int    `json:"attempts,omitempty"`
	// Damaged is set when the store held other bytes under the wheel's
	// sha256 (written to in place, say): they were removed and the wheel
	// fetched again.
	Damaged bool `json:"damaged,omitempty"`
}

// Report is the outcome of a fetch, one Wheel per package in resolution
// order; filled in as far as the fetch got, even when it failed.
type Report struct {
	Index      string  `json:"index,omitempty"`
	Wheels     []Wheel `json:"wheels"`
	Downloaded int     `json:"downloaded"`
	Bytes      int64   `json:"bytes"` // downloaded bytes
}

// Fetch gets every wheel of res into st. With opts.Offline, c may be nil
// and nothing touches the network. The first refusal cancels the rest and
// is returned; nothing partial or unverified is ever stored. A wheel
// already in the store is checked (store.Check): one whose blob holds
// other bytes has them removed and is fetched again (EventDamaged,
// Wheel.Damaged), or, offline, is offline_miss saying so. A store that
// cannot be written (full, not this user's, failing) is returned as the
// *store.SpaceError or *store.WriteError it is, not as a refusal that
// blames the index, and is not retried.
func Fetch(ctx context.Context, st *store.Store, c *index.Client, res lockfile.Resolution, opts Options) (Report, error) {
	if opts.Jobs <= 0 {
		opts.Jobs = DefaultJobs
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 4
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 250 * time.Millisecond
	}
	emit := opts.Events
	if emit == nil {
		emit = func(Event) {}
	}
	rep := Report{Wheels: make([]Wheel, len(res.Packages))}
	if c != nil {
		rep.Index = c.BaseURL()
	}
	unlock, err := st.LockShared(ctx)
	if err != nil {
		return rep, err
	}
	defer unlock()
	if _, err := st.CleanStaging(ctx); err != nil {
		return rep, err
	}

	var todo []int
	var planBytes int64
	var damaged []error
	seen := map[string]int{}
	for i, w := range res.Packages {
		if w.SHA256.IsZero() {
			return rep, refusal.New(refusal.HashMissing, "%s has no sha256 in the resolution; lock it with hashes", w.Filename)
		}
		rep.Wheels[i] = Wheel{ResolvedWheel: w, Path: st.Path(w.SHA256)}
		rep.Wheels[i].URL = "" // the lock's hint; set to what the index lists when fetched
		// A blob whose stat changed since it was last hashed is hashed
		// again; a damaged one is removed and fetched again.
		ok, size, err := st.Check(w.SHA256)
		var de *store.DamagedError
		if errors.As(err, &de) {
			if _, dup := seen[w.SHA256.Hex()]; !dup {
				damaged = append(damaged, fmt.Errorf("%s: %w", w.Filename, err))
			}
			rep.Wheels[i].Damaged = true
			if de.RemoveErr != nil {
				// The store's failure (another user's store, a read-only
				// mount), not the index's: it cannot be fetched again
				// until the damaged blob is gone.
				return rep, &store.WriteError{Dir: st.Home(), Op: "removing the damaged blob of " + w.Filename, Err: err,
					Hint: "remove it as the store's owner, then fetch again (a blob whose bytes are not the ones its name says: a failing disk, or a write to the store, to look into)"}
			}
			if !opts.Offline { // offline, the refusal says it
				emit(Event{Kind: EventDamaged, Filename: w.Filename, Err: err})
			}
		} else if err != nil {
			// Neither there nor not: the store cannot be read (a blob of
			// another user's made unreadable, an I/O error).
			if errors.Is(err, fs.ErrPermission) {
				return rep, fmt.Errorf("cannot read the store's blob of %s: %w; run as a user who can read the store %s (its blobs are 0444), or have its owner give read access", w.Filename, err, st.Home())
			}
			return rep, fmt.Errorf("cannot read the store's blob of %s: %w", w.Filename, err)
		}
		if ok {
			if w.Size > 0 && size != w.Size {
				return rep, refusal.New(refusal.SizeMismatch, "%s: the store has %d bytes for %s, the lock says %d; fix the lock's size", w.Filename, size, w.SHA256, w.Size)
			}
			rep.Wheels[i].Cached, rep.Wheels[i].Size = true, size
			emit(Event{Kind: EventCached, Filename: w.Filename, Bytes: size, Total: size})
			continue
		}
		if _, dup := seen[w.SHA256.Hex()]; dup {
			continue // the same bytes twice: the first download serves both
		}
		seen[w.SHA256.Hex()] = i
		todo = append(todo, i)
		planBytes += w.Size
	}
	if len(todo) == 0 {
		return rep, nil
	}
	// Largest first (sizes from the lock): the longest download starts at
	// once instead of last, which bounds the whole fetch.
	sort.SliceStable(todo, func(a, b int) bool { return res.Packages[todo[a]].Size > res.Packages[todo[b]].Size })
	if opts.Offline {
		if len(damaged) > 0 {
			return rep, refusal.Wrap(refusal.OfflineMiss, errors.Join(damaged...), "offline, and the store held damaged bytes for %d %s, now removed: fetch again online", len(damaged), wheels(len(damaged))).WithRemedy(refusal.ActionFetch, "")
		}
		var names []string
		for _, i := range todo {
			names = append(names, res.Packages[i].Filename)
		}
		return rep, refusal.New(refusal.OfflineMiss, "%d %s not in the store %s: %v; fetch online once", len(names), wheels(len(names)), st.Home(), names).WithRemedy(refusal.ActionFetch, "")
	}
	if c == nil {
		return rep, errors.New("fetch: no index client and not offline")
	}
	emit(Event{Kind: EventPlan, Total: planBytes, Count: len(todo)})

	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// One bound for every request: --jobs is the number of connections the
	// index sees at once (small static servers have small listen
	// backlogs). Each wheel, largest first, takes a slot, reads its
	// project's page (once per project: a second wheel of the project
	// waits for the first's read) and downloads in the same slot, so the
	// pages of some projects are read while others download.
	pages := map[string]*page{}
	for _, i := range todo {
		name := pep503.Normalize(res.Packages[i].Name)
		if pages[name] == nil {
			pages[name] = &page{done: make(chan struct{})}
		}
	}
	sem := make(chan struct{}, opts.Jobs)

	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		pending  []*store.Pending // verified, committed in batches
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
			cancel(err)
		}
		mu.Unlock()
	}
	for _, i := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := res.Packages[i]
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			name := pep503.Normalize(w.Name)
			p := pages[name]
			p.once.Do(func() {
				p.proj, p.err = c.Project(ctx, name)
				close(p.done)
			})
			select {
			case <-p.done:
			case <-ctx.Done():
				<-sem
				return
			}
			if p.err != nil {
				<-sem
				fail(p.err)
				return
			}
			// The slot is for the network: it is given back as soon as the
			// body is read, before the fsync and rename.
			var releaseOnce sync.Once
			release := func() { releaseOnce.Do(func() { <-sem }) }
			defer release()
			out, pb, err := download(ctx, st, c, p.proj, w, opts, emit, release)
			var batch []*store.Pending
			mu.Lock()
			rep.Wheels[i].URL, rep.Wheels[i].Yanked, rep.Wheels[i].YankedReason, rep.Wheels[i].Attempts = out.URL, out.Yanked, out.YankedReason, out.Attempts
			if err == nil {
				rep.Downloaded++
				rep.Bytes += out.Size
				rep.Wheels[i].Size = out.Size
				pending = append(pending, pb)
				if len(pending) >= commitBatch {
					batch, pending = pending, nil
				}
			}
			mu.Unlock()
			if batch != nil {
				if cerr := st.Commit(parent, batch); cerr != nil {
					fail(cerr)
					return
				}
			}
			if err != nil {
				emit(Event{Kind: EventFailed, Filename: w.Filename, Err: err})
				fail(err)
				return
			}
			emit(Event{Kind: EventDone, Filename: w.Filename, Bytes: out.Size, Total: out.Size})
		}()
	}
	wg.Wait()
	// Verified blobs are committed even when another wheel failed (they
	// are correct, and a rerun need not fetch them again), and when the
	// caller cancelled (Ctrl-C): their fsync and rename are quick, their
	// download was not, and the interrupted command says the wheels it
	// fetched stay. They were discarded, so a rerun fetched them again.
	// The downloads in flight were cancelled and left nothing.
	if err := parent.Err(); err != nil {
		_ = st.Commit(context.WithoutCancel(parent), pending)
		return rep, err
	}
	if err := st.Commit(parent, pending); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		return rep, firstErr
	}
	if err := context.Cause(ctx); err != nil {
		return rep, err
	}
	// Copies of one blob under two names (the same wheel twice) share it.
	for i := range rep.Wheels {
		if j, ok := seen[rep.Wheels[i].SHA256.Hex()]; ok && j != i && !rep.Wheels[i].Cached {
			rep.Wheels[i].Cached, rep.Wheels[i].Size = true, rep.Wheels[j].Size
		}
	}
	sort.SliceStable(rep.Wheels, func(a, b int) bool { return rep.Wheels[a].Name < rep.Wheels[b].Name })
	return rep, nil
}

type page struct {
	once sync.Once
	done chan struct{}
	proj *index.Project
	err  error
}

type outcome struct {
	URL          string
	Yanked       bool
	YankedReason string
	Attempts     int
	Size         int64
}

// download finds w on its project's page and stores it, retrying
// transient failures with backoff.
func download(ctx context.Context, st *store.Store, c *index.Client, proj *index.Project, w lockfile.ResolvedWheel, opts Options, emit func(Event), release func()) (outcome, *store.Pending, error) {
	f, ok := proj.Find(w.Filename)
	if !ok {
		return outcome{}, nil, refusal.New(refusal.FetchFailed, "%s is not listed on %s (index %s); mirror it there or pin an index that has it", w.Filename, proj.URL, c.BaseURL())
	}
	out := outcome{URL: index.Redact(f.URL), Yanked: f.Yanked, YankedReason: f.YankedReason}
	if h := f.SHA256(); h != "" && h != w.SHA256.Hex() {
		return out, nil, refusal.New(refusal.HashMismatch, "index %s lists %s at %s with sha256:%s, the lock says %s; the index serves other bytes than were locked, or the lock's hash is wrong (edited by hand, or the wheel rebuilt after locking: lock it again)", c.BaseURL(), w.Filename, out.URL, h, w.SHA256)
	}
	if f.Size > 0 && w.Size > 0 && f.Size != w.Size {
		return out, nil, refusal.New(refusal.SizeMismatch, "index %s lists %s with %d bytes, the lock says %d; the index serves other bytes than were locked", c.BaseURL(), w.Filename, f.Size, w.Size)
	}
	delay := opts.Backoff
	var last error
	for attempt := 1; attempt <= opts.Attempts; attempt++ {
		out.Attempts = attempt
		pb, err := once(ctx, st, c, f, w, attempt, emit, release)
		if err == nil {
			out.Size = pb.Size()
			return out, pb, nil
		}
		if ctx.Err() != nil {
			return out, nil, context.Cause(ctx)
		}
		if refusal.CodeOf(err) != "" || store.IsWriteFailure(err) {
			return out, nil, err // a full disk, a store not ours to write, are the host's failures, not the index's
		}
		if !index.Retryable(err) {
			return out, nil, refusal.Wrap(refusal.FetchFailed, err, "%s from %s", w.Filename, out.URL)
		}
		last = err
		if attempt < opts.Attempts {
			wait := index.RetryDelay(err, delay)
			emit(Event{Kind: EventRetry, Filename: w.Filename, Attempt: attempt, Err: err, Wait: wait})
			select {
			case <-ctx.Done():
				return out, nil, context.Cause(ctx)
			case <-time.After(wait):
			}
			delay *= 2
		}
	}
	return out, nil, c.GaveUp(w.Filename+" from "+out.URL, f.URL, opts.Attempts, last)
}

func once(ctx context.Context, st *store.Store, c *index.Client, f index.File, w lockfile.ResolvedWheel, attempt int, emit func(Event), release func()) (*store.Pending, error) {
	body, length, err := c.Open(ctx, f)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	total := w.Size
	if total <= 0 {
		total = length
	}
	if w.Size > 0 && length >= 0 && length != w.Size {
		return nil, refusal.New(refusal.SizeMismatch, "%s: %s declares %d bytes, the lock says %d; the index serves other bytes than were locked", w.Filename, index.Redact(f.URL), length, w.Size)
	}
	var src io.Reader = body
	if w.Size <= 0 && f.Size > 0 {
		// The lock gives no size, the index one (PEP 700): more bytes
		// than it lists are not the file it lists, and are not written.
		if length >= 0 && length != f.Size {
			return nil, refusal.New(refusal.SizeMismatch, "%s: %s declares %d bytes, the %d bytes the index lists differ; the index serves other bytes than it lists", w.Filename, index.Redact(f.URL), length, f.Size)
		}
		if total <= 0 {
			total = f.Size
		}
		src = &listedReader{r: body, left: f.Size, name: w.Filename, url: index.Redact(f.URL), size: f.Size}
	}
	emit(Event{Kind: EventStart, Filename: w.Filename, Total: total, Attempt: attempt})
	// store.Write verifies the body while it streams (the lock's sha256
	// and size, or at most store.MaxUnsized bytes when the lock gives no
	// size), so nothing unverified is ever stored.
	cr := &countingReader{r: src, emit: emit, name: w.Filename, total: total, eof: release}
	p, err := st.Write(ctx, w.SHA256, w.Size, cr)
	if r := (*refusal.Error)(nil); errors.As(err, &r) && (r.Code == refusal.HashMismatch || r.Code == refusal.SizeMismatch) && !strings.HasPrefix(r.Detail, w.Filename) {
		// The store knows the blob by its digest; the operator, by the
		// wheel and where it came from.
		named := *r
		named.Detail = fmt.Sprintf("%s from %s: %s", w.Filename, index.Redact(f.URL), r.Detail)
		return nil, &named
	}
	return p, err
}

// listedReader reads a body the lock gives no size for at most the size
// the index lists, and refuses size_mismatch at the first byte past it.
type listedReader struct {
	r         io.Reader
	left      int64
	name, url string
	size      int64
}

func (l *listedReader) Read(p []byte) (int, error) {
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	if l.left -= int64(n); l.left < 0 {
		return 0, refusal.New(refusal.SizeMismatch, "%s from %s: more than the %d bytes the index lists; the index serves other bytes than it lists", l.name, l.url, l.size)
	}
	return n, err
}

// countingReader reports progress and calls eof when the body ends.
type countingReader struct {
	r     io.Reader
	n     int64
	emit  func(Event)
	name  string
	total int64
	eof   func()
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n += int64(n)
		c.emit(Event{Kind: EventProgress, Filename: c.name, Bytes: c.n, Total: c.total})
	}
	if err == io.EOF && c.eof != nil {
		c.eof()
	}
	return n, err
}

// String renders an event for logs.
func (e Event) String() string {
	return fmt.Sprintf("%s %s %d/%d", e.Kind, e.Filename, e.Bytes, e.Total)
}

// wheels is the noun for n wheels.
func wheels(n int) string {
	if n == 1 {
		return "wheel"
	}
	return "wheels"
}
