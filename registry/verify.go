package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/internal/deniedat"
	"github.com/cruxible/cruxprov/internal/filekind"
	"github.com/cruxible/cruxprov/internal/kernelfs"
	"github.com/cruxible/cruxprov/refusal"
)

// Floor is what one verifier remembers of one registry, kept outside it
// in the verifier's state directory (beside its receipts ledger) as
// <stateDir>/floors/<hex of the registry's first history hash>.json: the
// history's length and head hash it last saw, the highest revision it
// accepted per provider, the digest of the trust document it last
// replayed (so an unchanged trust state is not replayed on every run),
// and where the registry it last raised it for lives (Root).
type Floor struct {
	Format    string           `json:"format"`
	Registry  digest.Digest    `json:"registry"`
	Length    int              `json:"length"`
	Head      digest.Digest    `json:"head"`
	Trust     digest.Digest    `json:"trust"`
	Providers map[string]int64 `json:"providers"`
	// Root is the directory of the registry whose history the floor's
	// length and head are (registryRoot: absolute, symlinks resolved).
	// A store copied whole keeps its registry's identity (Registry), so
	// two copies verified from one state directory share one floor:
	// Root tells the copy beside it from this registry put back to an
	// older state, which a refusal of a history behind the floor says.
	// It is not a key: a history behind the floor is refused whatever
	// Root says, and one at or past it is accepted and Root moves to
	// it (a store moved, mv, verifies as before). Empty in a floor
	// written before Root was kept, read as before, and for a Reader
	// with no directory (a Stub).
	Root string `json:"root,omitempty"`
}

// registryRoot is where reg lives on disk, as a floor records it (Root):
// a Dir's root made absolute, its symlinks resolved (one store reached
// through a symlink is one store); "" for a Reader with no directory.
func registryRoot(reg Reader) string {
	r, ok := reg.(interface{ Root() string })
	if !ok || r.Root() == "" {
		return ""
	}
	p, err := filepath.Abs(r.Root())
	if err != nil {
		return ""
	}
	if q, err := filepath.EvalSymlinks(p); err == nil {
		p = q
	}
	return p
}

// behindFloor is the refusal (registry_corrupt) of chain, the history
// of the registry at root ("" where it has no directory), that the
// verifier's floor f in stateDir is past: shorter than f, or forking
// from it at f's last entry. What it says depends on whose floor f is
// (f.Root). The same registry's, it is a rollback or a loss: restore
// the newest copy, or move the floor aside (belowFloor). Another
// registry's of the same identity, still there, it is a copy verified
// beside it (a store copied whole: a backup, a second store), and it
// claims no rollback (one state directory cannot tell which copy
// changed how): each copy is verified from a state directory of its own
// (ActionSetStateDir). Another's no longer there, this registry may
// have been moved here from it (then it lost entries since) or be a
// copy of one moved away: it says both. A floor that names no root (an
// older floor, a Stub) says both as it did: a copy, else a rollback.
func behindFloor(stateDir, root string, f *Floor, chain []digest.Digest) *refusal.Error {
	if f.Root == "" || root == "" {
		if len(chain) < f.Length {
			return refusal.New(refusal.RegistryCorrupt, "the history has %d entries; this verifier saw %d (its tail was cut off): %s", len(chain), f.Length, belowFloor(stateDir, f))
		}
		return refusal.New(refusal.RegistryCorrupt, "the history forks from what this verifier saw at entry %d: %s", f.Length-1, belowFloor(stateDir, f))
	}
	if f.Root == root {
		if len(chain) < f.Length {
			return refusal.New(refusal.RegistryCorrupt, "the history of the registry at %s has %d entries; this verifier saw %d in this same registry (its tail was cut off: the registry was put back to an older state, or lost entries): %s", root, len(chain), f.Length, restoreFloor(stateDir, f))
		}
		return refusal.New(refusal.RegistryCorrupt, "the history of the registry at %s forks from what this verifier saw in this same registry at entry %d (the registry was put back to an older state and changed since, or rewritten): %s", root, f.Length-1, restoreFloor(stateDir, f))
	}
	seen := fmt.Sprintf("the history of the registry at %s has %d entries; this verifier saw %d in the registry at %s", root, len(chain), f.Length, f.Root)
	if len(chain) >= f.Length {
		seen = fmt.Sprintf("the history of the registry at %s parts at entry %d from the one this verifier saw in the registry at %s", root, f.Length-1, f.Root)
	}
	copied := fmt.Sprintf("this state directory's floor is of the registry at %s; verify each copy from a state directory of its own", f.Root)
	if _, err := os.Lstat(f.Root); errors.Is(err, fs.ErrNotExist) {
		return refusal.New(refusal.RegistryCorrupt, "%s (of the same identity, %s), which is not there any more: "+
			"if this registry was moved here from %s, it is behind what this verifier saw there: %s; "+
			"if it is a copy of that registry (a store copied whole keeps its registry's identity), now elsewhere, %s",
			seen, f.Registry, f.Root, restoreFloor(stateDir, f), copied)
	}
	return refusal.New(refusal.RegistryCorrupt, "%s, a copy of it or its original (a store copied whole keeps its registry's identity, %s, and so shares this verifier's floor): %s",
		seen, f.Registry, copied).WithRemedy(refusal.ActionSetStateDir, "")
}

// restoreFloor is what to do about a registry whose history its
// verifier's floor f is past, this very registry's: restore its newest
// copy, or, having found only entries lost, move the floor aside.
func restoreFloor(stateDir string, f *Floor) string {
	return fmt.Sprintf("restore the registry from its newest copy, one whose history has at least %d entries, entry %d with the hash %s (the registry's log prints them); "+
		"if the history lost only entries (no pin or trust change this verifier ran undone), move this verifier's floor %s aside: its next verify starts a fresh floor (docs/governance.md, Restoring the registry from a backup)",
		f.Length, f.Length-1, f.Head, floorPath(stateDir, f.Registry))
}

// belowFloor says what to do about a history that its verifier's floor
// is past (cut off, restored from an older copy, or forked): a store
// copied whole (a backup, a second store) and verified beside the one it
// was copied from is verified from a state directory of its own (the
// copy keeps the registry's identity, so both raised one floor: the
// refusal said only to restore the registry, which would overwrite the
// copy); else restore the newest copy of the registry, or, having found
// only entries lost, move the floor aside (governance.md, "Restoring
// the registry from a backup"). It is said where the floor names no
// registry directory, which cannot tell the two apart (behindFloor).
func belowFloor(stateDir string, f *Floor) string {
	return "if this registry is a copy of one this verifier also verifies (a store copied whole, as a backup or a second store, keeps its registry's identity, and so shares this verifier's floor), verify each copy from a state directory of its own; otherwise " + restoreFloor(stateDir, f)
}

func floorPath(stateDir string, id digest.Digest) string {
	return filepath.Join(stateDir, "floors", id.Hex()+".json")
}

// ReadFloor returns the floor kept in stateDir for the registry whose
// first history entry hashes to id, or nil when there is none yet.
// A floor that does not parse or is of another format is refused with
// registry_corrupt (delete it only knowing that this forgets what the
// verifier saw); one that cannot be read (its mode or its directory's,
// a file where a directory of its path must be, one that is no regular
// file, an I/O error) with ledger_write_failed, the code of the state
// directory it shares with the receipts ledger (whether a read or a
// write of the floors is refused first depends on their modes: one
// cause, one code), with the remedy ActionSetStateDir. It is never taken
// for a floor not there: only a floor file that does not exist is.
func ReadFloor(stateDir string, id digest.Digest) (*Floor, error) {
	p := floorPath(stateDir, id)
	b, err := readRegular(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, floorRefusal(&FloorError{Path: p, Err: err, StateDir: stateDir, Read: true}, "cannot read the verifier floor %s", p)
	}
	f, err := parseFloor(p, b)
	if err != nil {
		return nil, err
	}
	if f.Registry != id {
		// A floor copied from another registry's (a state directory
		// moved between hosts, a file renamed) was told apart only by
		// its head, as "the history forks", or not at all when its
		// length and head were this registry's: say whose floor it is.
		return nil, refusal.New(refusal.RegistryCorrupt, "the verifier floor %s is the floor of registry %s, not of this registry %s: move it aside if it was copied here, knowing that this verifier then forgets the revisions it saw", p, f.Registry, id)
	}
	return f, nil
}

// parseFloor reads the floor file p holds. A damaged one says which file
// and what to do: it said "verifier floor: unexpected EOF", naming
// neither, and it is the executor's own state, not the registry.
func parseFloor(p string, b []byte) (*Floor, error) {
	const todo = "restore it from a backup, or remove it knowing that this verifier then forgets the revisions it saw (a rollback to them is no longer refused)"
	var f Floor
	if err := strictJSON(b, &f); err != nil {
		return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "the verifier floor %s is damaged: %v; %s", p, err, todo)
	}
	if !majorOK(f.Format, FloorFormat) || f.Length < 1 {
		return nil, refusal.New(refusal.RegistryCorrupt, "the verifier floor %s has format %q and length %d, which this cruxprov does not read: %s", p, f.Format, f.Length, todo)
	}
	if f.Providers == nil {
		f.Providers = map[string]int64{}
	}
	return &f, nil
}

// FloorError is why a verifier's floor, or the floors directory of its
// state directory (DIR/floors), could not be read or written (Path): a
// caller can tell it from a ledger of its own that cannot be written,
// and say where the floors may go instead. The ledger_write_failed
// refusal that wraps it carries that as its remedy wherever the state
// directory could not be made or used (a read or a write denied, a
// read-only or full file system, a path that cannot be made, a file
// where a directory of it must be, a floor that is no regular file):
// refusal.ActionSetStateDir, its Target the path its words say what to
// do about (the directory to make writable, for a denied write).
type FloorError struct {
	Path string
	Err  error
	// StateDir is the verifier's state directory the floor is kept in
	// ("" where the caller does not say), which the words name.
	StateDir string
	// Read is set where the floor was being read (ReadFloor), not
	// written: a read denied was said as a write ("make it writable").
	Read bool
}

func (e *FloorError) Error() string { return e.Err.Error() }
func (e *FloorError) Unwrap() error { return e.Err }

// floorRefusal is the ledger_write_failed refusal of fe, with its
// remedy (ActionSetStateDir: another state directory, or the path its
// words name mended). Only cmd/ said what to do, from the FloorError; a
// Go caller got no remedy.
//
// Its detail says in words what the remedy is, as the CLI's line said
// it (a Go executor logs the detail; only the CLI said it before):
// what is wrong with the path, and what to do about it. A state
// directory that could not be made (under /proc, under a regular file)
// said only the file system's error, with no remedy.
func floorRefusal(fe *FloorError, format string, args ...any) *refusal.Error {
	detail := fmt.Sprintf(format, args...)
	at, todo := fe.remedy()
	if todo != "" {
		detail += ": " + fe.Error() + "; " + todo
	}
	r := refusal.Wrap(refusal.LedgerWriteFailed, fe, "%s", detail)
	if at != "" {
		r.WithRemedy(refusal.ActionSetStateDir, at)
	}
	return r
}

// remedy is the path the state directory's trouble is at (the
// remedy's Target) and what to do about it, in words, after "; ".
func (fe *FloorError) remedy() (at, todo string) {
	const elsewhere = "give the verifier a state directory it can write"
	var pe *fs.PathError
	errors.As(fe.Err, &pe)
	if at, todo := fe.onKernelFS(pe); todo != "" {
		return at, todo
	}
	switch {
	case errors.Is(fe.Err, syscall.EACCES), errors.Is(fe.Err, syscall.EPERM):
		if fe.Read {
			at = fe.Path
			if pe != nil {
				if d := deniedat.Path(pe.Path); d != "" {
					at = d
				}
			}
			return at, fmt.Sprintf("this user (uid %d) may not read %s%s: this verifier's floors are kept in its state directory, which is to be this user's: "+
				"have it made readable by this user again (its owner can: chown, chmod), or give the verifier a state directory of its own, whose floor starts afresh", os.Geteuid(), at, ownerMode(at))
		}
		at = fe.refusedAt()
		return at, "this verifier's floors are kept in its state directory: make " + at + ownerMode(at) + " writable by this user, or " + elsewhere
	case errors.Is(fe.Err, syscall.EROFS):
		return fe.Path, "this verifier's floors are kept in its state directory, on a read-only file system: give the verifier a state directory on another"
	case errors.Is(fe.Err, syscall.ENOSPC), errors.Is(fe.Err, syscall.EDQUOT):
		return fe.Path, "free space on the file system of " + fe.Path + ", or give the verifier a state directory on another"
	case errors.Is(fe.Err, syscall.ENOTDIR):
		p := fe.Path
		if pe != nil {
			p = pe.Path
		}
		x, kind := fileOnPath(p)
		if fe.StateDir == "" || strings.HasPrefix(x, fe.StateDir+string(filepath.Separator)) {
			return x, x + " is " + kind + " where a directory of the verifier's state directory must be: move it away, or " + elsewhere
		}
		return x, "the verifier's state directory " + fe.StateDir + " cannot be made: " + x + ", on its path, is " + kind + ", not a directory: give the verifier a state directory that is a directory, or can be made"
	case errors.Is(fe.Err, syscall.ENOENT) && pe != nil && pe.Op == "mkdir":
		// Not made where nothing stood: a file system that makes no
		// directory there (/proc, /sys), or a link on the path that
		// leads nowhere.
		return pe.Path, "the verifier's state directory cannot be made at " + pe.Path + " (its file system makes no directory there, as /proc does, or a link on its path leads nowhere): give the verifier a state directory that can be made"
	case errors.Is(fe.Err, capped.ErrNotRegular):
		return fe.Path, "a floor is a regular file: move this away (a floor made anew forgets the revisions the verifier saw), or " + elsewhere
	case pe != nil:
		// An I/O error, a path too long, a loop of links: the state
		// directory cannot be used as it is.
		return fe.Path, "mend the verifier's state directory, or " + elsewhere
	}
	return "", ""
}

// onKernelFS is remedy's answer for a state directory on a file system
// of the kernel's (kernelfs: /sys, /proc), where a write of the floors
// is refused to every user, root too: EPERM or EACCES on sysfs, ENOENT
// on procfs, EROFS. It said "make /sys (its owner: uid 0, mode 0555)
// writable by this user", which no one can, or to lift an immutable
// attribute there is none of. "" where fe is not that.
func (fe *FloorError) onKernelFS(pe *fs.PathError) (at, todo string) {
	if fe.Read {
		return "", ""
	}
	at = fe.Path
	if pe != nil {
		at = pe.Path
	}
	k, _ := kernelfs.Of(at)
	if k == "" {
		return "", ""
	}
	for _, e := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.ENOENT, syscall.EROFS} {
		if errors.Is(fe.Err, e) {
			sd := fe.StateDir
			if sd == "" {
				sd = filepath.Dir(fe.Path)
			}
			return at, "the verifier's state directory " + sd + " is on " + k + ", a file system of the kernel's, where no user (root neither) can make a file or directory, so its floors cannot be kept there: give the verifier a state directory on another file system"
		}
	}
	return "", ""
}

// ownerMode is " (its owner: uid N, mode 0755)" of p, or "" where p
// cannot be looked at: who can make it readable or writable, and how
// it is now.
func ownerMode(p string) string {
	st, err := os.Stat(p)
	if err != nil {
		return ""
	}
	uid, ok := deniedat.Owner(p)
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (its owner: uid %d, mode %04o)", uid, st.Mode().Perm())
}

// fileOnPath is the file that stands where a directory of p's path
// must be (an open or mkdir of p refused ENOTDIR), and what it is ("a
// file", "a FIFO (named pipe)", …); p and "a file" where none is there
// now.
func fileOnPath(p string) (string, string) {
	x := deniedat.NotDir(p)
	if x == "" {
		return p, "a file"
	}
	if st, err := os.Stat(x); err == nil && !st.Mode().IsRegular() {
		return x, filekind.Of(st.Mode())
	}
	return x, "a file"
}

// refusedAt is where the file system refused a write of fe's, denied:
// the directory that must be writable (a floors directory not made yet
// is made in its parent; a floor is written through a temp file beside
// it and renamed, so its directory, not the floor file), else fe.Path.
func (fe *FloorError) refusedAt() string {
	var pe *fs.PathError
	if errors.As(fe.Err, &pe) {
		switch {
		case pe.Op == "mkdir":
			return filepath.Dir(pe.Path)
		case pe.Path != fe.Path && filepath.Dir(pe.Path) == filepath.Dir(fe.Path):
			return filepath.Dir(pe.Path)
		}
	}
	return fe.Path
}

// writeFloor raises the floor atomically. A floor that cannot be written
// is ledger_write_failed (the verifier's state directory, where its
// receipts ledger lives too, is not writable or the disk failed): the
// verification that would have raised it fails closed, since a floor
// left behind is a rollback this verifier could no longer see.
//
// Verifications of one verifier run at once (runs in parallel), each
// reading the floor first and writing it last: a write of what an older
// snapshot of the registry showed, after a newer one's, would lower the
// floor. So the write holds flock(2) on the floors directory, reads the floor again and only
// raises it: the longer history seen (its head and trust document), the
// higher revision per provider; a floor written meanwhile whose head is
// not in chain (the history this verification read) is a fork,
// registry_corrupt.
func writeFloor(ctx context.Context, stateDir string, f *Floor, chain []digest.Digest) error {
	dir := filepath.Join(stateDir, "floors")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return floorRefusal(&FloorError{Path: dir, Err: err, StateDir: stateDir}, "cannot make the verifier floors directory %s", dir)
	}
	lf, err := os.Open(dir) // flock(2) on the directory itself: no lock file beside the floors
	if err != nil {
		return floorRefusal(&FloorError{Path: dir, Err: err, StateDir: stateDir}, "cannot open the verifier floors directory %s", dir)
	}
	if err := lockFile(ctx, lf, unix.LOCK_EX); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return floorRefusal(&FloorError{Path: dir, Err: err, StateDir: stateDir}, "cannot lock the verifier floors directory %s", dir)
	}
	defer lf.Close()
	// Every writer holds the flock for its whole write: a temp file
	// here is a dead one's (killed before its rename). Remove them, or
	// each kill leaves one for good.
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".tmp-") && e.Type().IsRegular() {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	cur, err := ReadFloor(stateDir, f.Registry)
	if err != nil {
		return err
	}
	if cur != nil {
		if cur.Length <= len(chain) && chain[cur.Length-1] != cur.Head {
			return behindFloor(stateDir, f.Root, cur, chain)
		}
		if cur.Length > f.Length {
			// Raised meanwhile past this history: its length, head and
			// trust are the registry's that raised it (Root with them).
			f.Length, f.Head, f.Trust = cur.Length, cur.Head, cur.Trust
			if cur.Root != "" {
				f.Root = cur.Root
			}
		} else if f.Root == "" {
			f.Root = cur.Root
		}
		for k, v := range cur.Providers {
			if v > f.Providers[k] {
				f.Providers[k] = v
			}
		}
	}
	b, err := marshalJSON(f)
	if err != nil {
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot encode the verifier floor")
	}
	p := floorPath(stateDir, f.Registry)
	if err := atomicfile.WriteFile(p, b, 0o644); err != nil { // the executor's state, not the registry
		return floorRefusal(&FloorError{Path: p, Err: err, StateDir: stateDir}, "cannot write the verifier floor %s", p)
	}
	return nil
}

// VerifyPin is the pin half of verify (DESIGN §9), what an executor pays
// before every run. It checks, failing closed:
//
//   - the history chain (registry_corrupt), and against the verifier's
//     floor in stateDir (when stateDir is not ""): a history shorter
//     than the floor or forking from it is registry_corrupt;
//   - the provider has an accepted, not retired pin (pin_unapproved;
//     registry_corrupt when the history accepted one and its pin file
//     is gone);
//   - its revision is not below the floor's (pin_rollback);
//   - its spec hashes to its spec digest and its revision is the spec's
//     (signature_invalid: the signatures cover both);
//   - it is the pin the history accepted or retired last for the
//     provider, and the provider's revisions in the history never go
//     down (pin_rollback: an older pin put back, for a verifier without
//     a floor or after a retirement too; registry_corrupt: a pin the
//     history never accepted);
//   - the trust state replays from the root of trust named in the
//     history, each governance step approved at the threshold then in
//     force (registry_corrupt, signature_invalid) — skipped when the
//     trust document is the one this floor last replayed;
//   - distinct trusted approver keys whose signatures over the approval
//     payload verify reach the threshold (signature_invalid,
//     signer_untrusted, pin_unapproved when short), unexpired at now
//     (pin_expired);
//   - what no signature covers is what the history recorded: the pin's
//     acceptedAt is its pin entry's time, and its approvals are the
//     ones recorded for its change-set, each under the recorded name
//     and time (registry_corrupt: an edited pin file).
//
// On success it raises the floor (atomically; ledger_write_failed when
// the floor cannot be read or written) and returns the pin. Every
// failure is a *refusal.Error but the context's own (cancelled, past
// its deadline). It reads JSON only: no YAML, no network.
func VerifyPin(ctx context.Context, reg Reader, stateDir, provider string, now time.Time) (*Pin, error) {
	return VerifyPinFrom(ctx, reg, digest.Digest{}, stateDir, provider, now)
}

// VerifyPinFrom is VerifyPin for a verifier that does not trust on first
// use: the registry's id (its first history entry's hash, which
// `registry log` prints) must be id, when id is not zero. A registry
// rewritten from its first entry (a new root of trust, its own history)
// has another id: registry_corrupt, where VerifyPin would start a fresh
// floor for it and accept it.
//
// A nil reg (or a nil *Dir) is refused registry_corrupt: there is no
// registry to verify the pin in. A stateDir that is not an absolute path
// is refused ledger_write_failed, before anything is read or written.
func VerifyPinFrom(ctx context.Context, reg Reader, id digest.Digest, stateDir, provider string, now time.Time) (*Pin, error) {
	if isNilReader(reg) {
		return nil, refusal.New(refusal.RegistryCorrupt, "no registry to verify provider %s's pin in (a nil registry.Reader): open the registry and pass it", provider)
	}
	if stateDir != "" && !filepath.IsAbs(stateDir) {
		// An empty XDG_STATE_HOME joined with "cruxprov" kept the floors
		// under the working directory, wherever the executor started.
		return nil, refusal.New(refusal.LedgerWriteFailed, "the verifier's state directory %q is not an absolute path: its floors would be kept under the working directory; pass an absolute one ($XDG_STATE_HOME/cruxprov when that is absolute, else ~/.local/state/cruxprov)", stateDir).
			WithRemedy(refusal.ActionSetStateDir, "")
	}
	release, err := readLock(ctx, reg)
	if err != nil {
		return nil, err
	}
	defer release()
	rec, err := reg.PinHistory(ctx, provider)
	if err != nil {
		return nil, err
	}
	chain, last := rec.Chain, rec.Last
	if !id.IsZero() {
		if len(chain) == 0 {
			return nil, refusal.New(refusal.RegistryCorrupt, "the registry has no history; this verifier expects registry %s", id)
		}
		if chain[0] != id {
			return nil, refusal.New(refusal.RegistryCorrupt, "the registry is %s; this verifier expects registry %s (a registry rewritten from its first entry, or another store): "+
				"check that this is the store whose registry the verifier pinned, and that the id pinned is that registry's; "+
				"if it is, treat this as tampering and restore the registry from a trusted copy (docs/refusals.md, registry_corrupt)", chain[0], id)
		}
	}
	var floor *Floor
	var root string
	if stateDir != "" && len(chain) > 0 {
		if floor, err = ReadFloor(stateDir, chain[0]); err != nil {
			return nil, err
		}
		root = registryRoot(reg)
		if floor != nil && (len(chain) < floor.Length || chain[floor.Length-1] != floor.Head) {
			return nil, behindFloor(stateDir, root, floor, chain)
		}
	}
	p, err := reg.Pin(ctx, provider)
	if refusal.CodeOf(err) == refusal.PinUnapproved && last != nil {
		// No pin, but the history accepted one: lost, whatever the
		// Reader says.
		return nil, lostPinFrom(ctx, reg, provider, last)
	}
	if err != nil {
		return nil, err
	}
	// A retired provider's pin is checked as any other before it is
	// refused for being retired, so that a verifier keeps the
	// retirement: its floor moves to the retirement's revision, and a
	// registry put back to before it (a backup, a replay) is refused
	// pin_rollback instead of running the retired provider again. Before,
	// the retirement was refused at once and raised no floor.
	retired := func() error { return retiredRefusal(ctx, reg, provider, p) }
	if floor != nil && p.Revision < floor.Providers[provider] {
		err := refusal.New(refusal.PinRollback, "provider %s pin is at revision %d; this verifier accepted revision %d", provider, p.Revision, floor.Providers[provider])
		if last != nil && p.Revision < last.Revision {
			// The history holds the newer pin: an older pin file put
			// back, which repair mends while the history's change-set is
			// there, as for a verifier without a floor. It said only
			// what the floor holds, with nothing to do next.
			also := fmt.Sprintf(", and the registry's history %s revision %d (entry %d): an older pin file was put back", strings.TrimPrefix(last.Event, "pin-"), last.Revision, last.Seq)
			return nil, behindHistory(err, provider, last, restorableFrom(ctx, reg, provider, last), also)
		}
		return nil, err
	}
	sd, err := SpecDigest(&p.Spec)
	if err != nil || sd != p.SpecDigest || p.Revision != p.Spec.Revision || p.Spec.scope() != provider || p.Provider != provider {
		return nil, unsignedPin(provider, p, sd, err)
	}
	if err := matchHistory(p, last); err != nil {
		if last != nil && p.Revision < last.Revision {
			// An older pin file put back: a rollback, which repair
			// mends while the change-set the history accepted is there.
			return nil, behindHistory(err, provider, last, restorableFrom(ctx, reg, provider, last), "")
		}
		return nil, err
	}
	t, err := reg.Trust(ctx)
	if err != nil {
		return nil, err
	}
	if t == nil {
		// A pin the history accepted (matchHistory) was approved by a
		// trusted key: a registry with no trust state lost its trust.json.
		return nil, refusal.New(refusal.RegistryCorrupt, "the registry has no trust state (trust.json) but its history accepted provider %s's pin: restore the registry from a trusted copy", provider)
	}
	tb, err := json.Marshal(t)
	if err != nil {
		return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "the trust state does not encode")
	}
	td := digest.Sum(tb)
	// The replay is skipped only for the trust document this floor
	// replayed against this very history: a history grown since may
	// record a trust change (a key untrusted) that the document, put back
	// as it was, does not have.
	if floor == nil || floor.Trust != td || floor.Length != len(chain) {
		if err := replayTrust(t, chain[0], rec.Governance); err != nil {
			return nil, restoreTrust(err, rec.Governance, "")
		}
	}
	n, expired, why := countApprovals(t, chain[0], p.SpecDigest, provider, p.Revision, p.Approvals, now)
	if th := t.Policy.Threshold; n < th {
		var uk untrustedKey
		switch {
		case p.Retired && (why == nil || errors.As(why, &uk) || refusal.CodeOf(why) == refusal.PinExpired):
			// A retirement whose approvals expired or fell short since is
			// still a retirement, refused as one; its floor is not raised
			// (what is short of the threshold now raises none).
			return nil, retired()
		case n+len(expired) >= th:
			// Renewing the expired approvals reaches the threshold.
			detail := fmt.Sprint(why)
			if refusal.CodeOf(why) == refusal.PinExpired {
				detail = describeExpired(expired)
			}
			return nil, refusal.Wrap(refusal.PinExpired, notRunnable{}, "provider %s: %d of %d approvals unexpired: %s; an approver whose approval expired renews it by approving the change-set (%s) again", provider, n, th, detail, p.SpecDigest).WithRemedy(refusal.ActionRenewApproval, p.SpecDigest.String())
		case errors.As(why, &uk):
			if e := untrustedSince(rec.Governance, uk.signer); e != nil {
				// Approved by a key trusted then and untrusted since (a
				// key rotation): a state, as an expiry is, not a break.
				return nil, withSpecChoices(refusal.Wrap(refusal.SignerUntrusted, notRunnable{}, "provider %s: %d of %d approvals count: the approval by %s (%s) no longer counts, that key was untrusted (history entry %d); propose the provider again and approve it with trusted keys", provider, n, th, e.Subject, uk.signer, e.Seq).WithRemedy(refusal.ActionPropose, proposeTarget(&p.Spec, provider)).WithImages(specImages(&p.Spec)).WithProposePlatforms(specPlatforms(&p.Spec)).WithProposeNoBytecode(specNoBytecode(&p.Spec)), &p.Spec)
			}
			return nil, why
		case why != nil && refusal.CodeOf(why) != refusal.PinExpired:
			return nil, why
		default:
			// Short of the threshold even with the expired approvals
			// renewed (a threshold raised since): renewing is not
			// enough, so this is not pin_expired.
			also := ""
			if len(expired) > 0 {
				also = fmt.Sprintf(", and %d expired (renewing them would not reach it)", len(expired))
			}
			return nil, withSpecChoices(refusal.Wrap(refusal.PinUnapproved, notRunnable{}, "provider %s: %d of %d approvals%s (a pin approved below the current threshold is proposed and approved again)", provider, n, th, also).WithRemedy(refusal.ActionPropose, proposeTarget(&p.Spec, provider)).WithImages(specImages(&p.Spec)).WithProposePlatforms(specPlatforms(&p.Spec)).WithProposeNoBytecode(specNoBytecode(&p.Spec)), &p.Spec)
		}
	}
	// Last, what no signature covers (an approval's name and time, the
	// pin's acceptedAt): a bad or expired approval is refused above for
	// what it is.
	if err := matchRecorded(p, last, rec.Approved); err != nil {
		return nil, err
	}
	if stateDir != "" && len(chain) > 0 {
		nf := &Floor{Format: FloorFormat, Registry: chain[0], Root: root, Providers: map[string]int64{}}
		if floor != nil {
			for k, v := range floor.Providers {
				nf.Providers[k] = v
			}
		}
		nf.Length, nf.Head, nf.Trust = len(chain), chain[len(chain)-1], td
		if p.Revision > nf.Providers[provider] {
			nf.Providers[provider] = p.Revision
		}
		// A floor of another root moves to this one (a store moved, or
		// the copy verified last: the one whose history it holds).
		if floor == nil || nf.Length != floor.Length || nf.Trust != floor.Trust || nf.Providers[provider] != floor.Providers[provider] || (nf.Root != "" && nf.Root != floor.Root) {
			if err := writeFloor(ctx, stateDir, nf, chain); err != nil {
				return nil, err
			}
		}
	}
	if p.Retired {
		return nil, retired()
	}
	return p, nil
}

// retiredRefusal refuses provider, whose pin p is its retirement: it runs
// again once proposed again and approved. Its remedy proposes again the
// pin the retirement replaced (the retirement's spec base), from that
// pin's approved change-set, which the registry keeps: its package,
// platforms, interpreter, images and bytecode, so that the install it
// renders proposes the provider as it last ran. The remedy named the
// provider alone (a retirement's spec holds no package), and the install
// it rendered named WHEEL, PLATFORM and PYTHON for the operator to find.
// Where that change-set is not there (or is not the one the retirement
// replaced), the detail says what the operator names instead.
func retiredRefusal(ctx context.Context, reg Reader, provider string, p *Pin) *refusal.Error {
	when := p.AcceptedAt.UTC().Format(time.RFC3339)
	base := p.Spec.Base
	if cs := retiredChangeSet(ctx, reg, provider, base); cs != nil {
		spec := &cs.Spec
		pkg := spec.Changes[0].Provider.Package
		return withSpecChoices(refusal.New(refusal.PinUnapproved, "provider %s was retired at revision %d (%s): it runs again once proposed again and approved; the advice proposes again the pin it retired (revision %d, %s %s, change-set %s)", provider, p.Revision, when, spec.Revision, pkg.Name, pkg.Version, base).
			WithRemedy(refusal.ActionPropose, proposeTarget(spec, provider)).WithImages(specImages(spec)).WithProposePlatforms(specPlatforms(spec)).WithProposeNoBytecode(specNoBytecode(spec)), spec)
	}
	return refusal.New(refusal.PinUnapproved, "provider %s was retired at revision %d (%s): it runs again once proposed again and approved; the change-set of the pin it retired (%s, in the registry's history) is not in the registry, so the proposal names the provider's wheel (NAME==VERSION and its sha256), platforms and interpreter", provider, p.Revision, when, orNone(base)).WithRemedy(refusal.ActionPropose, provider)
}

// RetiredChangeSet is, for a retired pin p, the approved change-set of
// the pin its retirement replaced (retiredChangeSet): what `provider
// show` names beside "retired". Nil for a pin not retired, or where the
// registry does not hold that change-set so.
func RetiredChangeSet(ctx context.Context, reg Reader, p *Pin) *ChangeSet {
	if p == nil || !p.Retired {
		return nil
	}
	return retiredChangeSet(ctx, reg, p.Provider, p.Spec.Base)
}

// retiredChangeSet is the approved change-set of provider's pin that a
// retirement whose spec base is base replaced: a register or update of
// provider's package whose spec digest is base (the retirement's
// approvals signed it). Nil where the registry does not hold it so: read
// on a refusal's path only.
func retiredChangeSet(ctx context.Context, reg Reader, provider string, base digest.Digest) *ChangeSet {
	if base.IsZero() {
		return nil
	}
	cs, err := reg.ChangeSet(ctx, base)
	if err != nil || cs == nil || cs.Metadata.ID != base || cs.Status.State != StateApproved || cs.Scope() != provider || len(cs.Spec.Changes) != 1 {
		return nil
	}
	if c := cs.Spec.Changes[0]; (c.Action != ActionRegister && c.Action != ActionUpdate) || c.Provider == nil || c.Provider.Package == nil {
		return nil
	}
	if d, err := SpecDigest(&cs.Spec); err != nil || d != base {
		return nil
	}
	return cs
}

// CheckedPin is a provider's pin as the history accepted it, for what
// shows it (`provider show`): Reader.Pin, then checked against the
// history's last pin entry of the provider and the approvals it recorded
// (matchHistory, matchRecorded), with no signature checked nor floor
// read (VerifyPin does those). A pin put back, edited, or lost is
// refused as VerifyPin refuses it.
func CheckedPin(ctx context.Context, reg Reader, provider string) (*Pin, error) {
	release, err := readLock(ctx, reg)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := checkProviderName(provider); err != nil {
		return nil, err
	}
	rec, err := reg.PinHistory(ctx, provider)
	if err != nil {
		return nil, err
	}
	p, err := reg.Pin(ctx, provider)
	if refusal.CodeOf(err) == refusal.PinUnapproved && rec.Last != nil {
		return nil, lostPinFrom(ctx, reg, provider, rec.Last)
	}
	if err != nil {
		return nil, err
	}
	if err := matchHistory(p, rec.Last); err != nil {
		return nil, err
	}
	if err := matchRecorded(p, rec.Last, rec.Approved); err != nil {
		return nil, err
	}
	return p, nil
}

// CheckedPins is Reader.Pins with each pin checked as CheckedPin checks
// it (`provider list`), against one read of the history; a pin file the
// history accepted, lost, is refused too.
func CheckedPins(ctx context.Context, reg Reader) ([]*Pin, error) {
	release, err := readLock(ctx, reg)
	if err != nil {
		return nil, err
	}
	defer release()
	log, err := reg.Log(ctx)
	if err != nil {
		return nil, err
	}
	pins, err := reg.Pins(ctx)
	if err != nil {
		return nil, err
	}
	last := map[string]*Entry{}
	for i := range log {
		if e := &log[i]; e.Event == EventPinAccepted || e.Event == EventPinRetired {
			last[e.Subject] = e
		}
	}
	for _, p := range pins {
		if err := matchHistory(p, last[p.Provider]); err != nil {
			return nil, err
		}
		if err := matchRecorded(p, last[p.Provider], approvedSince(log, p.SpecDigest)); err != nil {
			return nil, err
		}
		delete(last, p.Provider)
	}
	if len(last) > 0 {
		name := slices.Min(slices.Collect(maps.Keys(last)))
		return nil, lostPinFrom(ctx, reg, name, last[name])
	}
	return pins, nil
}

// matchChangeSetRecord checks what a change-set file says that neither
// its id nor a signature covers against the history log: its proposedAt
// is the time of its last changeset-proposed entry, and its approvals
// are the ones recorded since (matchApprovals: each key's name and time,
// none added, none missing). `changeset show` printed a file edited so
// as it was edited (an approval under another name, dated back).
func matchChangeSetRecord(cs *ChangeSet, log []Entry) error {
	id := cs.Metadata.ID
	bad := func(format string, a ...any) error {
		return refusal.New(refusal.RegistryCorrupt, "changesets/%s.yaml: %s: this registry did not write it; restore the file from a copy of the registry, or reject the change-set and propose it again", id.Hex(), fmt.Sprintf(format, a...))
	}
	var proposed *Entry
	pi := -1
	for i := range log {
		if e := &log[i]; e.Digest == id && e.Event == EventChangeSetProposed {
			proposed, pi = e, i
		}
	}
	if proposed == nil {
		return bad("the history never proposed change-set %s", id)
	}
	if at := proposed.At.UTC().Truncate(time.Second); !cs.Metadata.ProposedAt.Equal(at) {
		return bad("it says it was proposed at %s; the history proposed it at %s (entry %d)", cs.Metadata.ProposedAt.UTC().Format(time.RFC3339), at.Format(time.RFC3339), proposed.Seq)
	}
	if state, e := stateSince(log, pi); cs.Status.State != state {
		return bad("it says it is %s; the history %s (entry %d)", cs.Status.State, map[string]string{StateProposed: "proposed it last", StateRejected: "rejected it since its last proposal", StateApproved: "accepted it since its last proposal"}[state], e.Seq)
	}
	return matchApprovals(cs.Status.Approvals, approvedSince(log, id), bad)
}

// stateSince is the state the history gives the change-set that log[pi]
// (its last changeset-proposed entry) proposed, and the entry that made
// it so: rejected by a changeset-rejected entry since, approved by its
// acceptance (a pin entry naming it, or the governance entry an approval
// of a trust change appends right after its changeset-approved entry),
// else proposed. The file's state is not covered by its id nor by a
// signature: a rejected change-set edited back to proposed was approved
// as if open, its approvals the rejection withdrew counting again (the
// history then said proposed, approved, rejected, approved, accepted,
// and `registry log --verify` passed it).
func stateSince(log []Entry, pi int) (string, *Entry) {
	id, state, at := log[pi].Digest, StateProposed, &log[pi]
	for i := pi + 1; i < len(log); i++ {
		e := &log[i]
		switch {
		case e.Digest == id && e.Event == EventChangeSetRejected:
			state, at = StateRejected, e
		case e.Digest == id && (e.Event == EventPinAccepted || e.Event == EventPinRetired):
			state, at = StateApproved, e
		case e.Digest == id && e.Event == EventChangeSetApproved && i+1 < len(log) && isGovernance(&log[i+1]) && !log[i+1].isRoot():
			state, at = StateApproved, &log[i+1]
		}
	}
	return state, at
}

// CheckedChangeSet is Reader.ChangeSet checked against the history
// (matchChangeSetRecord), for what shows it (`changeset show`, `diff`).
func CheckedChangeSet(ctx context.Context, reg Reader, id digest.Digest) (*ChangeSet, error) {
	release, err := readLock(ctx, reg)
	if err != nil {
		return nil, err
	}
	defer release()
	cs, err := reg.ChangeSet(ctx, id)
	if err != nil {
		return nil, err
	}
	log, err := reg.Log(ctx)
	if err != nil {
		return nil, err
	}
	if err := matchChangeSetRecord(cs, log); err != nil {
		return nil, err
	}
	return cs, nil
}

// CheckedChangeSets is Reader.ChangeSets, each checked as
// CheckedChangeSet checks it (`changeset list`), against one read of the
// history.
func CheckedChangeSets(ctx context.Context, reg Reader) ([]*ChangeSet, error) {
	release, err := readLock(ctx, reg)
	if err != nil {
		return nil, err
	}
	defer release()
	l, err := reg.ChangeSets(ctx)
	if err != nil {
		return nil, err
	}
	log, err := reg.Log(ctx)
	if err != nil {
		return nil, err
	}
	for _, cs := range l {
		if err := matchChangeSetRecord(cs, log); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// notRunnable is the cause of VerifyPin's refusals of a pin that is in a
// state, not broken: its approvals expired, short of a threshold raised
// since, or by a key untrusted since. Its text is empty (the refusal's
// detail says it); NotRunnable tells them from the rest.
type notRunnable struct{}

func (notRunnable) Error() string { return "" }

// NotRunnable reports whether err, from VerifyPin, refuses a pin for
// what happened to it since it was accepted — an approval expired
// (pin_expired), a threshold raised (pin_unapproved), an approver key
// untrusted (signer_untrusted) — rather than for a break of the history,
// the trust state or the pin (`registry log --verify` lists the first
// as not runnable and fails on the rest).
func NotRunnable(err error) bool {
	return errors.As(err, new(notRunnable))
}

// untrustedSince is the history's key-untrusted entry of the key whose
// digest is signer (the last), or nil when the history never untrusted
// it.
func untrustedSince(log []Entry, signer digest.Digest) *Entry {
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].Event == EventKeyUntrusted && log[i].Digest == signer {
			return &log[i]
		}
	}
	return nil
}

// readLocker is a Reader whose reads can be made one snapshot (Dir).
type readLocker interface {
	ReadLock(ctx context.Context) (release func(), err error)
}

// isNilReader reports whether reg is nil, or a nil *Dir or *Stub in
// the interface, whose methods would dereference it.
func isNilReader(reg Reader) bool {
	switch r := reg.(type) {
	case nil:
		return true
	case *Dir:
		return r == nil
	case *Stub:
		return r == nil
	}
	return false
}

// readLock takes reg's shared lock when it has one (a Dir), so that what
// is read under it is one state of the registry; release does nothing
// for a Reader without one.
func readLock(ctx context.Context, reg Reader) (release func(), err error) {
	if l, ok := reg.(readLocker); ok {
		return l.ReadLock(ctx)
	}
	return func() {}, nil
}

// lostPinFrom is lostPin with what brings the pin file back, as a
// mutation says it: repair while reg holds the change-set the history
// accepted, else a copy of the registry.
func lostPinFrom(ctx context.Context, reg Reader, provider string, last *Entry) error {
	return behindHistory(lostPin(provider, last), provider, last, restorableFrom(ctx, reg, provider, last), "")
}

// restorableFrom reports whether reg holds the change-set the history's
// pin entry last names, from which repair writes provider's pin file
// again: read only on a refusal's path.
func restorableFrom(ctx context.Context, reg Reader, provider string, last *Entry) bool {
	cs, err := reg.ChangeSet(ctx, last.Digest)
	return err == nil && restores(cs, provider, last)
}

// matchHistory checks that p is the pin the history accepted (or
// retired) last for its provider. A pin below that revision is an older,
// validly signed pin file put back: pin_rollback, even for a verifier
// without a floor (its first run, or a provider it never verified) and
// for a provider retired since. Any other difference is a pin file no
// approval wrote: registry_corrupt.
func matchHistory(p *Pin, last *Entry) error {
	if last == nil {
		return refusal.New(refusal.RegistryCorrupt, "provider %s has a pin file (revision %d) but the registry's history never accepted a pin of it: propose it again and approve it", p.Provider, p.Revision)
	}
	if p.Revision < last.Revision {
		return refusal.New(refusal.PinRollback, "provider %s pin is at revision %d; the registry's history %s revision %d (entry %d): an older pin file was put back", p.Provider, p.Revision, strings.TrimPrefix(last.Event, "pin-"), last.Revision, last.Seq)
	}
	if p.Revision != last.Revision || p.SpecDigest != last.Digest || p.Retired != (last.Event == EventPinRetired) {
		return refusal.New(refusal.RegistryCorrupt, "provider %s pin (revision %d, spec %s) is not the one the registry's history %s last (revision %d, spec %s, entry %d): propose it again and approve it", p.Provider, p.Revision, p.SpecDigest, strings.TrimPrefix(last.Event, "pin-"), last.Revision, last.Digest, last.Seq)
	}
	return nil
}

// unsignedPin is the refusal of provider's pin p whose spec, revision or
// name is not what its approvals signed (sd: its spec's digest, or err
// where the spec does not encode): it names what differs, and what to
// do. It said "its spec, revision or name is not what was signed (spec
// digest X, recorded X)", the same digest twice for a revision edited,
// and nothing of what to do next.
func unsignedPin(provider string, p *Pin, sd digest.Digest, err error) error {
	var what string
	switch {
	case err != nil:
		what = fmt.Sprintf("its spec does not encode (%v)", err)
	case sd != p.SpecDigest:
		what = fmt.Sprintf("its spec hashes to %s, not to the spec digest %s it records and its approvals signed", sd, p.SpecDigest)
	case p.Revision != p.Spec.Revision:
		what = revisionEdited(p)
	default:
		what = fmt.Sprintf("it names provider %q, its signed spec provider %q", p.Provider, p.Spec.scope())
	}
	return refusal.New(refusal.SignatureInvalid, "provider %s pin: %s: pins/%s.json was changed after it was approved; treat it as tampering: "+
		"the registry's owner restores the registry from a trusted copy, or proposes the provider again and approves it (docs/refusals.md, signature_invalid)", provider, what, provider)
}

// revisionEdited says how pin p's revision differs from its signed
// spec's, which its approvals cover.
func revisionEdited(p *Pin) string {
	return fmt.Sprintf("it says revision %d, its signed spec revision %d", p.Revision, p.Spec.Revision)
}

// matchRecorded checks what a pin says that no signature covers against
// what the history recorded when it was accepted: its acceptedAt is the
// time of the history's pin entry last, and its approvals are the ones
// approved (the changeset-approved entries of its change-set since its
// last proposal), each by the key whose digest the entry names, under
// the entry's name, at its time. A signature covers an approval's
// signer, revision and expiry, not the name and time that `provider
// show` and `verify --json` print: an edited one was shown as it was
// edited. registry_corrupt, advising `registry repair` (which writes the
// pin again from its change-set, as accepted).
func matchRecorded(p *Pin, last *Entry, approved []Entry) error {
	bad := func(format string, a ...any) error {
		return refusal.New(refusal.RegistryCorrupt, "provider %s pin (revision %d): %s: the pin file was edited", p.Provider, p.Revision, fmt.Sprintf(format, a...)).WithRemedy(refusal.ActionRepairRegistry, "")
	}
	if at := last.At.UTC().Truncate(time.Second); !p.AcceptedAt.Equal(at) {
		return bad("it says it was accepted at %s; the history %s it at %s (entry %d)", p.AcceptedAt.UTC().Format(time.RFC3339), strings.TrimPrefix(last.Event, "pin-"), at.Format(time.RFC3339), last.Seq)
	}
	return matchApprovals(p.Approvals, approved, bad)
}

// matchApprovals checks approvals against the changeset-approved entries
// recorded for them (matchRecorded): one approval per key, each the
// key's last recorded one (its name and time), and none missing.
func matchApprovals(aps []Approval, approved []Entry, bad func(string, ...any) error) error {
	rec := map[digest.Digest]*Entry{}
	for i := range approved {
		e := &approved[i]
		d, _ := strings.CutPrefix(e.Detail, "signature by ")
		d, _, _ = strings.Cut(d, " ")
		if dg, err := digest.Parse(d); err == nil {
			rec[dg] = e
		}
	}
	seen := map[digest.Digest]bool{}
	for _, a := range aps {
		e := rec[a.Signer]
		switch {
		case seen[a.Signer]:
			return bad("it holds two approvals by key %s", a.Signer)
		case e == nil:
			return bad("it holds an approval by %s (%s) that the history never recorded", a.Name, a.Signer)
		case a.Name != e.Subject || !a.At.Equal(e.At.UTC().Truncate(time.Second)):
			return bad("its approval by key %s says %q at %s; the history recorded %q at %s (entry %d)", a.Signer, a.Name, a.At.UTC().Format(time.RFC3339), e.Subject, e.At.UTC().Truncate(time.Second).Format(time.RFC3339), e.Seq)
		}
		seen[a.Signer] = true
	}
	if len(seen) != len(rec) {
		for d, e := range rec {
			if !seen[d] {
				return bad("the history recorded an approval by %s (%s, entry %d) that it does not hold", e.Subject, d, e.Seq)
			}
		}
	}
	return nil
}

// replayTrust rebuilds the trust state from its root and its governance
// steps and checks it is t: the root must be the one the history's
// root-of-trust entry names, each step must follow the previous state
// and carry the approvals of the threshold in force before it.
func replayTrust(t *Trust, id digest.Digest, log []Entry) error {
	return replayTrustWith(t, id, log, false)
}

// replayTrustWith is replayTrust, where v1ok counts a step's approvals
// in the v1 form (v1Form) as well; without it, a step that only they
// would carry is refused saying which change-set to approve again, and
// with which keys.
func replayTrustWith(t *Trust, id digest.Digest, log []Entry, v1ok bool) error {
	var root *Entry
	for i := range log {
		if log[i].isRoot() {
			root = &log[i]
			break
		}
	}
	if root == nil || root.Digest != t.Root.Digest || root.Subject != t.Root.Name {
		return refusal.New(refusal.RegistryCorrupt, "the trust state's root key %s (%s) is not the root of trust the history records", t.Root.Name, t.Root.Digest)
	}
	rk, err := parseKey(t.Root)
	if err != nil || rk.Role != RoleApprover {
		return refusal.New(refusal.RegistryCorrupt, "the root of trust is not a valid approver key")
	}
	// Every governance step the history records after the root (a key
	// trusted or untrusted, the policy changed) must be a step of the
	// trust document, in order: a document put back from before a step
	// (a key untrusted since, trusted again) replays cleanly by itself.
	var steps []*Entry
	for i := range log {
		switch e := &log[i]; {
		case e == root:
		case e.Event == EventKeyTrusted, e.Event == EventKeyUntrusted, e.Event == EventPolicyChanged:
			steps = append(steps, e)
		}
	}
	if len(steps) != len(t.History) || t.Revision != int64(len(t.History)) {
		return refusal.New(refusal.RegistryCorrupt, "the trust state is at revision %d with %d governance steps; the history records %d: a trust document from before (or after) the history was put back", t.Revision, len(t.History), len(steps))
	}
	cur := &Trust{Root: rk, Keys: []Key{rk}, Policy: Policy{Threshold: 1}}
	for i, st := range t.History {
		sd, err := SpecDigest(&st.Spec)
		if err != nil || sd != st.SpecDigest || len(st.Spec.Changes) != 1 || st.Spec.scope() != TrustScope {
			return refusal.New(refusal.SignatureInvalid, "governance step %d is not what was signed", i+1)
		}
		if st.Spec.Base != trustStateDigest(cur) || st.Spec.Revision != cur.Revision+1 {
			return refusal.New(refusal.RegistryCorrupt, "governance step %d does not follow the trust state before it", i+1)
		}
		n, _, why := countApprovals(cur, id, sd, TrustScope, st.Spec.Revision, st.Approvals, time.Time{})
		if n < cur.Policy.Threshold {
			v1 := v1Signers(cur, id, sd, TrustScope, st.Spec.Revision, st.Approvals)
			if n+len(v1) < cur.Policy.Threshold {
				v1 = nil
			}
			if len(v1) > 0 && !v1ok {
				// Given by a cruxprov before the v2 payload: what the
				// step needs is its approvers' approvals again, not a
				// trust.json from a copy (every copy holds the same).
				var names []string
				for _, k := range v1 {
					names = append(names, k.Name)
				}
				return refusal.New(refusal.SignatureInvalid, "governance step %d (%s, change-set %s) was approved in the v1 form, which does not name its registry (an approval from another registry trusting the same key would count): approve that change-set again with the key of %s, which replaces it (the steps in order, then the pins)", i+1, st.Spec.Changes[0].Action, sd, strings.Join(names, ", ")).WithRemedy(refusal.ActionRenewApproval, sd.String())
			}
			if len(v1) > 0 {
				n = cur.Policy.Threshold
			}
		}
		if n < cur.Policy.Threshold {
			if why == nil {
				why = refusal.New(refusal.PinUnapproved, "%d of %d approvals", n, cur.Policy.Threshold)
			}
			return refusal.Wrap(refusal.CodeOf(why), why, "governance step %d (%s) lacks the threshold's approvals", i+1, st.Spec.Changes[0].Action)
		}
		c := st.Spec.Changes[0]
		if cur, err = applyTrust(cur, &c); err != nil {
			return refusal.Wrap(refusal.RegistryCorrupt, err, "governance step %d", i+1)
		}
		if e := steps[i]; e.Revision != cur.Revision || !stepEntry(e, &c, cur) {
			return refusal.New(refusal.RegistryCorrupt, "governance step %d (%s) is not the one the history records at entry %d (%s %s, revision %d)", i+1, c.Action, e.Seq, e.Event, e.Subject, e.Revision)
		}
	}
	if trustStateDigest(cur) != trustStateDigest(t) {
		return refusal.New(refusal.RegistryCorrupt, "the trust state's keys or policy are not what its approved steps make (%s)", trustDiff(cur, t))
	}
	return nil
}

// trustDiff says how the trust state t differs from made, the state its
// approved steps make: the keys one has and the other not, and the
// threshold.
func trustDiff(made, t *Trust) string {
	var out []string
	has := func(ks []Key, k Key) bool {
		return slices.ContainsFunc(ks, func(x Key) bool { return x.Name == k.Name && x.Role == k.Role && x.Digest == k.Digest })
	}
	for _, k := range t.Keys {
		if !has(made.Keys, k) {
			out = append(out, fmt.Sprintf("it trusts %s (%s, %s), which they do not", k.Name, k.Role, k.Digest))
		}
	}
	for _, k := range made.Keys {
		if !has(t.Keys, k) {
			out = append(out, fmt.Sprintf("they trust %s (%s, %s), which it does not", k.Name, k.Role, k.Digest))
		}
	}
	if made.Policy.Threshold != t.Policy.Threshold {
		out = append(out, fmt.Sprintf("its threshold is %d; they make %d", t.Policy.Threshold, made.Policy.Threshold))
	}
	if len(out) == 0 {
		out = append(out, fmt.Sprintf("its revision is %d; they make %d", t.Revision, made.Revision))
	}
	return strings.Join(out, "; ")
}

// restoreTrust gives a refusal of the trust document's replay
// (replayTrust), against the history's governance entries gov, its way
// on: the history is what was approved, so trust.json is restored from a
// copy taken after its last governance entry. note is said before it (a
// mutation's "; no change is made on it"). The readers (verify, key list,
// policy show, registry log --verify) said only what was wrong.
func restoreTrust(err error, gov []Entry, note string) error {
	var r *refusal.Error
	if !errors.As(err, &r) || len(gov) == 0 {
		return err
	}
	if r.Remedy != nil && r.Remedy.Action == refusal.ActionRenewApproval {
		// A step approved in the v1 form: every copy holds the same
		// approvals; its approvers approve it again.
		return err
	}
	return refusal.New(r.Code, "trust.json: %s%s: restore trust.json from a copy of the registry taken after entry %d", r.Detail, note, gov[len(gov)-1].Seq)
}

// stepEntry reports whether history entry e is the one recorded when
// change c made the trust state t.
func stepEntry(e *Entry, c *Change, t *Trust) bool {
	switch c.Action {
	case ActionTrustKey:
		k, err := parseKey(*c.Key)
		return err == nil && e.Event == EventKeyTrusted && e.Subject == k.Name && e.Digest == k.Digest
	case ActionUntrustKey:
		return e.Event == EventKeyUntrusted && e.Subject == c.Key.Name && e.Digest == c.Key.Digest
	case ActionSetPolicy:
		return e.Event == EventPolicyChanged && c.Policy != nil && e.Detail == fmt.Sprintf("threshold %d", c.Policy.Threshold) && t.Policy.Threshold == c.Policy.Threshold
	}
	return false
}

// VerifyTrust replays the trust state from the root of trust the history
// names (as VerifyPin does, without a floor): each governance step
// approved at the threshold then in force and recorded in the history,
// and the keys and policy what those steps make (registry_corrupt,
// signature_invalid, signer_untrusted). A registry that trusts no key
// yet passes, unless its history trusted one.
func VerifyTrust(ctx context.Context, reg Reader) error {
	_, err := CheckedTrust(ctx, reg)
	return err
}

// CheckedTrust is Reader.Trust replayed as VerifyTrust replays it, for
// what shows it (`key list`, `policy show`): a trust.json edited by hand
// (a key added, the threshold lowered) was listed as trusted.
func CheckedTrust(ctx context.Context, reg Reader) (*Trust, error) {
	release, err := readLock(ctx, reg)
	if err != nil {
		return nil, err
	}
	defer release()
	t, err := reg.Trust(ctx)
	if err != nil {
		return nil, err
	}
	log, err := reg.Log(ctx)
	if err != nil {
		return nil, err
	}
	if t == nil {
		for _, e := range log {
			if e.Event == EventKeyTrusted {
				return nil, refusal.New(refusal.RegistryCorrupt, "the history trusts key %s (entry %d) but the registry has no trust state", e.Subject, e.Seq)
			}
		}
		return nil, nil
	}
	if len(log) == 0 {
		return nil, refusal.New(refusal.RegistryCorrupt, "the registry has a trust state but no history")
	}
	gov := governanceOf(log)
	if err := replayTrust(t, log[0].Hash, gov); err != nil {
		return nil, restoreTrust(err, gov, "")
	}
	return t, nil
}
