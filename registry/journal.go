package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/deniedat"
	"github.com/cruxible/cruxprov/refusal"
)

// A mutation writes several files (a change-set, a pin, the trust state)
// and appends to the history; a crash or a full disk between two of those
// writes would leave a state no verifier accepts, or a change-set marked
// approved with no pin. So a mutation first writes what it will write,
// whole, to journal.json (atomically: that rename is the commit point),
// then the files, then the history, and removes the journal last. A
// journal found later is a mutation committed but not finished: it is
// applied again from the start (every step is idempotent: files are
// replaced whole, and the history is cut back to its length before the
// mutation and appended again), by the next process that can take the
// lock exclusively. A reader that finds the journal waits for the lock,
// shared (a live writer removes its journal before it lets the lock go);
// a journal still there then is a dead writer's, and until its owner
// finishes it readers refuse (registry_corrupt), since what they would
// read is half of a change.

// journalName is the journal's file under the registry's root.
const journalName = "journal.json"

// JournalFormat is journal.json's format.
const JournalFormat = "cruxprov.registry-journal/v1"

type journal struct {
	Format string `json:"format"`
	// LogSize is the history's length in bytes before the mutation.
	LogSize int64 `json:"log_size"`
	// Log is what the mutation appends to the history.
	Log   []byte        `json:"log"`
	Files []journalFile `json:"files"`
}

type journalFile struct {
	Path string `json:"path"` // relative to the root, slash-separated
	Data []byte `json:"data"`
}

// changesetFile is a change-set's file name.
var changesetFile = regexp.MustCompile(`^changesets/[0-9a-f]{64}\.yaml$`)

// journalPath reports whether p is a file a mutation writes.
func journalPath(p string) bool {
	if p == "interfaces.json" || p == "trust.json" || changesetFile.MatchString(p) {
		return true
	}
	name, ok := strings.CutPrefix(p, "pins/")
	if !ok {
		return false
	}
	name, ok = strings.CutSuffix(name, ".json")
	return ok && validName(name)
}

// crashAt, when a test sets it, is called at each step of a commit
// ("journal", "file", "history-torn", "history"); the crash tests kill
// their process there, and an error it returns is the step's (a full
// disk at that point).
var crashAt func(step string) error

func step(name string) error {
	if crashAt != nil {
		return crashAt(name)
	}
	return nil
}

// commit writes j as the journal, then applies it. A write the file
// system does not take is registry_write_failed (writeFailed), saying
// whether the change was recorded.
func (d *Dir) commit(j *journal) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	// Every directory the change writes in, asked before the commit
	// point: one this user may not write (made read-only) would stop the
	// change past it, recorded and not finished, and readers refusing
	// the registry until its owner makes it writable again.
	dirs := []string{d.root}
	for _, f := range j.Files {
		if dir := filepath.Dir(d.path(filepath.FromSlash(f.Path))); !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	if len(j.Log) > 0 {
		// And the history, appended to in place (not replaced, as
		// the files are): one made read-only (chmod a-w) stopped the
		// change at its append, recorded and not finished.
		dirs = append(dirs, d.path("log.jsonl"))
	}
	for _, dir := range dirs {
		if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK, unix.AT_EACCESS); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return d.unwritable(&fs.PathError{Op: "access", Path: dir, Err: err}, false)
		}
	}
	if err := writeAtomic(d.path(journalName), b); err != nil {
		// Not committed. writeAtomic fails after its rename too (the
		// directory's fsync): the journal is then in place, and the next
		// command would apply the change this one reports as not
		// recorded. Take it back (the lock is held, so a journal here is
		// this one: finish removed any other); one that cannot be
		// removed is committed, and said so.
		if rerr := os.Remove(d.path(journalName)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return d.writeFailed(fmt.Errorf("%w; and its journal could not be taken back: %v", err, rerr), true)
		}
		syncDir(d.root) // best effort: the journal was never durable
		return d.writeFailed(err, false)
	}
	err = step("journal")
	if err == nil {
		err = d.apply(j)
	}
	if err != nil {
		if refusal.CodeOf(err) != "" {
			return fmt.Errorf("registry: the change is recorded but not all written (%w): the next change of this registry by a user who may write it finishes it", err)
		}
		return d.writeFailed(err, true)
	}
	return nil
}

// writeFailed is the registry_write_failed refusal of a change whose
// write err failed (a full file system or quota, an I/O error; a write
// denied or a read-only file system: unwritable): recorded, its journal
// is in place and the next change finishes it; not, nothing was changed.
// The detail says which, and what to do: free space on the registry's
// file system (or fix what failed) and run the command again. A full
// disk was a plain error (exit 1): a Go caller or a script could not
// tell it from any other failure, and registry_corrupt would have said
// to restore the registry from a copy.
func (d *Dir) writeFailed(err error, recorded bool) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
		// The lock opened for writing, a directory did not take the
		// file (made read-only, a file system remounted read-only):
		// this user cannot change the registry.
		return d.unwritable(err, recorded)
	}
	what := "cannot record the change in the registry " + d.root + ", so nothing was changed"
	again := "run the command again"
	if recorded {
		what = "the change is recorded in the registry " + d.root + " (" + journalName + ") but not all written, and until it is a reader of the registry refuses it"
		again = "run the command again, which finishes it"
	}
	return refusal.Wrap(refusal.RegistryWriteFailed, err, "%s: %v; %s and %s", what, err, writeRemedy(err, d.root), again)
}

// writeRemedy says what lets a write that failed with err (not for want
// of write access: unwritable) under the registry root succeed.
func writeRemedy(err error, root string) string {
	switch {
	case errors.Is(err, unix.ENOSPC):
		return "free space (or inodes: df -i) on the file system of " + root
	case errors.Is(err, unix.EDQUOT):
		return "free space under this user's disk quota on the file system of " + root + " (or raise the quota)"
	}
	return "fix the file system of " + root + " (a failing disk shows in the kernel log)"
}

// apply writes j's files and history, then removes the journal. It is
// idempotent: a journal applied in part is applied again whole.
func (d *Dir) apply(j *journal) error {
	for _, f := range j.Files {
		if err := writeAtomic(d.path(filepath.FromSlash(f.Path)), f.Data); err != nil {
			return err
		}
		if err := step("file"); err != nil {
			return err
		}
	}
	if len(j.Log) > 0 {
		lf, err := os.OpenFile(d.path("log.jsonl"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		err = appendLog(lf, j.LogSize, j.Log)
		if cerr := lf.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
		if err := step("history"); err != nil {
			return err
		}
	}
	if err := os.Remove(d.path(journalName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(d.root)
}

// appendLog writes b at offset size of the history f (cutting off
// whatever an interrupted append left past it) and syncs it. A history
// shorter than size lost entries since the journal was written:
// registry_corrupt.
func appendLog(f *os.File, size int64, b []byte) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < size {
		return refusal.New(refusal.RegistryCorrupt, "the history is %d bytes, shorter than the %d it had when the unfinished change was recorded", st.Size(), size)
	}
	if size == 0 {
		f.Chmod(0o644) // made now: 0644 whatever the umask, as every registry file
	}
	if st.Size() > size {
		if err := f.Truncate(size); err != nil {
			return err
		}
	}
	if crashAt != nil && len(b) > 1 {
		// A test's crash in the middle of the append.
		if _, err := f.WriteAt(b[:len(b)/2], size); err != nil {
			return err
		}
		if err := step("history-torn"); err != nil {
			return err
		}
	}
	if _, err := f.WriteAt(b, size); err != nil {
		return err
	}
	return f.Sync()
}

// readJournal reads the journal, nil when there is none. One that does
// not parse, or names a file a mutation never writes, is registry_corrupt
// (the journal is renamed into place whole, so it is never cut off).
func (d *Dir) readJournal() (*journal, error) {
	b, err := readOptional(d.path(journalName))
	if err != nil || b == nil {
		return nil, err
	}
	return parseJournal(b)
}

// parseJournal decodes and checks the journal's bytes b.
func parseJournal(b []byte) (*journal, error) {
	var j journal
	if err := strictJSON(b, &j); err != nil {
		return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "%s (an unfinished change)", journalName)
	}
	if j.Format != JournalFormat {
		return nil, refusal.New(refusal.RegistryCorrupt, "%s format %q: this cruxprov reads %s", journalName, j.Format, JournalFormat)
	}
	if j.LogSize < 0 {
		return nil, refusal.New(refusal.RegistryCorrupt, "%s: a negative history length", journalName)
	}
	for _, f := range j.Files {
		if !journalPath(f.Path) {
			return nil, refusal.New(refusal.RegistryCorrupt, "%s names %q, not a registry file", journalName, f.Path)
		}
	}
	return &j, nil
}

// finish applies an unfinished change's journal, and removes the temp
// files of interrupted writes; the caller holds the lock exclusively.
func (d *Dir) finish() error {
	j, err := d.readJournal()
	if err != nil {
		return err
	}
	if j != nil {
		if err := d.apply(j); err != nil {
			if refusal.CodeOf(err) != "" {
				return err
			}
			if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
				// A full disk is not a damaged registry: registry_corrupt
				// said to restore it from a trusted copy, while any command
				// finishes the change once there is room. It was a plain
				// error (exit 1); it is registry_write_failed.
				return refusal.Wrap(refusal.RegistryWriteFailed, err, "no space left to finish the registry change recorded in %s: %v; %s and run the command again, which finishes it (the change is kept)", d.path(journalName), err, writeRemedy(err, d.root))
			}
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
				// Nor is a directory this user may not write (its own,
				// made read-only), or a file system mounted read-only:
				// it said to restore the registry from a copy.
				return d.cannotFinish(err)
			}
			return refusal.Wrap(refusal.RegistryCorrupt, err, "cannot finish the registry change left unfinished in %s", d.path(journalName))
		}
	}
	for _, dir := range []string{d.root, d.path("changesets"), d.path("pins")} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // load says what is wrong with it
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".tmp-") && e.Type().IsRegular() {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	return nil
}

// pending reports whether a change is recorded and not finished.
func (d *Dir) pending() (bool, error) {
	_, err := os.Lstat(d.path(journalName))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, unreadable(err, "registry file "+d.path(journalName))
	}
	return true, nil
}

// cannotFinish is the registry_write_failed refusal of an open that would
// finish a change recorded and not finished, and may not write it (err:
// a write denied, or a file system mounted read-only): the detail says
// what lets the write through, then the command run again, which
// finishes it.
func (d *Dir) cannotFinish(err error) error {
	advice, owner := d.cannotWrite(err, true)
	r := refusal.Wrap(refusal.RegistryWriteFailed, err, "cannot finish the registry change recorded in %s, which was interrupted (until it is finished the registry is not read): %v; %s (the change is kept)", d.path(journalName), err, advice)
	if owner != "" {
		r.WithRemedy(refusal.ActionRunAsOwner, owner)
	}
	return r
}

// readOnlyFS is the refusal of an open that finds a change recorded and
// not finished on a file system mounted read-only (rofs, the EROFS that
// asking for write access got), where nobody can finish it until the
// file system is writable again. To the registry's owner (or root: a
// process that would finish it, were the file system writable) it is
// registry_write_failed, as a full disk is: remount it read-write, then
// the same command finishes it. To a reader that could not finish it
// anyway (an executor), registry_corrupt, as any change left unfinished
// is: what it would read is half of a change; the detail says the owner
// finishes it once the registry is writable again, and it carries no
// remedy: both said the owner finishes it by opening the registry (the
// remedy repair_registry), which on a read-only mount is refused again.
func (d *Dir) readOnlyFS(rofs error) error {
	err := &fs.PathError{Op: "access", Path: d.root, Err: rofs}
	if uid, ok := deniedat.Owner(d.changedAt()); os.Geteuid() == 0 || (ok && int(uid) == os.Geteuid()) {
		return d.cannotFinish(err)
	}
	return refusal.Wrap(refusal.RegistryCorrupt, err, "a registry change was interrupted and is not finished (%s), and it cannot be finished while the file system of %s is mounted read-only: %v; once the registry is writable again (remount it read-write), its owner finishes it by opening it (any change, a repair, or a read of it with its history verified); until then the registry is not read, since it holds half of a change", d.path(journalName), d.root, err)
}

// unfinished is the refusal of a reader that finds a change recorded and
// not finished, which it may not finish itself.
func (d *Dir) unfinished(why error) error {
	msg := "a registry change was interrupted and is not finished (%s); the registry's owner finishes it by opening the registry (any change, a repair, or a read of it with its history verified)"
	if why != nil {
		return refusal.Wrap(refusal.RegistryCorrupt, why, msg, d.path(journalName)).WithRemedy(refusal.ActionRepairRegistry, "")
	}
	return refusal.New(refusal.RegistryCorrupt, msg, d.path(journalName)).WithRemedy(refusal.ActionRepairRegistry, "")
}

// awaitWriter is what a reader that may not finish a change does on
// finding its journal: the journal of a live writer's change, which that
// writer removes once its files are written (it holds the lock
// exclusively until then), is no damage, so the reader waits for the
// lock, shared, and looks again. Only a journal still there then is a
// change its writer left unfinished. (A reader refused registry_corrupt,
// "a registry change was interrupted", whenever it opened the registry
// in the few milliseconds an operator's mutation was writing it.)
// On a file system mounted read-only (rofs, not nil: a mount of a
// registry its owner writes through another), a change still unfinished
// is refused readOnlyFS, which says what lets it be finished.
func (d *Dir) awaitWriter(ctx context.Context, rofs error) error {
	stuck := func() error {
		if rofs != nil {
			return d.readOnlyFS(rofs)
		}
		return d.unfinished(nil)
	}
	lf, err := d.openLockRead()
	if refusal.CodeOf(err) != "" {
		return err // not a lock file at all (a FIFO hung this open)
	}
	if err != nil {
		s := stuck()
		if errors.Is(err, fs.ErrPermission) && refusal.CodeOf(s) == refusal.RegistryCorrupt {
			// A lock this reader may not open (an operator's umask
			// 077, a lock of 0600): it cannot tell a live writer's
			// change from one left unfinished, and what stops it is
			// the denial, registry_unreadable with the grant_read
			// remedy, as every other denied read of the registry is.
			// It was registry_corrupt, "a registry change was
			// interrupted", with the remedy repair_registry, of a
			// registry that may be whole (DESIGN §2: one code, one
			// meaning). Its owner's refusal on a read-only mount
			// (cannotFinish) stays: remounting comes first.
			return unreadable(err, "the registry's lock "+d.path(".lock")+", which a reader waits on to tell a change being written from one left unfinished ("+d.path(journalName)+")")
		}
		return s // not there, or an I/O error: it cannot tell
	}
	if err := lockFile(ctx, lf, unix.LOCK_SH); err != nil {
		// lockFile closed lf, or leaves it to its waiter.
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return d.unfinished(err)
	}
	defer lf.Close()
	if p, err := d.pending(); err != nil || p {
		if err != nil {
			return err
		}
		return stuck()
	}
	return nil
}

// finishPending finishes an unfinished change when there is one and this
// process may write the registry: it takes the lock exclusively (waiting
// for a live writer, whose journal is then gone). A process that may not
// write it gets the refusal a reader gets.
func (d *Dir) finishPending(ctx context.Context) error {
	if p, err := d.pending(); err != nil || !p {
		return err
	}
	// Whether this process may write the registry is asked first: a
	// reader (an executor; the lock is 0644) may not open the lock for
	// writing, and that it could not is no cause of anything, so the
	// refusal says only what is so. Nor does a reader wait for the
	// exclusive lock, which would hold writers and readers up.
	if err := unix.Access(d.root, unix.W_OK); err != nil {
		if errors.Is(err, unix.EROFS) {
			// Mounted read-only: nobody finishes it here, not even
			// its owner, until it is remounted read-write. It said
			// the owner finishes it by opening the registry, which
			// on this mount cannot work (readOnlyFS).
			return d.awaitWriter(ctx, err)
		}
		return d.awaitWriter(ctx, nil)
	}
	lf, err := os.OpenFile(d.path(".lock"), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrPermission) {
		return d.awaitWriter(ctx, nil) // the directory is writable, the lock another owner's
	}
	if errors.Is(err, unix.EROFS) {
		return d.awaitWriter(ctx, err) // remounted read-only since
	}
	if err != nil {
		return d.unfinished(err)
	}
	if err := lockFile(ctx, lf, unix.LOCK_EX); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return d.unfinished(err)
	}
	defer lf.Close()
	return d.finish()
}
