package seal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/treehash"
)

// Options select how Verify checks an env.
type Options struct {
	// Deep rehashes every file (and the interpreter) in parallel and
	// recomputes the tree digest, instead of trusting unchanged stats.
	Deep bool
	// Explain collects every difference instead of stopping at the first.
	Explain bool
	// Jobs bounds the parallel hashing (< 1: GOMAXPROCS) and the threads
	// of the fast stat pass (< 1: GOMAXPROCS, at most 4).
	Jobs int
	// Locked says the caller holds the env's lock (envs/.<hex>.lock):
	// a verify that fails does not wait for the lock's holder, itself,
	// and verify again.
	Locked bool
}

// Change is what differs about one path.
type Change string

// The changes Verify reports.
const (
	Added      Change = "added"       // an entry the seal does not list
	Removed    Change = "removed"     // a sealed entry that is gone
	Content    Change = "content"     // a file's bytes differ
	Mode       Change = "mode"        // permission bits differ
	Kind       Change = "kind"        // e.g. a file replaced by a symlink
	LinkTarget Change = "link_target" // a symlink points elsewhere
	TreeDigest Change = "tree_digest" // the recomputed tree digest differs (deep)
	Location   Change = "location"    // not where it was sealed (env.location): copied or moved
	Identity   Change = "identity"    // the interpreter or libpython changed
	// Unreadable: this user may not read the interpreter or its libpython
	// (permission denied), so it could not be checked; it is not known to
	// have changed.
	Unreadable Change = "unreadable"
)

// Difference is one thing that differs from the seal.
type Difference struct {
	Code   refusal.Code `json:"code"`   // env_drift or interpreter_drift
	Path   string       `json:"path"`   // relative to the env root, or the interpreter's path
	Change Change       `json:"change"` // what changed
	Want   string       `json:"want,omitempty"`
	Got    string       `json:"got,omitempty"`
}

func (d Difference) String() string {
	if d.Change == Unreadable {
		return fmt.Sprintf("%s: cannot read it: %s", d.Path, d.Got)
	}
	if d.Change == Location {
		return fmt.Sprintf("sealed at %s, not here: its scripts' shebangs and pyvenv.cfg name that path", d.Want)
	}
	s := fmt.Sprintf("%s: %s", d.Path, d.Change)
	if d.Want != "" || d.Got != "" {
		s += fmt.Sprintf(" (sealed %s, now %s)", orNone(d.Want), orNone(d.Got))
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// Report is the outcome of Verify, filled in as far as verification got
// even when it failed; Err derives the refusal from it.
type Report struct {
	Env         string        `json:"env"`
	Digest      digest.Digest `json:"materialization_digest"`
	TreeDigest  digest.Digest `json:"tree_digest"`
	Deep        bool          `json:"deep"`
	Entries     int           `json:"entries"`  // entries examined on disk
	Rehashed    int           `json:"rehashed"` // files and links whose content was read
	Differences []Difference  `json:"differences"`
	// ContentDigest is the seal content digest (DESIGN §9, ContentDigest),
	// set once the seal has loaded.
	ContentDigest digest.Digest `json:"seal_content_digest"`
	Seal          *Seal         `json:"-"`
	fatal         error
}

// Err returns nil when the env matches its seal, the refusal that stopped
// verification (seal_missing, seal_invalid), or the refusal for the first
// difference (interpreter_drift, interpreter_unverifiable or env_drift)
// naming the path, what changed and how many more differences there are. An
// interpreter this user cannot read (Unreadable) is interpreter_unverifiable
// with a detail saying so and to verify as a user who can read it, never
// "removed".
func (r *Report) Err() error {
	if r.fatal != nil {
		return r.fatal
	}
	if len(r.Differences) == 0 {
		return nil
	}
	d := r.Differences[0]
	more := ""
	if n := len(r.Differences) - 1 - r.treeDigestOnTop(); n > 0 {
		more = fmt.Sprintf(" (and %d more difference(s))", n)
	}
	if d.Code != refusal.InterpreterUnverifiable && r.Seal != nil && !r.Seal.RebuildsAlone() {
		// The rebuild from this seal is refused (it names no root wheel
		// file): advise the one from the inputs it names.
		return r.Seal.RebuildRemedy(refusal.New(d.Code, "%s: %s%s; find out who changed it, then %s", r.Env, d, more, r.Seal.rebuildFromInputs()), r.Env)
	}
	return withRemedy(refusal.New(d.Code, "%s: %s%s; %s", r.Env, d, more, nextStep(d)), d, r.Env)
}

// withRemedy attaches the typed remedy for d: a drifted env or
// interpreter is rebuilt under its digest (never repaired in place, DESIGN
// §6); an unreadable interpreter has no command that fixes it.
func withRemedy(e *refusal.Error, d Difference, env string) *refusal.Error {
	if d.Code == refusal.InterpreterUnverifiable {
		return e
	}
	return e.WithRemedy(refusal.ActionReplaceEnv, env)
}

// Explained is Err with every difference in the detail instead of the
// first: "ENV: N differences: D1; D2; …; " and the next step of each kind
// of difference found (each once). It is nil when Err is, and Err when
// verification stopped before comparing (seal_missing, seal_invalid) or
// found one difference.
func (r *Report) Explained() error {
	if r.fatal != nil || len(r.Differences)-r.treeDigestOnTop() < 2 {
		return r.Err()
	}
	// The code, the remedy and the first next step are the first
	// difference's, as Err's (the check that found it first decides);
	// the differences are listed sorted by path, as verify --explain's
	// drift lines are (they were in report order: a file's mode before
	// its content, where the drift lines say content first).
	var next []string
	for _, d := range r.Differences {
		if n := nextStep(d); d.Change != TreeDigest && !slices.Contains(next, n) {
			next = append(next, n)
		}
	}
	var ds []string
	for _, d := range SortDifferences(r.Differences) {
		if d.Change == TreeDigest {
			continue // it differs because of the others: not one more
		}
		ds = append(ds, d.String())
	}
	return withRemedy(refusal.New(r.Differences[0].Code, "%s: %d differences: %s; %s", r.Env, len(ds), strings.Join(ds, "; "), strings.Join(next, "; ")), r.Differences[0], r.Env)
}

// SortDifferences returns a copy of ds sorted by path, then change: the
// order verify --explain lists them in, whatever order the checks found
// them in.
func SortDifferences(ds []Difference) []Difference {
	out := slices.Clone(ds)
	slices.SortStableFunc(out, func(a, b Difference) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(string(a.Change), string(b.Change))
	})
	return out
}

// treeDigestOnTop is 1 when the differences include the tree digest's
// besides others (it differs because of them: not one more), else 0.
func (r *Report) treeDigestOnTop() int {
	if len(r.Differences) > 1 && slices.ContainsFunc(r.Differences, func(d Difference) bool { return d.Change == TreeDigest }) {
		return 1
	}
	return 0
}

// nextStep says what to do about d.
func nextStep(d Difference) string {
	switch {
	case d.Change == Unreadable:
		return "it could not be checked and is not known to have changed; run verify as a user who can read the interpreter and the env"
	case d.Code == refusal.InterpreterDrift:
		return "the interpreter the env points at changed (updated in place?); rebuild the env on it as it is now, or restore it"
	case d.Change == Location:
		return "an env works only where it was sealed: create it here (replace the env at this path, in the store it is in, from its seal), which builds it for this location, rather than copying it; or use it at " + d.Want
	}
	return "find out who changed it, then rebuild the env under its digest"
}

func (r *Report) add(d Difference, explain bool) bool {
	r.Differences = append(r.Differences, d)
	return !explain
}

// errStop ends a walk early once a difference is found without Explain.
var errStop = errors.New("stop")

// Verify checks the env at dir against its seal (DESIGN §9, local backend)
// and returns the report and its Err(). In order: the seal exists
// (seal_missing), parses, and its recomputed materialization digest equals
// the directory's name; the stat index matches the seal and the seal's tree
// digest (seal_invalid); the interpreter and its libpython are unchanged
// (interpreter_drift: stat first, rehash when the stat changed, always with
// Deep); then the tree. Fast: every indexed entry is lstat'ed once by path
// on a few threads (the index's check runs beside them), only directories
// whose stat changed (and the root) are listed for added entries, and only
// files whose stat changed are rehashed. Deep: one walk of the tree, every
// file rehashed, the tree digest recomputed. Added, removed, content, mode,
// kind and link target changes are env_drift, and so is an env that is not
// where it was sealed (env.location, compared as clean absolute paths,
// then as real paths): a copy elsewhere names its sealed path in its
// scripts and pyvenv.cfg.
//
// Fast mode relies on size, mtime, ctime and inode, of files and of
// directories: an edit that keeps all four is only found by Deep. ctime
// cannot be set from user space, so an edit that restores mtime (touch -r,
// os.Chtimes) is still seen, and so is an entry added to a directory.
func Verify(ctx context.Context, dir string, opts Options) (*Report, error) {
	dir = filepath.Clean(dir)
	r := &Report{Env: dir, Deep: opts.Deep, Differences: []Difference{}}
	r.fatal = r.run(ctx, dir, opts)
	// An env being written (env create --replace between its tree's
	// exchange and its seal's rename, a create sealing it, a removal) is
	// one its writer holds the lock of: wait for the writer, then verify
	// again, rather than refuse a mix of old and new as tampering.
	if r.Err() != nil && ctx.Err() == nil && !opts.Locked && waitForWriter(ctx, r.Env) {
		r = &Report{Env: dir, Deep: opts.Deep, Differences: []Difference{}}
		r.fatal = r.run(ctx, dir, opts)
	}
	// In path order, whichever pass found them (the deep walk meets a
	// directory's files before its subdirectories), with the tree digest,
	// which differs because of the others, last: Err names the first.
	slices.SortStableFunc(r.Differences, func(a, b Difference) int {
		if (a.Change == TreeDigest) != (b.Change == TreeDigest) {
			if a.Change == TreeDigest {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Path, b.Path)
	})
	return r, r.Err()
}

// writerWait bounds how long Verify waits for an env's writer: a create
// that holds the lock longer (hung) does not hold the verify with it.
const writerWait = 5 * time.Minute

// waitForWriter reports whether another process held the lock of the env
// at dir (envs/.<hex>.lock, which env create, --replace and env remove
// hold exclusively while they write it), after waiting until it let go
// (or writerWait passed; false if ctx ended first). A lock file that is
// missing or unreadable, or free, is no writer.
func waitForWriter(ctx context.Context, dir string) bool {
	fd, err := unix.Open(filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".lock"), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(writerWait)
	waited := false
	for {
		err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			_ = unix.Flock(fd, unix.LOCK_UN)
			return waited
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return waited
		}
		waited = true
		if time.Now().After(deadline) {
			return true
		}
		select {
		case <-ctx.Done():
			return false // the refusal stands: no time to see the writer's result
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (r *Report) run(ctx context.Context, dir string, opts Options) error {
	fi, err := os.Lstat(dir)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// A link to an env (one an operator made, say): verify what it
		// points at, and report that path.
		real, rerr := filepath.EvalSymlinks(dir)
		if rerr != nil {
			return refusal.Wrap(refusal.SealMissing, rerr, "%s is a symlink that does not lead to an env", dir)
		}
		dir, r.Env = real, real
		fi, err = os.Lstat(dir)
	}
	if errors.Is(err, fs.ErrPermission) {
		return unreadableRefusal(err, "cannot examine %s", dir)
	}
	if err != nil || !fi.IsDir() {
		if _, serr := os.Lstat(SealPath(dir)); serr == nil {
			return refusal.New(refusal.EnvDrift, "%s: the sealed env directory is missing or not a directory", dir).WithRemedy(refusal.ActionReplaceEnv, dir)
		}
		if err == nil {
			return refusal.New(refusal.SealMissing, "%s is not a sealed env (a file, not a directory, and no seal beside it)", dir)
		}
		return refusal.New(refusal.SealMissing, "%s is not a sealed env (no such directory and no seal)", dir).WithRemedy(refusal.ActionListEnvs, dir)
	}
	s, err := Load(dir)
	if err != nil {
		return err
	}
	r.Seal, r.Digest, r.TreeDigest = s, s.Materialization.Digest, s.Tree.Digest
	if r.ContentDigest, err = ContentDigest(s); err != nil {
		return refusal.Wrap(refusal.SealInvalid, err, "%s: the seal content digest cannot be computed", dir)
	}
	ix, check, release, err := readIndex(dir, s)
	if err != nil {
		return err
	}
	defer release()
	if opts.Deep {
		if err := check(); err != nil {
			return err
		}
	}
	// Copied or moved (cp -a ENV ENV.seal.json ENV.index elsewhere): the
	// tree is intact but names its sealed path, so it does not work here.
	if at, ok := sealedHere(s.Env.Location, dir); !ok {
		if r.add(Difference{Code: refusal.EnvDrift, Path: ".", Change: Location, Want: s.Env.Location, Got: at}, opts.Explain) {
			return r.indexFirst(check(), nil)
		}
	}
	// A difference found with an index that turns out not to be the
	// sealed one means nothing: the index's refusal comes first.
	if stop := r.checkInterpreter(s, opts); stop {
		return r.indexFirst(check(), nil)
	}
	if m := fi.Mode().Perm(); uint32(m) != s.Tree.RootMode&0o777 {
		if r.add(Difference{Code: refusal.EnvDrift, Path: ".", Change: Mode, Want: fmt.Sprintf("%04o", s.Tree.RootMode), Got: fmt.Sprintf("%04o", m)}, opts.Explain) {
			return r.indexFirst(check(), nil)
		}
	}
	if !opts.Deep {
		err := r.checkTreeFast(ctx, dir, ix, check, opts)
		return r.indexFirst(check(), err)
	}
	return r.checkTree(ctx, dir, ix, opts)
}

// sealedHere reports whether dir is the env's sealed location (ok when
// the seal records none: seals before v2.1), and dir as an absolute path.
// The clean absolute paths are compared, then, when they differ, their
// real paths: the same directory reached through a symlink (a home given
// as a link, a link to envs/) is where the env was sealed.
func sealedHere(location, dir string) (string, bool) {
	at, err := filepath.Abs(dir)
	if err != nil {
		at = dir
	}
	if location == "" || filepath.Clean(location) == at {
		return at, true
	}
	a, aerr := filepath.EvalSymlinks(location)
	b, berr := filepath.EvalSymlinks(at)
	return at, aerr == nil && berr == nil && a == b
}

// indexFirst returns the index's refusal, dropping the differences found
// against it, or else err.
func (r *Report) indexFirst(ixErr, err error) error {
	if ixErr != nil {
		r.Differences = []Difference{}
		return ixErr
	}
	return err
}

// readIndex reads and parses the stat index of dir. The file is read
// once into private memory, and those very bytes are both hashed and
// parsed: nothing written to the file later can change what was checked.
// check compares it with the seal (its sha256, entry count, tree digest,
// counts, bytes and the python link) once, however often it is called:
// fast verification runs it beside the stat pass.
func readIndex(dir string, s *Seal) (ix *StatIndex, check func() error, release func(), err error) {
	b, err := ReadFile(StatIndexPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, refusal.New(refusal.SealInvalid, "%s: the stat index %s is missing", dir, filepath.Base(StatIndexPath(dir))).WithRemedy(refusal.ActionReplaceEnv, dir)
	}
	if err != nil {
		return nil, nil, nil, refusal.Wrap(refusal.SealInvalid, err, "%s: cannot read the stat index", dir)
	}
	hashed := func() error {
		if got := digest.Sum(b); got != s.Index.SHA256 {
			why := "tampered?"
			// A replace killed between its stat index's rename and its
			// seal's leaves the new seal's temp file beside the old seal.
			if m, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "."+filepath.Base(SealPath(dir))+".tmp-*")); len(m) > 0 {
				why = "a replacement of it was interrupted before its new seal was renamed into place (" + filepath.Base(m[0]) + " beside it), or it was tampered with"
			}
			return refusal.New(refusal.SealInvalid, "%s: the stat index hashes to %s, the seal states %s (%s)", dir, got, s.Index.SHA256, why).WithRemedy(refusal.ActionReplaceEnv, dir)
		}
		return nil
	}
	if ix, err = ParseStatIndex(b); err != nil {
		if herr := hashed(); herr != nil {
			return nil, nil, nil, herr
		}
		return nil, nil, nil, refusal.Wrap(refusal.SealInvalid, err, "%s: the stat index is unreadable", dir).WithRemedy(refusal.ActionReplaceEnv, dir)
	}
	check = sync.OnceValue(func() error {
		if err := hashed(); err != nil {
			return err
		}
		if len(ix.Entries) != s.Index.Entries || ix.TreeDigest() != s.Tree.Digest {
			return refusal.New(refusal.SealInvalid, "%s: the stat index does not match the seal's tree digest", dir).WithRemedy(refusal.ActionReplaceEnv, dir)
		}
		if err := s.checkTreeCounts(ix); err != nil {
			return refusal.Wrap(refusal.SealInvalid, err, "%s: the seal does not describe the sealed tree (tampered?)", dir).WithRemedy(refusal.ActionReplaceEnv, dir)
		}
		return nil
	})
	return ix, check, func() {}, nil
}

// checkTreeCounts holds the seal's tree counts, bytes and layout to the
// index (whose entries hash to the sealed tree digest): the files, dirs,
// symlinks and bytes it states are those the index lists, env.python is a
// symlink in the tree and env.site_packages a directory.
func (s *Seal) checkTreeCounts(ix *StatIndex) error {
	var t Tree
	kinds := map[string]treehash.Kind{}
	for i := range ix.Entries {
		e := &ix.Entries[i]
		switch e.Kind {
		case treehash.File:
			t.Files++
			t.Bytes += e.Size
		case treehash.Dir:
			t.Dirs++
		case treehash.Symlink:
			t.Symlinks++
		}
		if e.Path == s.Env.Python || e.Path == s.Env.SitePackages {
			kinds[e.Path] = e.Kind
		}
	}
	if t.Files != s.Tree.Files || t.Dirs != s.Tree.Dirs || t.Symlinks != s.Tree.Symlinks || t.Bytes != s.Tree.Bytes {
		return fmt.Errorf("the seal states %d files, %d dirs, %d symlinks, %d bytes; the tree has %d, %d, %d, %d",
			s.Tree.Files, s.Tree.Dirs, s.Tree.Symlinks, s.Tree.Bytes, t.Files, t.Dirs, t.Symlinks, t.Bytes)
	}
	if k, ok := kinds[s.Env.Python]; !ok || k != treehash.Symlink {
		return fmt.Errorf("env.python %q is not a symlink in the sealed tree", s.Env.Python)
	}
	if k, ok := kinds[s.Env.SitePackages]; !ok || k != treehash.Dir {
		return fmt.Errorf("env.site_packages %q is not a directory in the sealed tree", s.Env.SitePackages)
	}
	return nil
}

// ReadFile reads the regular file at path (not following a final
// symlink, at most 1 GiB) into a fresh buffer. A FIFO, a device or a
// directory there is an error at once, never waited on: verify reads an
// env's files with it after the seal's check, when something may have
// been put in their place since.
func ReadFile(path string) ([]byte, error) {
	// O_NONBLOCK: a FIFO at path is refused below, not waited on for ever.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > 1<<30 {
		return nil, fmt.Errorf("%s is not a regular file of at most 1 GiB", path)
	}
	b := make([]byte, 0, st.Size()+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			if len(b) > 1<<30 {
				return nil, fmt.Errorf("%s grew past 1 GiB while it was read", path)
			}
			b = append(b, 0)[:len(b)]
		}
	}
}

// checkInterpreter compares the interpreter and libpython with their
// sealed identities; it reports whether to stop.
func (r *Report) checkInterpreter(s *Seal, opts Options) bool {
	ids := []*FileIdentity{&s.Interpreter.FileIdentity}
	if s.Interpreter.LibPython != nil {
		ids = append(ids, s.Interpreter.LibPython)
	}
	for _, id := range ids {
		if d, ok := checkIdentity(id, opts.Deep); !ok {
			if r.add(d, opts.Explain) {
				return true
			}
		}
	}
	return false
}

func checkIdentity(id *FileIdentity, deep bool) (Difference, bool) {
	d := Difference{Code: refusal.InterpreterDrift, Path: id.Path, Change: Identity}
	var st unix.Stat_t
	if err := unix.Lstat(id.Path, &st); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			d.Code, d.Change, d.Got = refusal.InterpreterUnverifiable, Unreadable, "permission denied"
			return d, false
		}
		d.Change, d.Want, d.Got = Removed, "sha256 "+short(id.SHA256), err.Error()
		return d, false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		d.Change, d.Want, d.Got = Kind, "file", "not a regular file"
		return d, false
	}
	if !deep && st.Size == id.Size && st.Mtim.Nano() == id.MtimeNS && st.Ctim.Nano() == id.CtimeNS && st.Ino == id.Ino {
		return d, true
	}
	sum, size, err := treehash.HashFile(id.Path)
	if errors.Is(err, fs.ErrPermission) {
		d.Code, d.Change, d.Got = refusal.InterpreterUnverifiable, Unreadable, "permission denied"
		return d, false
	}
	if err != nil {
		d.Want, d.Got = "sha256 "+short(id.SHA256), "unreadable: "+err.Error()
		return d, false
	}
	if got := digest.FromBytes(sum[:]); got != id.SHA256 {
		d.Change, d.Want, d.Got = Content, "sha256 "+short(id.SHA256), "sha256 "+short(got)
		return d, false
	}
	if size != id.Size { // the same bytes: the seal's size was edited
		d.Change, d.Want, d.Got = Content, fmt.Sprintf("%d bytes", id.Size), fmt.Sprintf("%d bytes (its sha256 is the sealed one)", size)
		return d, false
	}
	return d, true
}

func short(d digest.Digest) string {
	if h := d.Hex(); len(h) >= 12 {
		return h[:12]
	}
	return d.String()
}

func shortSum(s [32]byte) string { return hex.EncodeToString(s[:6]) }

// checkTree walks the env once against the index.
func (r *Report) checkTree(ctx context.Context, dir string, ix *StatIndex, opts Options) error {
	pos := make(map[string]int32, len(ix.Entries))
	for i := range ix.Entries {
		pos[ix.Entries[i].Path] = int32(i)
	}
	seen := make([]bool, len(ix.Entries))
	var (
		rehash []int // index positions of files to rehash
		onDisk []Entry
	)
	if opts.Deep {
		onDisk = make([]Entry, 0, len(ix.Entries))
	}
	err := scan(ctx, dir, func(rel string, dirfd int, name string, st *unix.Stat_t) error {
		r.Entries++
		i, ok := pos[rel]
		kind, kok := kindOf(st.Mode)
		if !ok || !utf8.ValidString(rel) {
			got := "special file"
			if kok {
				got = kindName(kind)
			}
			if r.add(Difference{Code: refusal.EnvDrift, Path: rel, Change: Added, Got: got}, opts.Explain) {
				return errStop
			}
			if opts.Deep {
				onDisk = append(onDisk, Entry{Path: rel, Kind: 'X'}) // forces a tree digest difference
			}
			return errSkip
		}
		seen[i] = true
		e := &ix.Entries[i]
		if !kok || kind != e.Kind {
			got := "special file"
			if kok {
				got = kindName(kind)
			}
			if r.add(Difference{Code: refusal.EnvDrift, Path: rel, Change: Kind, Want: kindName(e.Kind), Got: got}, opts.Explain) {
				return errStop
			}
			if opts.Deep {
				onDisk = append(onDisk, Entry{Path: rel, Kind: 'X'})
			}
			return errSkip
		}
		now := entryOf(rel, st, kind)
		if now.Mode != e.Mode {
			if r.add(Difference{Code: refusal.EnvDrift, Path: rel, Change: Mode, Want: fmt.Sprintf("%04o", e.Mode), Got: fmt.Sprintf("%04o", now.Mode)}, opts.Explain) {
				return errStop
			}
		}
		same := now.Size == e.Size && now.MtimeNS == e.MtimeNS && now.CtimeNS == e.CtimeNS && now.Ino == e.Ino
		switch kind {
		case treehash.Symlink:
			if !same || opts.Deep {
				r.Rehashed++
				t, err := readlinkAt(dirfd, name)
				if err != nil {
					return &os.PathError{Op: "readlink", Path: rel, Err: err}
				}
				now.SHA256 = sha256.Sum256([]byte(t))
				now.Size = int64(len(t))
				if now.SHA256 != e.SHA256 {
					if r.add(Difference{Code: refusal.EnvDrift, Path: rel, Change: LinkTarget, Want: "target sha256 " + shortSum(e.SHA256), Got: t}, opts.Explain) {
						return errStop
					}
				}
			} else {
				now.SHA256 = e.SHA256
			}
		case treehash.File:
			if !same && now.Size != e.Size {
				if r.add(Difference{Code: refusal.EnvDrift, Path: rel, Change: Content, Want: fmt.Sprintf("%d bytes", e.Size), Got: fmt.Sprintf("%d bytes", now.Size)}, opts.Explain) {
					return errStop
				}
				now.SHA256 = [32]byte{} // the size already differs; the tree digest will too
			} else if !same || opts.Deep {
				rehash = append(rehash, int(i))
			} else {
				now.SHA256 = e.SHA256
			}
		}
		if opts.Deep {
			onDisk = append(onDisk, now)
		}
		return nil
	})
	if err == errStop {
		return nil
	}
	if err != nil {
		return refusal.Wrap(refusal.EnvDrift, err, "%s: cannot walk the env; check it is intact and readable", dir)
	}
	for i, ok := range seen {
		if !ok {
			if r.add(Difference{Code: refusal.EnvDrift, Path: ix.Entries[i].Path, Change: Removed, Want: kindName(ix.Entries[i].Kind)}, opts.Explain) {
				return nil
			}
		}
	}
	if err := r.rehash(ctx, dir, ix, rehash, onDisk, opts); err != nil || (len(r.Differences) > 0 && !opts.Explain) {
		return err
	}
	if opts.Deep {
		te := make([]treehash.Entry, len(onDisk))
		for i := range onDisk {
			te[i] = onDisk[i].TreeEntry()
		}
		if got := treehash.Of(te); got != r.TreeDigest {
			r.add(Difference{Code: refusal.EnvDrift, Path: ".", Change: TreeDigest, Want: r.TreeDigest.String(), Got: got.String()}, opts.Explain)
		}
	}
	return nil
}

// rehash hashes the files at index positions idx in parallel and reports
// content changes; in deep mode it fills their hashes into onDisk.
func (r *Report) rehash(ctx context.Context, dir string, ix *StatIndex, idx []int, onDisk []Entry, opts Options) error {
	if len(idx) == 0 {
		return nil
	}
	paths := make([]string, len(idx))
	for k, i := range idx {
		paths[k] = ix.Entries[i].Path
	}
	sums := make([][32]byte, len(idx))
	sizes := make([]int64, len(idx))
	r.Rehashed += len(idx)
	if err := hashAll(ctx, dir, paths, sums, sizes, opts.Jobs); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return refusal.Wrap(refusal.EnvDrift, err, "%s: cannot read a sealed file; check the env is intact and readable", dir)
	}
	var bySum map[string][32]byte
	if opts.Deep {
		bySum = make(map[string][32]byte, len(idx))
	}
	for k, i := range idx {
		e := &ix.Entries[i]
		if opts.Deep {
			bySum[e.Path] = sums[k]
		}
		if sums[k] != e.SHA256 || sizes[k] != e.Size {
			if r.add(Difference{Code: refusal.EnvDrift, Path: e.Path, Change: Content, Want: "sha256 " + shortSum(e.SHA256), Got: "sha256 " + shortSum(sums[k])}, opts.Explain) {
				return nil
			}
		}
	}
	for j := range onDisk {
		if s, ok := bySum[onDisk[j].Path]; ok {
			onDisk[j].SHA256 = s
		}
	}
	return nil
}

// sortEntries sorts entries by path in byte order.
func sortEntries(entries []Entry) {
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
}
