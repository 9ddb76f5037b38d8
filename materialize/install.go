package materialize

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/wheel"
)

// Installer is the name written to every dist-info's INSTALLER file.
const Installer = "cruxprov"

// installer installs wheels into one staging env; it is safe for
// concurrent use by one goroutine per wheel.
type installer struct {
	root   string // the staging directory
	l      Layout
	python string // the env's python as scripts name it: <final>/bin/python

	mu     sync.Mutex
	claims map[string]claim      // env-relative path → who wrote it with which bytes
	known  map[string]seal.Known // env-relative path → size and sha256 written
	dirs   map[string]bool       // directories known to exist
	dirfds map[string]int        // open O_PATH descriptors of some of them (see create)
}

type claim struct {
	sum   [32]byte
	owner string
}

func newInstaller(root, final string, l Layout) *installer {
	return &installer{
		root:   root,
		l:      l,
		python: final + "/bin/python",
		claims: map[string]claim{},
		known:  map[string]seal.Known{},
		dirs:   map[string]bool{},
		dirfds: map[string]int{},
	}
}

// reserve claims the venv's own paths so that no wheel overwrites them.
func (ins *installer) reserve(paths ...string) {
	for _, p := range paths {
		ins.claims[p] = claim{owner: "the venv itself"}
	}
}

// take claims rel for owner with content sum. It reports whether the
// caller must write the file (false: identical bytes are already there).
func (ins *installer) take(rel string, sum [32]byte, owner string) (bool, error) {
	ins.mu.Lock()
	defer ins.mu.Unlock()
	c, ok := ins.claims[rel]
	if !ok {
		ins.claims[rel] = claim{sum: sum, owner: owner}
		return true, nil
	}
	if (c.sum == sum && c.owner != "the venv itself") || c.owner == bytecodeOwner {
		return false, nil // identical bytes, or a pyc the bytecode stage wrote over it (as py_compile would)
	}
	if c.owner == owner {
		// Two of one wheel's members (a root file and a .data scheme's, a
		// data file and an entry point script) land on one path: the
		// wheel is at fault, not the resolution.
		return false, refusal.New(refusal.WheelInvalid, "%s writes %s twice with different bytes (two of its members, or a member and an entry point script, install there); rebuild the wheel", owner, rel)
	}
	return false, refusal.New(refusal.InstallConflict, "%s and %s both write %s with different bytes; the resolution cannot be installed as one env", c.owner, owner, rel)
}

// bytecodeOwner claims the pycs the bytecode stage writes while wheels
// are still being installed (claimPyc).
const bytecodeOwner = "the bytecode stage"

// claimPyc claims rel, a pyc the bytecode stage is about to write, and
// reports false when a wheel claimed it first (it ships that pyc): the
// stage then writes it over the wheel's once the install is over.
func (ins *installer) claimPyc(rel string) bool {
	ins.mu.Lock()
	defer ins.mu.Unlock()
	if _, ok := ins.claims[rel]; ok {
		return false
	}
	ins.claims[rel] = claim{owner: bytecodeOwner}
	return true
}

// isSource reports whether rel is a source the bytecode stage compiles.
func (ins *installer) isSource(rel string) bool {
	return strings.HasSuffix(rel, ".py") && strings.HasPrefix(rel, ins.l.SitePackages+"/")
}

// finalSubtrees returns, once the install is over, the roots of the parts
// of the tree nothing is written in any more: the directories the install
// made that hold no source, nor any directory that does (bytecode goes to
// a source's __pycache__, made next to it), below one that does. It also
// returns a copy of what the install wrote, for freezing them while the
// bytecode is written elsewhere.
func (ins *installer) finalSubtrees() ([]string, map[string]seal.Known) {
	ins.mu.Lock()
	defer ins.mu.Unlock()
	open := map[string]bool{".": true}
	for rel := range ins.known {
		if ins.isSource(rel) {
			for d := path.Dir(rel) + "/__pycache__"; !open[d]; d = path.Dir(d) {
				open[d] = true
			}
		}
	}
	var roots []string
	for d := range ins.dirs {
		if !open[d] && open[path.Dir(d)] {
			roots = append(roots, d)
		}
	}
	return roots, maps.Clone(ins.known)
}

// record notes what was written at rel, for the seal.
func (ins *installer) record(rel string, k seal.Known) {
	ins.mu.Lock()
	ins.known[rel] = k
	ins.mu.Unlock()
}

// maxDirFDs bounds the directory descriptors an installer keeps open.
const maxDirFDs = 4096

// mkdirFor creates the parent directories of rel that are not known to
// exist, one mkdir each (no stat first), and returns an O_PATH descriptor
// of the parent, or -1 when it keeps none (the root, or past maxDirFDs).
func (ins *installer) mkdirFor(rel string) (int, error) {
	dir := path.Dir(rel)
	if dir == "." {
		return -1, nil
	}
	ins.mu.Lock()
	ok, full := ins.dirs[dir], len(ins.dirfds) >= maxDirFDs
	if fd, has := ins.dirfds[dir]; has {
		ins.mu.Unlock()
		return fd, nil
	}
	var missing []string // from dir up to the first known ancestor
	for d := dir; d != "." && !ins.dirs[d]; d = path.Dir(d) {
		missing = append(missing, d)
	}
	// The walks start at the nearest ancestor whose descriptor is kept
	// (it exists, so it is above every missing directory), not at the
	// file system's root: a third of the components, for each mkdir and
	// the open below.
	at, base := unix.AT_FDCWD, ""
	for d := path.Dir(dir); d != "."; d = path.Dir(d) {
		if fd, has := ins.dirfds[d]; has {
			at, base = fd, d
			break
		}
	}
	ins.mu.Unlock()
	if ok && full {
		return -1, nil
	}
	name := func(d string) string { // d's path from at
		if at == unix.AT_FDCWD {
			return filepath.Join(ins.root, filepath.FromSlash(d))
		}
		return filepath.FromSlash(d[len(base)+1:])
	}
	for i := len(missing) - 1; i >= 0; i-- {
		n := name(missing[i])
		err := unix.Mkdirat(at, n, 0o755)
		if err == unix.EEXIST { // another worker's, or a file: only a directory will do
			var st unix.Stat_t
			if err = unix.Fstatat(at, n, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
				err = unix.EEXIST
			}
		}
		if err != nil {
			perr := &fs.PathError{Op: "mkdir", Path: filepath.Join(ins.root, filepath.FromSlash(missing[i])), Err: err}
			if err == unix.ENOTDIR || err == unix.EEXIST {
				return -1, refusal.Wrap(refusal.InstallConflict, perr, "%s is a directory for one wheel and a file for another", missing[i])
			}
			return -1, refusal.Wrap(refusal.MaterializeFailed, perr, "cannot create %s in the env; check the store's disk", missing[i])
		}
	}
	d, err := unix.Openat(at, name(dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		d = -1
	}
	ins.mu.Lock()
	for _, m := range missing {
		ins.dirs[m] = true
	}
	if old, has := ins.dirfds[dir]; d >= 0 && (has || len(ins.dirfds) >= maxDirFDs) {
		unix.Close(d) // another worker's is kept, or there are enough
		d = old
		if !has {
			d = -1
		}
	} else if d >= 0 {
		ins.dirfds[dir] = d
	}
	ins.mu.Unlock()
	return d, nil
}

// closeDirs closes the directory descriptors (once nothing writes).
func (ins *installer) closeDirs() {
	for _, fd := range ins.dirfds {
		unix.Close(fd)
	}
	clear(ins.dirfds)
}

// create opens rel for writing, exclusively, relative to its directory's
// descriptor when the installer keeps one (no path walk per file). The
// file is created with its sealed mode (0444, or 0555 when executable):
// the open descriptor may still write, and Freeze then has no chmod to do.
func (ins *installer) create(rel string, exec bool) (file, error) {
	dirfd, err := ins.mkdirFor(rel)
	if err != nil {
		return -1, err
	}
	mode := uint32(0o444)
	if exec {
		mode = 0o555
	}
	p := filepath.Join(ins.root, filepath.FromSlash(rel))
	name := p
	if dirfd >= 0 {
		name = path.Base(rel)
	} else {
		dirfd = unix.AT_FDCWD
	}
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, mode)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			err = &fs.PathError{Op: "open", Path: p, Err: err}
			if errors.Is(err, os.ErrExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
				return -1, refusal.Wrap(refusal.InstallConflict, err, "%s is written twice (a file and a directory?)", rel)
			}
			return -1, refusal.Wrap(refusal.MaterializeFailed, err, "cannot write %s in the env; check the store's disk", rel)
		}
		return file(fd), nil
	}
}

// file is a file the installer writes, as a bare descriptor: an *os.File
// would cost an epoll registration (refused for every regular file) and
// a finalizer per file, thousands of times per env.
type file int

// Write writes all of p.
func (f file) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Write(int(f), p[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.ErrShortWrite
		}
		n += m
	}
	return n, nil
}

// Close closes the descriptor.
func (f file) Close() error { return unix.Close(int(f)) }

// stamp is the file's stamp for the seal once its last write returned err:
// none after a failed write or stat (Freeze then takes a stat of its own).
func (f file) stamp(err error) seal.Stamp {
	if err != nil {
		return seal.Stamp{}
	}
	s, _ := seal.StampOf(int(f))
	return s
}

// writeBytes writes b to rel (claimed already).
func (ins *installer) writeBytes(rel string, b []byte, exec bool) error {
	f, err := ins.create(rel, exec)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	stamp := f.stamp(err)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return refusal.Wrap(refusal.MaterializeFailed, err, "cannot write %s in the env; check the store's disk", rel)
	}
	ins.record(rel, seal.Known{Size: int64(len(b)), SHA256: sha256.Sum256(b), Stamp: stamp})
	return nil
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// row is one line of a regenerated RECORD.
type row struct {
	path string // relative to site-packages, as pip writes it
	hash string // "sha256=<urlsafe b64 nopad>" or ""
	size string
}

// wheelJob is one wheel being installed: what its members need to know,
// and the RECORD rows its members add (from several goroutines).
type wheelJob struct {
	w        *wheel.Wheel
	owner    string // the wheel's file name, for messages
	pack     string // its sources' pyc pack (packName)
	distInfo string
	dataDir  string
	headers  string
	eps      map[string][]wheel.EntryPoint
	scripts  map[string]bool // entry point names: setuptools wrappers for them are skipped

	mu   sync.Mutex
	rows []row
}

// prepare reads what installing w's members needs.
func (ins *installer) prepare(w *wheel.Wheel) (*wheelJob, error) {
	fn := w.Filename()
	eps, err := w.EntryPoints()
	if err != nil {
		return nil, err
	}
	j := &wheelJob{
		w: w, owner: fn.String(), pack: packName(fn.Name, fn.String()), distInfo: w.DistInfo(), dataDir: w.DataDir(), eps: eps,
		headers: "include/site/python" + ins.l.PythonVer + "/" + strings.ReplaceAll(fn.Distribution, "_", "-"),
		scripts: map[string]bool{},
	}
	console := map[string]wheel.EntryPoint{}
	for _, ep := range eps["console_scripts"] {
		console[ep.Name] = ep
		j.scripts[ep.Name] = true
	}
	for _, ep := range eps["gui_scripts"] {
		// One bin/NAME for two objects: pip writes both, the gui one
		// last; which one a command runs is not the wheel's to leave open.
		if c, ok := console[ep.Name]; ok && (c.Module != ep.Module || c.Attr != ep.Attr) {
			return nil, refusal.New(refusal.WheelInvalid, "%s: entry point %q is in [console_scripts] as %s and in [gui_scripts] as %s, one bin/%s for two objects; rebuild the wheel",
				j.owner, ep.Name, objectRef(c), objectRef(ep), ep.Name)
		}
		j.scripts[ep.Name] = true
	}
	return j, nil
}

// objectRef writes an entry point's object reference, "module:attr".
func objectRef(ep wheel.EntryPoint) string {
	if ep.Attr == "" {
		return ep.Module
	}
	return ep.Module + ":" + ep.Attr
}

// isRecord reports whether f is the wheel's RECORD (regenerated, not copied).
func (j *wheelJob) isRecord(f wheel.File) bool { return f.Name == j.distInfo+"/RECORD" }

// member installs one archive member read through r (a verifying reader:
// it fails at the end of a member whose bytes differ from RECORD), and
// appends to srcs the source it wrote, if any (isSource).
func (ins *installer) member(j *wheelJob, f wheel.File, r io.Reader, srcs *[]pycSource) error {
	rel, isScript, err := ins.dest(f.Name, j.dataDir, j.headers)
	if err != nil {
		return err
	}
	if f.Name == j.distInfo+"/INSTALLER" {
		_, err := io.Copy(io.Discard, r) // still verified
		return err                       // finish writes the installer's own, as pip overwrites a shipped one with its
	}
	if isScript && j.scripts[scriptBase(path.Base(rel))] {
		_, err := io.Copy(io.Discard, r) // still verified
		return err                       // a setuptools wrapper for an entry point: pip skips it too
	}
	exec := f.Mode&0o111 != 0
	var sum [32]byte
	var size int64
	if isScript {
		b, err := readAllBounded(r, f.Size)
		if err != nil {
			return err
		}
		b = ins.fixShebang(b)
		sum, size = sha256.Sum256(b), int64(len(b))
		write, err := ins.take(rel, sum, j.owner)
		if err != nil {
			return err
		}
		if write {
			if err := ins.writeBytes(rel, b, exec); err != nil {
				return err
			}
		}
	} else {
		if f.SHA256.IsZero() {
			return refusal.New(refusal.RecordMissing, "%s: %s has no RECORD hash", j.owner, f.Name)
		}
		hb, _ := hex.DecodeString(f.SHA256.Hex())
		copy(sum[:], hb)
		size = f.Size
		write, err := ins.take(rel, sum, j.owner)
		if err != nil {
			return err
		}
		if write {
			stamp, err := ins.copyFile(rel, r, exec)
			if err != nil {
				return err
			}
			ins.record(rel, seal.Known{Size: size, SHA256: sum, Stamp: stamp})
			if ins.isSource(rel) {
				*srcs = append(*srcs, pycSource{rel: rel, sum: sum, size: size, pack: j.pack})
			}
		} else if _, err := io.Copy(io.Discard, r); err != nil { // identical bytes: verify, write nothing
			return err
		}
	}
	j.mu.Lock()
	j.rows = append(j.rows, row{recordPath(ins.l, rel), recordHash(sum), strconv.FormatInt(size, 10)})
	j.mu.Unlock()
	return nil
}

// finish writes the wheel's entry point scripts, INSTALLER and RECORD,
// once every member is installed.
func (ins *installer) finish(j *wheelJob) error {
	rows := j.rows
	for _, g := range []string{"console_scripts", "gui_scripts"} {
		for _, ep := range j.eps[g] {
			r, err := ins.entryPointScript(j.owner, ep)
			if err != nil {
				return err
			}
			rows = append(rows, r)
		}
	}
	inst := []byte(Installer + "\n")
	instRel := ins.l.SitePackages + "/" + j.distInfo + "/INSTALLER"
	if _, err := ins.take(instRel, sha256.Sum256(inst), j.owner); err != nil {
		return err
	}
	if err := ins.writeBytes(instRel, inst, false); err != nil {
		return err
	}
	rows = append(rows, row{j.distInfo + "/INSTALLER", recordHash(sha256.Sum256(inst)), strconv.Itoa(len(inst))})
	rows = append(rows, row{path: j.distInfo + "/RECORD"})
	rec := formatRecord(rows)
	recRel := ins.l.SitePackages + "/" + j.distInfo + "/RECORD"
	if _, err := ins.take(recRel, sha256.Sum256(rec), j.owner); err != nil {
		return err
	}
	return ins.writeBytes(recRel, rec, false)
}

// task is one unit of parallel install work: one member of one wheel.
type task struct {
	j     *wheelJob
	f     wheel.File
	zf    *zip.File  // the member in the archive (nil when read from the cache)
	cache *cacheSlot // the wheel's unpacked-cache slot, or nil
	data  []byte     // the member's cached bytes, when its batch was read whole
}

// open returns the member's verifying reader: from the unpacked cache when
// the wheel has an entry there, else inflating the archive member (and
// filling the cache entry being written, if any).
func (t task) open() (io.ReadCloser, error) {
	if t.data != nil || (t.f.Size == 0 && t.cache != nil && t.cache.src != nil) {
		return &cachedMember{f: t.f, data: t.data, entry: t.cache.path}, nil
	}
	if t.cache != nil && t.cache.src != nil {
		return openCached(t.cache, t.f), nil
	}
	r, err := openMember(t.zf, t.f)
	if err != nil {
		return nil, err
	}
	if t.cache != nil && t.cache.tee != nil {
		r.tee, r.teeOff = t.cache.tee, t.cache.offsets[t.f.Name]
	}
	return r, nil
}

// batchBytes bounds a batch of members of one directory (see installAll).
const batchBytes = 1 << 20

// plan prepares installing wheel o: its job, and its members (all but
// RECORD, which is regenerated) cut into batches. Members stay in archive
// order (wheels sort them by path), a batch holding one directory's
// members: creating files directory by directory is several times faster
// on ext4 than scattering them, and two workers creating files in one
// directory wait on its lock. Members are read from the unpacked cache,
// or opened by name in a second reader of the archive (for parallel
// streaming) and verified while they stream (memberReader).
func (ins *installer) plan(o opened) (*wheelJob, [][]task, error) {
	j, err := ins.prepare(o.w)
	if err != nil {
		return nil, nil, err
	}
	var byName map[string]*zip.File
	if o.cache == nil || o.cache.src == nil {
		zr, err := zip.NewReader(o.f, o.size)
		if err != nil {
			return nil, nil, refusal.Wrap(refusal.WheelInvalid, err, "%s is not a readable zip archive", j.owner)
		}
		byName = make(map[string]*zip.File, len(zr.File))
		for _, zf := range zr.File {
			byName[zf.Name] = zf
		}
	}
	files := o.w.Files()
	tasks := make([]task, 0, len(files))
	for _, f := range files {
		if j.isRecord(f) {
			continue
		}
		t := task{j: j, f: f, cache: o.cache}
		if byName != nil {
			if t.zf = byName[f.Name]; t.zf == nil {
				return nil, nil, refusal.New(refusal.WheelInvalid, "%s: member %q vanished from the archive", j.owner, f.Name)
			}
		}
		tasks = append(tasks, t)
	}
	var batches [][]task
	for i := 0; i < len(tasks); {
		k, n := i+1, tasks[i].f.Size
		dir := path.Dir(tasks[i].f.Name)
		for k < len(tasks) && n < batchBytes && path.Dir(tasks[k].f.Name) == dir {
			n += tasks[k].f.Size
			k++
		}
		batches = append(batches, tasks[i:k])
		i = k
	}
	return j, batches, nil
}

// installBatch installs one batch's members, in order; buf is the
// calling worker's read buffer (readBatch). It returns the sources it
// wrote (isSource), complete on disk.
func (ins *installer) installBatch(ctx context.Context, b []task, buf *[]byte) ([]pycSource, error) {
	release, err := readBatch(b, buf)
	if err != nil {
		return nil, err
	}
	defer release()
	var srcs []pycSource
	for _, t := range b {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := ins.installMember(t, &srcs); err != nil {
			return nil, err
		}
	}
	return srcs, nil
}

// installMember installs one task's member. A fault of the wheel's
// (a member that is not what RECORD says) names the wheel: the env has
// dozens, and the member's path alone did not say which.
func (ins *installer) installMember(t task, srcs *[]pycSource) error {
	r, err := t.open()
	if err != nil {
		return wheel.Named(t.j.owner, err)
	}
	defer r.Close()
	if err := ins.member(t.j, t.f, r, srcs); err != nil {
		return wheel.Named(t.j.owner, err)
	}
	// A member skipped (a setuptools wrapper) or written from memory
	// was read to its end already; make sure, so that it is verified.
	_, err = io.Copy(io.Discard, r)
	return wheel.Named(t.j.owner, err)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// copyFile streams a verified member to rel and returns the file's stamp;
// the verifying reader fails at the end of a member whose bytes differ
// from RECORD.
func (ins *installer) copyFile(rel string, r io.Reader, exec bool) (seal.Stamp, error) {
	f, err := ins.create(rel, exec)
	if err != nil {
		return seal.Stamp{}, err
	}
	bp := copyBufs.Get().(*[]byte)
	_, err = io.CopyBuffer(f, r, *bp)
	copyBufs.Put(bp)
	stamp := f.stamp(err)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = refusal.Wrap(refusal.MaterializeFailed, cerr, "cannot write %s in the env; check the store's disk", rel)
	}
	if err != nil {
		if refusal.CodeOf(err) == "" {
			return seal.Stamp{}, refusal.Wrap(refusal.MaterializeFailed, err, "cannot write %s in the env; check the store's disk", rel)
		}
		return seal.Stamp{}, err
	}
	return stamp, nil
}

// dest maps an archive member to its env-relative path per the wheel spec:
// <name>.data/<scheme>/… to the scheme's directory, everything else to
// site-packages (purelib and platlib are one directory in a venv).
func (ins *installer) dest(name, dataDir, headers string) (rel string, script bool, err error) {
	if dataDir == "" || !strings.HasPrefix(name, dataDir+"/") {
		return ins.l.SitePackages + "/" + name, false, nil
	}
	scheme, sub, ok := strings.Cut(name[len(dataDir)+1:], "/")
	if !ok || sub == "" {
		return "", false, refusal.New(refusal.WheelInvalid, "member %s is not inside a scheme directory of %s; rebuild the wheel", name, dataDir)
	}
	switch scheme {
	case "purelib", "platlib":
		return ins.l.SitePackages + "/" + sub, false, nil
	case "scripts":
		return ins.l.Bin + "/" + sub, true, nil
	case "headers":
		return headers + "/" + sub, false, nil
	case "data":
		first, _, _ := strings.Cut(sub, "/")
		if first == "lib64" {
			return "", false, refusal.New(refusal.WheelUnsafePath, "member %s would write through the env's lib64 link; rebuild the wheel", name)
		}
		return sub, false, nil
	}
	return "", false, refusal.New(refusal.WheelInvalid, "member %s uses unknown scheme %q (purelib, platlib, scripts, headers, data); rebuild the wheel", name, scheme)
}

// scriptBase is the entry point name a setuptools wrapper file stands for
// (EP, EP.exe, EP-script.py, EP.pya), as pip matches it.
func scriptBase(name string) string {
	l := strings.ToLower(name)
	switch {
	case strings.HasSuffix(l, ".exe"), strings.HasSuffix(l, ".pya"):
		return name[:len(name)-4]
	case strings.HasSuffix(l, "-script.py"):
		return name[:len(name)-10]
	}
	return name
}

// fixShebang rewrites a first line starting with "#!python" to the
// env's python's shebang: "#!<env>/bin/python\n", as pip does, where
// that is a shebang the kernel runs; else (a home with a space, or a path
// past the kernel's 256 bytes) distlib's /bin/sh trampoline, as for entry
// points. Before,
// such a script got "#!/home/a b/…/bin/python" and failed at run time
// ("No such file or directory", exit 127).
func (ins *installer) fixShebang(b []byte) []byte {
	if !bytes.HasPrefix(b, []byte("#!python")) {
		return b
	}
	rest := b[len(b):]
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		rest = b[i+1:]
	}
	// pip's line wherever the kernel (Linux 5.1 and later: 256 bytes) can
	// run it, so that the tree stays pip's; distlib's shebang is shorter.
	sb := "#!" + ins.python + "\n"
	if strings.Contains(ins.python, " ") || len(sb) > 256 {
		sb = ins.shebang()
	}
	out := make([]byte, 0, len(sb)+len(rest))
	out = append(out, sb...)
	return append(out, rest...)
}

// scriptTemplate is the launcher pip writes for an entry point (distlib's
// ScriptMaker template, as vendored by pip 23).
const scriptTemplate = `# -*- coding: utf-8 -*-
import re
import sys
from %s import %s
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\.pyw|\.exe)?$', '', sys.argv[0])
    sys.exit(%s())
`

// shebang is distlib's shebang for the env's python on Linux: simple when
// it has no space and fits 127 bytes, the /bin/sh exec trampoline otherwise.
func (ins *installer) shebang() string {
	exe := ins.python
	if strings.Contains(exe, " ") {
		exe = `"` + exe + `"`
	}
	if !strings.Contains(exe, " ") && len(exe)+3 <= 127 {
		return "#!" + exe + "\n"
	}
	return "#!/bin/sh\n'''exec' " + exe + " \"$0\" \"$@\"\n' '''\n"
}

func (ins *installer) entryPointScript(owner string, ep wheel.EntryPoint) (row, error) {
	if ep.Attr == "" {
		return row{}, refusal.New(refusal.WheelInvalid, "%s: entry point %q names module %s without a callable; pip refuses it too", owner, ep.Name, ep.Module)
	}
	if ep.Name == "." || ep.Name == ".." || strings.ContainsAny(ep.Name, "/\\\x00") {
		return row{}, refusal.New(refusal.WheelUnsafePath, "%s: entry point name %q is not a file name", owner, ep.Name)
	}
	imp, _, _ := strings.Cut(ep.Attr, ".")
	b := []byte(ins.shebang() + fmt.Sprintf(scriptTemplate, ep.Module, imp, ep.Attr))
	rel := ins.l.Bin + "/" + ep.Name
	sum := sha256.Sum256(b)
	write, err := ins.take(rel, sum, owner)
	if err != nil {
		return row{}, err
	}
	if write {
		if err := ins.writeBytes(rel, b, true); err != nil {
			return row{}, err
		}
	}
	return row{recordPath(ins.l, rel), recordHash(sum), strconv.Itoa(len(b))}, nil
}

// recordPath is rel relative to site-packages, as pip's RECORD has it.
func recordPath(l Layout, rel string) string {
	if strings.HasPrefix(rel, l.SitePackages+"/") {
		return rel[len(l.SitePackages)+1:]
	}
	up := strings.Repeat("../", strings.Count(l.SitePackages, "/")+1)
	return up + rel
}

func recordHash(sum [32]byte) string {
	return "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// formatRecord writes RECORD rows sorted, as pip does (CSV, "\n" lines).
func formatRecord(rows []row) []byte {
	slices.SortFunc(rows, func(a, b row) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return strings.Compare(a.hash, b.hash)
	})
	rows = slices.CompactFunc(rows, func(a, b row) bool { return a == b })
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	for _, r := range rows {
		_ = w.Write([]string{r.path, r.hash, r.size})
	}
	w.Flush()
	return buf.Bytes()
}

// readAllBounded reads a member known to be size bytes (scripts are read
// whole to rewrite their shebang); the verifying reader's error surfaces.
func readAllBounded(r io.Reader, size int64) ([]byte, error) {
	if size > 64<<20 {
		return nil, refusal.New(refusal.WheelInvalid, "a script of %d bytes is beyond any real wheel's", size)
	}
	return io.ReadAll(r)
}
