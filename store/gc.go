package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/capped"
)

// GCReport says what a collection removed (or, with DryRun, would remove)
// and what it kept.
type GCReport struct {
	DryRun       bool     `json:"dry_run"`
	Removed      []string `json:"removed"` // paths relative to the store root
	RemovedBytes int64    `json:"removed_bytes"`
	KeptBlobs    int      `json:"kept_blobs"`
	KeptBytes    int64    `json:"kept_bytes"`
	// Damaged lists the blobs removed (also in Removed) although a root
	// names them, because their bytes were not those their name says:
	// fetch them again.
	Damaged []string `json:"damaged"`
	// Roots are the files whose references were kept, relative to the root.
	Roots []string `json:"roots"`
}

// GCOptions tune a collection.
type GCOptions struct {
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
	// Keep names more blobs to keep (e.g. what a caller is about to use).
	Keep []digest.Digest
	// Wait makes GC wait for the store lock instead of failing at once
	// when another process holds it.
	Wait bool
	// Prepare, when set, runs once the lock is held and before anything is
	// read: what it decides cannot race a process that holds the store
	// (an install between building its env and proposing it). It may
	// remove envs; its Keep adds to the options', and its Removed come
	// first in the report. An error ends the collection.
	Prepare func(ctx context.Context) (GCPlan, error)
}

// GCPlan is what GCOptions.Prepare decided under the lock.
type GCPlan struct {
	Keep []digest.Digest
	// Removed are paths relative to the store root. An env among them
	// (envs/<hex>) is no root: a dry run, which leaves it there, lists
	// what removing it would free.
	Removed      []string
	RemovedBytes int64 // what the Removed held
}

// ErrBusy is returned by GC when another process holds the store lock.
var ErrBusy = fmt.Errorf("store is in use by another process (it holds the store lock); retry when it is done")

// hexRE finds sha256 references in root files, in any of the forms they
// take ("sha256:<hex>", a bare "<hex>" under a sha256 key).
var hexRE = regexp.MustCompile(`[0-9a-f]{64}`)

// GC removes every blob no root references, and staging debris, holding
// the store lock exclusive (ErrBusy when another process holds it, unless
// opts.Wait), and runs opts.Prepare first under it. The roots are, per
// docs/store.md: every envs/*.seal.json
// (sealed envs) and opts.Keep (what the caller's registry says accepted
// pins and open change-sets name: the store never reads registry files,
// whose history names every proposal ever made); any 64-hex sha256
// written in a seal keeps the blob of that name, unless its bytes are not that name's (checked as Check does): a
// damaged blob is removed and listed in Damaged too. A seal that is not valid JSON stops the collection rather than
// risk removing what it references.
func (s *Store) GC(ctx context.Context, opts GCOptions) (GCReport, error) {
	rep := GCReport{DryRun: opts.DryRun, Removed: []string{}, Damaged: []string{}, Roots: []string{}}
	var unlock Unlock
	if opts.Wait {
		u, err := s.LockExclusive(ctx)
		if err != nil {
			return rep, err
		}
		unlock = u
	} else {
		u, ok, err := s.TryLockExclusive()
		if err != nil {
			return rep, fmt.Errorf("store lock: %w", err)
		}
		if !ok {
			return rep, ErrBusy
		}
		unlock = u
	}
	defer unlock()

	if opts.Prepare != nil {
		plan, err := opts.Prepare(ctx)
		rep.Removed = append(rep.Removed, plan.Removed...)
		rep.RemovedBytes += plan.RemovedBytes
		if err != nil {
			return rep, err
		}
		opts.Keep = append(slices.Clip(opts.Keep), plan.Keep...)
	}
	keep := map[string]bool{}
	for _, d := range opts.Keep {
		keep[d.Hex()] = true
	}
	seals, err := filepath.Glob(filepath.Join(s.home, EnvsDir, "*.seal.json"))
	if err != nil {
		return rep, err
	}
	unrooted := map[string]bool{}
	for _, r := range rep.Removed {
		if dir, name := path.Split(r); dir == EnvsDir+"/" {
			unrooted[name+".seal.json"] = true
		}
	}
	for _, p := range seals {
		if unrooted[filepath.Base(p)] {
			continue
		}
		b, err := capped.ReadFile(p, 1<<30) // a FIFO there must not hang gc
		if err != nil {
			return rep, fmt.Errorf("gc: read seal %s: %w; remove it (it was not a seal), or let this user read it, then run gc again", p, err)
		}
		if !json.Valid(b) {
			return rep, fmt.Errorf("gc: seal %s is not valid JSON; fix or remove it, then run gc again", p)
		}
		addRefs(keep, b)
		rep.Roots = append(rep.Roots, rel(s.home, p))
	}
	blobs := filepath.Join(s.home, BlobsDir)
	ents, err := os.ReadDir(blobs)
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // none (a store OpenExisting found without it): nothing to collect
		return rep, fmt.Errorf("gc: %w", err)
	}
	gone := map[string]bool{}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		name := e.Name()
		if strings.HasPrefix(name, tempPrefix) {
			continue // clean() decides by the temp's lock
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if keep[name] && isHexName(name) {
			// A kept blob must still be what its name says: one whose
			// stat changed since it was last hashed is hashed again.
			d, _ := digest.ParseHex(name)
			f, _, err := s.open(d, !opts.DryRun)
			var de *DamagedError
			switch {
			case err == nil:
				f.Close()
				rep.KeptBlobs++
				rep.KeptBytes += fi.Size()
				continue
			case !errors.As(err, &de):
				return rep, fmt.Errorf("gc: %w", err)
			case !opts.DryRun && de.RemoveErr != nil:
				// Said what to do: it said only what failed.
				return rep, fmt.Errorf("gc: %w; remove it as the store's owner, then run gc again and fetch its wheel again", de)
			}
			p := filepath.ToSlash(filepath.Join(BlobsDir, name))
			rep.Removed = append(rep.Removed, p)
			rep.Damaged = append(rep.Damaged, p)
			rep.RemovedBytes += fi.Size()
			gone[name] = true
			continue
		}
		if keep[name] {
			rep.KeptBlobs++
			rep.KeptBytes += fi.Size()
			continue
		}
		rep.Removed = append(rep.Removed, filepath.ToSlash(filepath.Join(BlobsDir, name)))
		rep.RemovedBytes += fi.Size()
		gone[name] = true
		if !opts.DryRun {
			if err := os.Remove(filepath.Join(blobs, name)); err != nil {
				return rep, fmt.Errorf("gc: %w", err)
			}
		}
	}
	// A blob's stamp and unpacked-cache entry go with it (or when the blob
	// is gone already); the report lists the cache entries, not the stamps.
	for _, sub := range []string{StampsDir, UnpackedDir} {
		ents, err := os.ReadDir(filepath.Join(s.home, sub))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return rep, fmt.Errorf("gc: %w", err)
		}
		for _, e := range ents {
			name := e.Name()
			if !isHexName(name) || keep[name] {
				continue
			}
			if _, err := os.Lstat(filepath.Join(blobs, name)); err == nil && !gone[name] {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			if sub != StampsDir { // a stamp is bookkeeping of its blob, not reported apart
				rep.Removed = append(rep.Removed, filepath.ToSlash(filepath.Join(sub, name)))
				rep.RemovedBytes += fi.Size()
			}
			if !opts.DryRun {
				if err := os.Remove(filepath.Join(s.home, sub, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return rep, fmt.Errorf("gc: %w", err)
				}
			}
		}
	}
	// The image layer cache goes whole: it only saves a rebuild time.
	if ents, err := os.ReadDir(filepath.Join(s.home, ImageLayersDir)); err == nil {
		for _, e := range ents {
			fi, err := e.Info()
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			rep.Removed = append(rep.Removed, filepath.ToSlash(filepath.Join(ImageLayersDir, e.Name())))
			rep.RemovedBytes += fi.Size()
			if !opts.DryRun {
				if err := os.Remove(filepath.Join(s.home, ImageLayersDir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return rep, fmt.Errorf("gc: %w", err)
				}
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return rep, fmt.Errorf("gc: %w", err)
	}
	debris, n, err := s.clean(ctx, opts.DryRun)
	rep.Removed = append(rep.Removed, debris...)
	rep.RemovedBytes += n
	if err == nil {
		debris, n, err = s.cleanEnvs(ctx, opts.DryRun)
		rep.Removed = append(rep.Removed, debris...)
		rep.RemovedBytes += n
	}
	sort.Strings(rep.Removed)
	if err != nil {
		return rep, err
	}
	if !opts.DryRun && len(rep.Removed) > 0 {
		if err := syncDir(blobs); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func addRefs(keep map[string]bool, b []byte) {
	for _, m := range hexRE.FindAll(b, -1) {
		keep[string(m)] = true
	}
}

func rel(home, p string) string {
	r, err := filepath.Rel(home, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// cleanEnvs removes what a process killed while it committed, replaced or
// removed an env left in envs/ (GC holds the store lock exclusive, so no
// create is running): a tree moved aside (".<hex>.old.tmp-*"), a seal's or
// stat index's temp file (".<hex>.seal.json.tmp-*"), and a tree or stat
// index without its seal (no seal, no env: verify refuses it). Each only
// when the env's own lock (envs/.<hex>.lock, held while an env is created,
// replaced or removed) can be taken. The next create of the same digest
// removes that debris too, but an env removed (env remove, gc --envs) is
// seldom created again: without this its debris stayed for ever.
func (s *Store) cleanEnvs(ctx context.Context, dryRun bool) (removed []string, bytes int64, err error) {
	envs := filepath.Join(s.home, EnvsDir)
	ents, err := os.ReadDir(envs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("gc: %w", err)
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name()] = true
	}
	byDigest := map[string][]string{}
	for _, e := range ents {
		n := e.Name()
		var hex string
		switch {
		case strings.HasPrefix(n, ".") && len(n) > 66 && n[65] == '.' && strings.Contains(n[66:], ".tmp-"):
			hex = n[1:65]
		case len(n) == 70 && n[0] == '.' && strings.HasSuffix(n, ".lock"):
			// An env's lock: goes with an env no longer there (below).
			if h := n[1:65]; isHexName(h) {
				if _, ok := byDigest[h]; !ok {
					byDigest[h] = nil
				}
			}
			continue
		case isHexName(n) && e.IsDir(), strings.HasSuffix(n, ".index") && isHexName(strings.TrimSuffix(n, ".index")):
			hex = n[:64]
			if names[hex+".seal.json"] {
				continue
			}
		default:
			continue
		}
		if isHexName(hex) {
			byDigest[hex] = append(byDigest[hex], n)
		}
	}
	hexes := make([]string, 0, len(byDigest))
	for h := range byDigest {
		hexes = append(hexes, h)
	}
	sort.Strings(hexes)
	for _, h := range hexes {
		if err := ctx.Err(); err != nil {
			return removed, bytes, err
		}
		// Not run while another process holds the env's lock: an env
		// being created, replaced or removed, whose owner cleans up.
		lock := filepath.Join(envs, "."+h+".lock")
		_, err := withEnvLock(lock, func() error {
			for _, n := range byDigest[h] {
				bytes += TreeBytes(filepath.Join(envs, n))
				if !dryRun {
					if err := makeWritableAndRemove(filepath.Join(envs, n)); err != nil {
						return fmt.Errorf("gc: %w", err)
					}
				}
				removed = append(removed, filepath.ToSlash(filepath.Join(EnvsDir, n)))
			}
			// No env left of that digest (neither its tree, its seal nor
			// its index): its lock goes too, unlinked while held (every
			// locker checks the path still names the file it locked).
			// Env remove unlinks it; a removal killed before, or an older
			// cruxprov's, left it.
			if !dryRun && gone(filepath.Join(envs, h), filepath.Join(envs, h+".seal.json"), filepath.Join(envs, h+".index")) {
				if err := os.Remove(lock); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("gc: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return removed, bytes, err
		}
	}
	if !dryRun && len(removed) > 0 {
		if err := syncDir(envs); err != nil {
			return removed, bytes, err
		}
	}
	return removed, bytes, nil
}

// gone reports whether none of paths exists.
func gone(paths ...string) bool {
	for _, p := range paths {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	return true
}

// withEnvLock runs fn holding the env lock at path (flock, not waiting),
// and reports whether it ran: not when another process holds the lock. A
// missing lock file is nobody's.
func withEnvLock(path string, fn func() error) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0) // a FIFO there must not hang gc
	if errors.Is(err, fs.ErrNotExist) {
		return true, fn()
	}
	if err != nil {
		return false, nil
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false, nil
	}
	// Held on the file the path still names: a removal unlinks the lock
	// of the env it removed, and a create may have made a new one since
	// this process opened the old.
	held, herr := f.Stat()
	if now, err := os.Lstat(path); herr != nil || err != nil || !os.SameFile(held, now) {
		return false, nil
	}
	return true, fn()
}
