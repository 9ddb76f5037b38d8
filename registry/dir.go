package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/internal/deniedat"
	"github.com/cruxible/cruxprov/internal/filekind"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// Dir is a Registry in files under one directory (the embedded default is
// $CRUXPROV_HOME/registry):
//
//	log.jsonl                the hash-chained history (append-only)
//	trust.json               keys, policy and the governance steps (JSON)
//	interfaces.json          registered interfaces (JSON)
//	changesets/<hex>.yaml    one change-set per file, named by its id
//	pins/<provider>.json     accepted pins (JSON: verify reads no YAML)
//	.lock                    flock(2): exclusive in every mutation, shared in VerifyPin
//	journal.json             a mutation committed and not finished (journal.go)
//
// Every file is written atomically (a temp file in the same directory,
// fsync, rename, fsync of the directory); a mutation holds the exclusive
// lock, finishes a change left unfinished, loads the whole state, applies
// the rule, and commits what changed through the journal: the files, then
// its history entries. A read of one file takes no lock (every file
// is replaced whole); a read of several (the lists' whole state, the
// history, which is appended in place) and VerifyPin, which reads a pin,
// the history and the trust state and checks them against each other,
// hold the lock shared (ReadLock), so they never see a pin or an
// interface whose history entry is not written yet. Directories are 0755 and files 0644, so an executor that is not
// the operator can read (and take the lock shared, read-only).
type Dir struct {
	// Now is the clock (time.Now when nil).
	Now  func() time.Time
	root string
	// readOnly: opened by OpenDirReadOnly, it makes nothing and refuses
	// every mutation.
	readOnly bool
	// lk is the registry's lock while this Dir holds it: shared for its
	// reads (counted, so that reads nest and goroutines share one lock)
	// or exclusive for a mutation, whose own reads then take no other.
	lk struct {
		mu sync.Mutex
		n  int
		f  *os.File // nil: held without a lock file (none, or not readable)
	}
}

// OpenDir opens (creating when missing) the registry under root and
// checks its history chain (registry_corrupt). A directory of it that is
// missing and that this user may not create (its parent is not writable
// by it, or the file system is read-only) is left missing: no writer
// ever opened the registry, which is not damage.
func OpenDir(ctx context.Context, root string) (*Dir, error) {
	return openDir(ctx, root, false)
}

// OpenDirReadOnly opens the registry under root for the commands that
// only read it (lists, show, diff, the history, gc --dry-run, verify):
// as OpenDir, but it makes nothing. A missing directory reads as empty,
// as it does for a user who may not make it; a root that is missing
// altogether is a registry no writer ever opened (or a root that names
// no store: a provider's pin there is refused pin_unapproved naming the
// root, not advising change-sets to approve). Every mutation of the
// returned Dir is refused. (A change left unfinished by a killed writer
// is still finished by its owner, as by any open: docs/governance.md.)
func OpenDirReadOnly(ctx context.Context, root string) (*Dir, error) {
	return openDir(ctx, root, true)
}

func openDir(ctx context.Context, root string, readOnly bool) (*Dir, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, d := range []string{root, filepath.Join(root, "changesets"), filepath.Join(root, "pins")} {
		st, err := os.Stat(d)
		if err == nil && st.IsDir() {
			continue
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			// There, but this user cannot reach it (an executor, a
			// registry made under the operator's umask 077): say so,
			// rather than that it is missing.
			return nil, unreadable(err, "the registry directory "+d)
		}
		if err == nil {
			// Something else in a directory's place (a file, a FIFO),
			// said as what it is, to a reader and a writer alike: the
			// writer's mkdir failed with "not a directory".
			what := "a regular file"
			if !st.Mode().IsRegular() {
				what = filekind.Of(st.Mode())
			}
			return nil, refusal.New(refusal.RegistryCorrupt, "the registry's %s is %s, not a directory: this registry did not put it there; move it aside, and restore the directory from a copy of the registry", d, what)
		} else if readOnly {
			continue // read as empty (listDir, readOptional)
		}
		// 0755 whatever the umask, the store's home above it too:
		// executors (other users) read them.
		if err := atomicfile.MkdirAll(d, 0o755); err != nil {
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
				// Missing, and this user may not make it (an executor, a
				// read-only store): no writer ever opened the registry, so
				// nothing was written there. That is not damage: opening
				// and reading need no write access (a missing file reads
				// as nothing), and a mutation fails on its lock, saying
				// this user cannot change the registry.
				continue
			}
			if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
				return nil, refusal.Wrap(refusal.RegistryWriteFailed, err, "the registry has no directory %s and it cannot be made: %v; %s and run the command again", d, err, writeRemedy(err, root))
			}
			return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "the registry has no directory %s and it cannot be made", d)
		}
	}
	d := &Dir{root: root, readOnly: readOnly}
	if err := d.finishPending(ctx); err != nil {
		return nil, err
	}
	if _, err := d.Chain(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// Root returns the registry's directory.
func (d *Dir) Root() string { return d.root }

func (d *Dir) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Dir) path(elem ...string) string {
	return filepath.Join(append([]string{d.root}, elem...)...)
}

// readOptional reads a file, returning nil without error when missing;
// a file that cannot be read is refused (unreadable): registry_unreadable
// where this user may not read it, registry_corrupt for a directory in
// its place or an I/O error: nothing can be verified from it.
func readOptional(p string) ([]byte, error) {
	b, err := readRegular(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, unreadable(err, "registry file "+p)
	}
	return b, nil
}

// readRegular reads the regular file at p whole (capped.ReadFile: opened
// without blocking, so a FIFO at a registry file or a verifier floor,
// which hung verify, run and gc in open(2) past SIGTERM, is refused at
// once). No registry file comes near the bound.
func readRegular(p string) ([]byte, error) {
	return capped.ReadFile(p, 1<<30)
}

// unreadable is the refusal for what of the registry cannot be read.
// Denied permission (EACCES, EPERM) is registry_unreadable, said as
// such, with what to do: an executor run as a user who may not read the
// operator's registry (a home of 0700, a file of 0600) has nothing to
// restore. It was registry_corrupt, whose advice is to restore the
// registry from a trusted copy: one code for two meanings (DESIGN §2).
// Any other failure to read (an I/O error) stays registry_corrupt.
//
// Its remedy (ActionGrantRead) names the one path to give read access
// to: the first directory on the way this user may not enter, else the
// file or directory itself. It named no path but the one read, so an
// operator whose registry directory (or home) was 0700 was sent to a
// file under it that was readable already.
func unreadable(err error, what string) error {
	if errors.Is(err, fs.ErrPermission) {
		d, ok := deniedat.FindErr(err)
		if !ok {
			return refusal.Wrap(refusal.RegistryUnreadable, err, "cannot read %s: permission denied to this user (uid %d), which is not damage to the registry: run as a user who can read the store, or give it read access (the registry's files are 0644 in 0755 directories for the executors that read them: docs/store.md, \"Modes and owners\")", what, os.Geteuid())
		}
		return refusal.Wrap(refusal.RegistryUnreadable, err, "cannot read %s: permission denied to this user (uid %d) on %s%s, which is not damage to the registry: run as a user who can read the store, or give it read access (the registry's files are 0644 in 0755 directories for the executors that read them: docs/store.md, \"Modes and owners\")", what, os.Geteuid(), d.At, d.OwnerNote()).WithRemedy(refusal.ActionGrantRead, d.At)
	}
	return refusal.Wrap(refusal.RegistryCorrupt, err, "cannot read %s", what)
}

type ifaceFile struct {
	Format     string      `json:"format"`
	Interfaces []Interface `json:"interfaces"`
}

// load reads the whole state.
func (d *Dir) load(ctx context.Context) (*state, error) {
	s := newState()
	b, err := readOptional(d.path("log.jsonl"))
	if err != nil {
		return nil, err
	}
	if s.log, err = parseLog(b); err != nil {
		return nil, err
	}
	s.logBytes = int64(len(b))
	if b, err = readOptional(d.path("interfaces.json")); err != nil {
		return nil, err
	} else if b != nil {
		var f ifaceFile
		if err := strictJSON(b, &f); err != nil {
			return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "interfaces.json")
		}
		if !majorOK(f.Format, IfaceFormat) {
			return nil, refusal.New(refusal.RegistryCorrupt, "interfaces.json format %q: this cruxprov reads %s", f.Format, IfaceFormat)
		}
		for _, it := range f.Interfaces {
			s.ifaces[it.ID] = it
		}
	}
	if b, err = readOptional(d.path("trust.json")); err != nil {
		return nil, err
	} else if b != nil {
		if s.trust, err = parseTrust(b); err != nil {
			return nil, err
		}
	}
	names, err := d.listDir("changesets", len(s.log))
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hexID, ok := strings.CutSuffix(n.Name(), ".yaml")
		if !ok {
			continue // a temp file of an interrupted write
		}
		b, err := readRegular(d.path("changesets", n.Name()))
		if err != nil {
			return nil, unreadable(err, d.path("changesets", n.Name()))
		}
		cs, err := ParseChangeSet(b)
		if err != nil {
			// Every mutation loads every change-set: one that does not
			// parse stops them all, so say which file and what to do.
			detail := err.Error()
			var r *refusal.Error
			if errors.As(err, &r) {
				detail = r.Message()
			}
			return nil, refusal.New(refusal.RegistryCorrupt, "%s does not parse (%s), and no change to the registry can be made while it is there: if this registry did not write it (a newer cruxprov's format, a file copied in by hand), move it out of changesets/; if it did, restore it from a trusted copy", d.path("changesets", n.Name()), detail)
		}
		if cs.Metadata.ID.Hex() != hexID {
			return nil, refusal.New(refusal.RegistryCorrupt, "changesets/%s holds change-set %s", n.Name(), cs.Metadata.ID)
		}
		s.changesets[cs.Metadata.ID] = cs
		s.order = append(s.order, cs.Metadata.ID)
	}
	sort.Slice(s.order, func(i, j int) bool {
		a, b := s.changesets[s.order[i]], s.changesets[s.order[j]]
		if !a.Metadata.ProposedAt.Equal(b.Metadata.ProposedAt) {
			return a.Metadata.ProposedAt.Before(b.Metadata.ProposedAt)
		}
		return a.Metadata.ID.Hex() < b.Metadata.ID.Hex()
	})
	pins, err := d.listDir("pins", len(s.log))
	if err != nil {
		return nil, err
	}
	for _, n := range pins {
		name, ok := strings.CutSuffix(n.Name(), ".json")
		if !ok {
			continue
		}
		p, err := d.Pin(ctx, name)
		if err != nil {
			return nil, err
		}
		s.pins[name] = p
	}
	return s, nil
}

// loadShared is load under the registry's lock, shared: the files it
// reads one by one are of one state, never of a change half-written.
func (d *Dir) loadShared(ctx context.Context) (s *state, err error) {
	err = d.shared(ctx, func() (err error) { s, err = d.load(ctx); return })
	return s, err
}

// readLog reads the history under the registry's lock, shared: a writer
// appends to it in place (journal.go), and a read beside the append
// could see half of an entry.
func (d *Dir) readLog(ctx context.Context) (b []byte, err error) {
	err = d.shared(ctx, func() (err error) { b, err = readOptional(d.path("log.jsonl")); return })
	return b, err
}

// logLines reads the history and checks its chain (chainLines): each
// entry's hash and its JSON bytes, not decoded.
func (d *Dir) logLines(ctx context.Context) ([]digest.Digest, [][]byte, error) {
	b, err := d.readLog(ctx)
	if err != nil {
		return nil, nil, err
	}
	return chainLines(b)
}

// listDir lists the registry's directory name (changesets or pins). One
// that is missing in a registry with no history was never made (OpenDir
// leaves it to the first writer when this user cannot make it): it holds
// nothing. Missing with a history, it was lost: registry_corrupt.
func (d *Dir) listDir(name string, history int) ([]os.DirEntry, error) {
	ents, err := os.ReadDir(d.path(name))
	if errors.Is(err, fs.ErrNotExist) && history == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, unreadable(err, "the registry's "+name+" directory "+d.path(name))
	}
	return ents, nil
}

// unwritable is the registry_write_failed refusal of a change this user
// may not write: err is the write (or the access check before it) that
// was denied (EACCES, EPERM) or that a read-only file system refused
// (EROFS); recorded says whether the change's journal is in place. It
// was registry_corrupt, "which is not damage to the registry", a code
// whose advice is to restore the registry from a copy: nothing is to be
// restored, and the detail says what lets the write through instead.
// Where another user owns the registry (or its lock), its remedy
// (ActionRunAsOwner) is the change run as that owner: the store belongs
// to one operator, and an executor only reads it.
func (d *Dir) unwritable(err error, recorded bool) error {
	what := "cannot record the change in the registry " + d.root + ", so nothing was changed"
	if recorded {
		what = "the change is recorded in the registry " + d.root + " (" + journalName + ") but not all written, and until it is a reader of the registry refuses it"
	}
	advice, owner := d.cannotWrite(err, recorded)
	r := refusal.Wrap(refusal.RegistryWriteFailed, err, "%s: %v; %s", what, err, advice)
	if owner != "" {
		r.WithRemedy(refusal.ActionRunAsOwner, owner)
	}
	return r
}

// cannotWrite says what lets this user's change of the registry through
// where err (a write denied, or a read-only file system) stopped it, the
// command run again after it (which finishes the change where it is
// recorded: recorded); and, where another user owns the registry, that
// user's uid (the change is theirs to make), else "".
func (d *Dir) cannotWrite(err error, recorded bool) (advice, owner string) {
	again := "and run the command again"
	if recorded {
		again += ", which finishes it"
	}
	uid, ok := deniedat.Owner(d.changedAt())
	switch {
	case errors.Is(err, unix.EROFS) && recorded:
		// A copy would finish it in the copy alone, the registry
		// still refused: it is finished where it is recorded.
		return "the file system of " + d.root + " is mounted read-only: remount it read-write, then run the command again, which finishes it", ""
	case errors.Is(err, unix.EROFS):
		return "the file system of " + d.root + " is mounted read-only: remount it read-write, or use a copy of the registry, " + again, ""
	case ok && errors.Is(err, fs.ErrPermission) && int(uid) != os.Geteuid():
		name := userName(uid)
		who := name + " (uid " + strconv.FormatUint(uint64(uid), 10) + ")"
		if name == "" {
			name, who = "uid "+strconv.FormatUint(uint64(uid), 10), "uid "+strconv.FormatUint(uint64(uid), 10)
		}
		// The owner's command finishes a change that is recorded too.
		return fmt.Sprintf("this registry is owned by %s, and this user (uid %d) may not write it: run the command as %s, or ask them to", who, os.Geteuid(), name), strconv.FormatUint(uint64(uid), 10)
	case errors.Is(err, fs.ErrNotExist):
		// The lock's directory, missing, which this user could not make
		// (openDir leaves it so).
		return "it does not exist and this user cannot make it: use a store in a directory this user can write, or run as the store's owner", ""
	case errors.Is(err, fs.ErrPermission):
		at := deniedDir(err)
		if at == "" {
			at = d.root
		}
		if uid, ok := deniedat.Owner(at); ok && int(uid) == os.Geteuid() && os.Geteuid() != 0 {
			// This user's own registry, a directory of it without
			// write permission (chmod a-w): "run as the store's owner"
			// sent the owner to itself.
			return "it is this user's, without write permission on " + at + ": give it back (chmod u+w " + at + ") " + again, ""
		}
		return fmt.Sprintf("make %s writable by this user (uid %d) %s", at, os.Geteuid(), again), ""
	}
	return "fix the file system of " + d.root + " (a failing disk shows in the kernel log) " + again, ""
}

// userName is the name of the user uid is, "" where the user database
// has none.
func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return ""
}

// deniedDir is where the write err (a *fs.PathError) was denied: the
// path itself where it exists (the lock, a directory), else the
// directory it was to be made in (an atomic write's temp file); "" when
// err names no path.
func deniedDir(err error) string {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return ""
	}
	if _, serr := os.Lstat(pe.Path); serr == nil {
		return pe.Path
	}
	return filepath.Dir(pe.Path)
}

// changedAt is what a change opens for writing first: the registry's
// lock, or where it is not made yet, the registry's directory, where the
// first change makes it.
func (d *Dir) changedAt() string {
	at := d.path(".lock")
	if _, err := os.Lstat(at); err != nil {
		return d.root
	}
	return at
}

// errOpenedReadOnly is a change asked of a Dir OpenDirReadOnly opened:
// the caller's mistake, not the registry's state.
var errOpenedReadOnly = errors.New("registry: opened read-only (OpenDirReadOnly): open it with OpenDir to change it")

// Writable refuses, as a change would (unwritable), a registry this
// user may not change: a command asks it before a key's password, so
// that an approver is not asked for one to be told no.
func (d *Dir) Writable() error {
	if d.readOnly {
		return errOpenedReadOnly
	}
	// The lock, and the directories a change writes its files in: a
	// registry directory of this user's made read-only (chmod a-w) let
	// the approver type the key's password, to be refused at the journal;
	// and the history, which a change appends to in place.
	for _, at := range []string{d.changedAt(), d.root, d.path("changesets"), d.path("pins"), d.path("log.jsonl")} {
		if _, err := os.Lstat(at); err != nil {
			continue // made by the change (openDir made those it could)
		}
		if err := unix.Faccessat(unix.AT_FDCWD, at, unix.W_OK, unix.AT_EACCESS); err != nil {
			return d.unwritable(&fs.PathError{Op: "access", Path: at, Err: err}, false)
		}
	}
	return nil
}

// mutate runs f on the loaded state under the exclusive lock and writes
// what it changed.
func (d *Dir) mutate(ctx context.Context, f func(s *state) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.readOnly {
		return errOpenedReadOnly
	}
	lf, err := os.OpenFile(d.path(".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return d.writeFailed(err, false) // no inode left for the lock
	}
	if err != nil {
		return d.unwritable(err, false)
	}
	lf.Chmod(0o644) // whatever the umask: readers take it shared (best effort: another owner's stays as it is)
	if err := lockFile(ctx, lf, unix.LOCK_EX); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("registry: lock: %w", err)
	}
	defer lf.Close() // closing the file releases the lock
	d.hold()
	defer d.release()
	if err := d.finish(); err != nil {
		return err
	}
	s, err := d.load(ctx)
	if err != nil {
		return err
	}
	s.begin()
	if err := f(s); err != nil {
		return err
	}
	return d.persist(s)
}

// openLockRead opens the registry's lock file for reading, to flock it
// shared: without blocking, and only a regular file. A FIFO at .lock
// hung every reader (registry log, key list, verify) in open(2), past
// SIGTERM; it is refused registry_corrupt, saying what it is.
func (d *Dir) openLockRead() (*os.File, error) {
	p := d.path(".lock")
	lf, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := lf.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = refusal.New(refusal.RegistryCorrupt, "the registry's lock %s is %s: this registry did not put it there; move it aside (the next change makes the lock again)", p, filekind.NotRegular(st.Mode()))
	}
	if err != nil {
		lf.Close()
		return nil, err
	}
	return lf, nil
}

// ReadLock takes the registry's lock shared, so that what a reader reads
// in several calls (a pin, the history, the trust state) is the result of
// whole mutations, never of one half-written: a writer holds the lock
// exclusively from reading the state to its last write (pins before the
// history entries that accept them). release gives it back. A registry
// never written has no lock file and nothing to wait for. The lock file
// is opened read-only: an executor that may only read the store can
// take it (one that may not open it reads without it). Every read of
// several files (the history, the state a list loads) takes it too, so
// a reader waits out a writer's change (a few milliseconds) rather than
// read half of it and refuse registry_corrupt (an executor's verify, run
// and lists did, beside an operator's install or approval). Taken
// already by this Dir, it is taken again at no cost.
func (d *Dir) ReadLock(ctx context.Context) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.held() {
		return d.release, nil
	}
	if err := d.finishPending(ctx); err != nil {
		return nil, err
	}
	lf, err := d.openLockRead()
	if refusal.CodeOf(err) != "" {
		return nil, err
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		// Never written, or a lock this reader may not open (an operator's
		// umask): read without it. That can only cost a refusal during a
		// mutation, never accept anything: the checks are the same.
		d.adopt(nil)
		return d.release, nil
	}
	if err != nil {
		return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "cannot open the registry's lock")
	}
	if err := lockFile(ctx, lf, unix.LOCK_SH); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "cannot take the registry's lock")
	}
	if p, err := d.pending(); err != nil || p {
		// A writer died after finishPending looked.
		lf.Close()
		if err != nil {
			return nil, err
		}
		return nil, d.unfinished(nil)
	}
	d.adopt(lf)
	return d.release, nil
}

// held reports whether this Dir holds the lock, and counts one more
// holder when it does.
func (d *Dir) held() bool {
	d.lk.mu.Lock()
	defer d.lk.mu.Unlock()
	if d.lk.n == 0 {
		return false
	}
	d.lk.n++
	return true
}

// hold counts a holder of the lock a mutation took (its file is the
// mutation's, closed by it).
func (d *Dir) hold() {
	d.lk.mu.Lock()
	d.lk.n++
	d.lk.mu.Unlock()
}

// adopt makes f (locked shared; nil for no lock file) the lock this Dir
// holds, or, when another goroutine took one meanwhile, closes it and
// counts one more holder of that one.
func (d *Dir) adopt(f *os.File) {
	d.lk.mu.Lock()
	defer d.lk.mu.Unlock()
	if d.lk.n > 0 {
		if f != nil {
			f.Close()
		}
	} else {
		d.lk.f = f
	}
	d.lk.n++
}

// release drops one holder; the last closes the lock's file (which
// releases it).
func (d *Dir) release() {
	d.lk.mu.Lock()
	defer d.lk.mu.Unlock()
	if d.lk.n == 0 {
		return
	}
	if d.lk.n--; d.lk.n == 0 && d.lk.f != nil {
		d.lk.f.Close()
		d.lk.f = nil
	}
}

// shared runs read under the registry's lock, shared (ReadLock).
func (d *Dir) shared(ctx context.Context, read func() error) error {
	release, err := d.ReadLock(ctx)
	if err != nil {
		return err
	}
	defer release()
	return read()
}

// lockFile takes f's flock (how: LOCK_EX or LOCK_SH), blocking: a waiter
// that polled would be starved by one that takes the lock again within
// the polling interval (an approval is a propose and an approve, and an
// executor verifies before every run). When ctx ends first, lockFile
// returns its error and f belongs to the waiting goroutine, which closes
// it once the lock comes; otherwise the caller closes f to release it.
func lockFile(ctx context.Context, f *os.File, how int) error {
	fd := int(f.Fd())
	if err := unix.Flock(fd, how|unix.LOCK_NB); err == nil {
		return nil // not held the other way: the usual case
	}
	got := make(chan error, 1)
	go func() {
		for {
			err := unix.Flock(fd, how)
			if !errors.Is(err, unix.EINTR) {
				got <- err
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
		}
		return err
	case <-ctx.Done():
		go func() { <-got; f.Close() }()
		return ctx.Err()
	}
}

// persist writes what the mutation changed, through the journal
// (journal.go): every file whole, then the history entries.
func (d *Dir) persist(s *state) error {
	j := &journal{Format: JournalFormat}
	add := func(p string, b []byte) { j.Files = append(j.Files, journalFile{Path: p, Data: b}) }
	if s.dirty.ifaces {
		b, err := marshalJSON(ifaceFile{Format: IfaceFormat, Interfaces: s.interfaces()})
		if err != nil {
			return err
		}
		add("interfaces.json", b)
	}
	if s.dirty.trust {
		b, err := marshalJSON(s.trust)
		if err != nil {
			return err
		}
		add("trust.json", b)
	}
	for _, id := range slices.SortedFunc(maps.Keys(s.dirty.changesets), func(a, b digest.Digest) int { return strings.Compare(a.Hex(), b.Hex()) }) {
		b, err := MarshalChangeSet(s.changesets[id])
		if err != nil {
			return err
		}
		add("changesets/"+id.Hex()+".yaml", b)
	}
	for _, name := range slices.Sorted(maps.Keys(s.dirty.pins)) {
		b, err := marshalJSON(s.pins[name])
		if err != nil {
			return err
		}
		add("pins/"+name+".json", b)
	}
	for _, r := range s.log[s.dirty.logFrom:] {
		j.Log = append(j.Log, r.line()...)
	}
	if len(j.Files) == 0 && len(j.Log) == 0 {
		return nil
	}
	j.LogSize = s.logBytes
	return d.commit(j)
}

// writeAtomic writes b to p durably (internal/atomicfile), mode 0644.
func writeAtomic(p string, b []byte) error {
	if err := atomicfile.WriteFile(p, b, 0o644); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("registry: fsync %s: %w", dir, err)
	}
	return nil
}

// Interfaces implements Reader. They are checked against the history's
// registrations (registry_corrupt naming the interface): install decides
// from them.
func (d *Dir) Interfaces(ctx context.Context) ([]Interface, error) {
	s, err := d.loadShared(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkIfaces(s.interfaces(), entries(s.log)); err != nil {
		return nil, err
	}
	return s.interfaces(), nil
}

// ChangeSets implements Reader.
func (d *Dir) ChangeSets(ctx context.Context) ([]*ChangeSet, error) {
	s, err := d.loadShared(ctx)
	if err != nil {
		return nil, err
	}
	return s.changesetList(), nil
}

// ChangeSet implements Reader.
func (d *Dir) ChangeSet(ctx context.Context, id digest.Digest) (*ChangeSet, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := readOptional(d.path("changesets", id.Hex()+".yaml"))
	if err != nil {
		return nil, err
	}
	if b == nil || id.IsZero() {
		return nil, refusal.New(refusal.ChangesetInvalid, "no change-set %s", id).WithRemedy(refusal.ActionReviewChangesets, "")
	}
	cs, err := ParseChangeSet(b)
	if err != nil {
		return nil, err
	}
	if cs.Metadata.ID != id {
		return nil, refusal.New(refusal.RegistryCorrupt, "changesets/%s.yaml holds change-set %s", id.Hex(), cs.Metadata.ID)
	}
	return cs, nil
}

// Pins implements Reader.
func (d *Dir) Pins(ctx context.Context) ([]*Pin, error) {
	s, err := d.loadShared(ctx)
	if err != nil {
		return nil, err
	}
	return s.pinList(), nil
}

// Pin implements Reader: one JSON file read, no YAML (and, when there
// is no pin file, the history, to tell a pin never accepted from a lost
// one).
func (d *Dir) Pin(ctx context.Context, provider string) (*Pin, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkProviderName(provider); err != nil {
		return nil, err
	}
	b, err := readOptional(d.path("pins", provider+".json"))
	if err != nil {
		return nil, err
	}
	if b == nil {
		// No pin file is no accepted pin only while the history accepted
		// none: else it was lost (registry_corrupt, as for trust.json).
		hashes, raws, err := d.logLines(ctx)
		if err != nil {
			return nil, err
		}
		if rec, err := pinRecord(hashes, raws, provider); err != nil {
			return nil, err
		} else if rec.Last != nil {
			return nil, lostPinFrom(ctx, d, provider, rec.Last)
		}
		if _, err := os.Lstat(d.root); errors.Is(err, fs.ErrNotExist) {
			// No registry at all (OpenDirReadOnly reads a missing root as
			// empty): a path that names no store, most likely. Advising
			// the change-sets to approve sent an executor given a wrong
			// store to look for proposals that are not there.
			return nil, refusal.New(refusal.PinUnapproved, "provider %s has no accepted pin: there is no registry at %s; check that it is the registry of the operator's store (nothing was ever proposed or approved there)", provider, d.root)
		}
		// Never accepted: what is next, the history says (proposalsOf).
		es, err := proposalEntries(raws)
		if err != nil {
			return nil, err
		}
		return nil, neverAccepted(provider, es)
	}
	p, err := ParsePin(b)
	if err != nil {
		return nil, err
	}
	if p.Provider != provider {
		return nil, refusal.New(refusal.RegistryCorrupt, "pins/%s.json holds the pin of %s", provider, p.Provider)
	}
	return p, nil
}

// Trust implements Reader.
func (d *Dir) Trust(ctx context.Context) (*Trust, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := readOptional(d.path("trust.json"))
	if err != nil {
		return nil, err
	}
	if b == nil {
		// No trust.json is a registry that trusts no key yet only while
		// its history records no root of trust: else it was lost, and
		// `key list` listed no key and `policy show` a threshold of 1.
		log, err := d.Log(ctx)
		if err != nil {
			return nil, err
		}
		for _, e := range log {
			if e.isRoot() {
				return nil, refusal.New(refusal.RegistryCorrupt, "the registry has no trust.json, but its history records the root of trust %s (entry %d): the trust document was lost: repairing the registry makes it again from the history and the approved change-sets (given the root's public key), or restore trust.json from a copy of the registry", e.Subject, e.Seq).WithRemedy(refusal.ActionRepairRegistry, e.Digest.String())
			}
		}
		return nil, nil
	}
	return parseTrust(b)
}

// Log implements Reader.
func (d *Dir) Log(ctx context.Context) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := d.readLog(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := parseLog(b)
	if err != nil {
		return nil, err
	}
	return entries(recs), nil
}

// Chain implements Reader: the log is hashed line by line, not decoded.
func (d *Dir) Chain(ctx context.Context) ([]digest.Digest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h, _, err := d.logLines(ctx)
	return h, err
}

// PinHistory implements Reader: the log is read once, its chain checked,
// and only the lines that can be the provider's pin events, or name the
// last one's change-set, are decoded.
func (d *Dir) PinHistory(ctx context.Context, provider string) (*PinRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hashes, raws, err := d.logLines(ctx)
	if err != nil {
		return nil, err
	}
	return pinRecord(hashes, raws, provider)
}

// RegisterInterface implements Writer.
func (d *Dir) RegisterInterface(ctx context.Context, id string, schema []byte) (out *InterfaceResult, err error) {
	err = d.mutate(ctx, func(s *state) (err error) { out, err = s.registerInterface(d.now(), id, schema); return })
	return out, err
}

// TrustKey implements Writer.
func (d *Dir) TrustKey(ctx context.Context, k Key, by string) (out *TrustResult, err error) {
	err = d.mutate(ctx, func(s *state) (err error) { out, err = s.trustKey(d.now(), k, by); return })
	return out, err
}

// Propose implements Writer.
func (d *Dir) Propose(ctx context.Context, c Change, by string) (out *ChangeSet, already bool, err error) {
	err = d.mutate(ctx, func(s *state) (err error) { out, already, err = s.propose(d.now(), c, by); return })
	return out, already, err
}

// Approve implements Writer.
func (d *Dir) Approve(ctx context.Context, id digest.Digest, signer *sign.PrivateKey, expires *time.Time) (out *ApproveResult, err error) {
	err = d.mutate(ctx, func(s *state) (err error) { out, err = s.approve(d.now(), id, signer, expires); return })
	return out, err
}

// Approvable checks, without a key, what Approve of change-set id would
// refuse whatever key signed it: an unknown change-set, one rejected or
// replaced since, a proposal whose base is no longer current
// (changeset_stale), a registry that trusts no key, files that are not
// the history's. nil says only that an approval may go through: Approve
// checks again, under the lock, and what depends on the key. A command
// asks it before the key's password, so that an approver is not asked
// for a passphrase to be told no.
func (d *Dir) Approvable(ctx context.Context, id digest.Digest) error {
	s, err := d.loadShared(ctx)
	if err != nil {
		return err
	}
	_, err = s.approvable(id)
	return err
}

// ApprovedAlready is what Approve of change-set id by the key whose
// digest is signer returns without signing, when that key's approval
// stands (ApproveResult.Already: the change-set accepted with it, still
// what the registry holds, the approval unexpired), read without the key:
// a command asks it before the key's password, so that an approver who
// approved already is told so without one. nil, and no error, where
// Approve would sign; Approvable's refusals, and Approve's refusal of
// this key (not trusted, a builder key, a change-set no longer proposed
// that it did not approve and cannot renew), otherwise: they too were
// said only after the password was asked for. It reads without the
// lock: Approve decides again under it.
func (d *Dir) ApprovedAlready(ctx context.Context, id, signer digest.Digest) (*ApproveResult, error) {
	s, err := d.loadShared(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := s.approvable(id)
	if err != nil {
		return nil, err
	}
	return s.beforeSigning(d.now(), cs, signer)
}

// Repair writes again, under the lock and through the journal, what the
// history says otherwise: interfaces.json, from the history's
// registrations, and each pin file that is lost or older than the pin
// the history accepted or retired last for its provider (put back from
// before), from that pin's approved change-set in changesets/. A pin
// file that is newer than the history's, or whose change-set is gone,
// is left as it is (verify and every change of that provider refuse
// it). Nothing is added to the history: what is written again is what
// it records.
func (d *Dir) Repair(ctx context.Context) (out *Repaired, err error) {
	return d.RepairWith(ctx, RepairOptions{})
}

// RepairWith is Repair, and for a trust.json lost (missing), it makes it
// again from the history's root of trust (opts.RootKey, its public key)
// and governance steps, each from its approved change-set in
// changesets/, replayed as verify replays it. A trust.json that is there
// and not the history's (edited, put back) is refused as before, naming
// what differs: restore it.
func (d *Dir) RepairWith(ctx context.Context, opts RepairOptions) (out *Repaired, err error) {
	err = d.mutate(ctx, func(s *state) (err error) { out, err = s.repair(opts); return })
	return out, err
}

// Reject implements Writer.
func (d *Dir) Reject(ctx context.Context, id digest.Digest, reason, by string) (out *ChangeSet, err error) {
	err = d.mutate(ctx, func(s *state) (err error) { out, err = s.reject(d.now(), id, reason, by); return })
	return out, err
}
