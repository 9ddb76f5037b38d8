package seal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/internal/deniedat"
	"github.com/cruxible/cruxprov/internal/strictjson"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/treehash"
)

// Format is the format of the seal documents this version writes: v2.1,
// whose materialization digest is the local digest v2 (DESIGN §5, with
// bytecode) and whose env section records where the env was sealed
// (env.location, the one field v2.1 adds to v2). Readers accept v2 and
// v2.N, and v1 and v1.N (seals written before v2: their digest is the
// superseded v1, recomputed as such); fields added by a later minor are
// ignored; another major is refused with seal_invalid (DESIGN §14).
const Format = "cruxprov.seal/v2.1"

// FormatV2 is the format of v2 seals written before env.location: read,
// verified as before (with no location check), never written.
const FormatV2 = "cruxprov.seal/v2"

// FormatV1 is the format of seals written before the v2 local digest.
const FormatV1 = "cruxprov.seal/v1"

// Seal is the document beside a sealed env (envs/<hex>.seal.json). It holds
// the materialization digest and every input to it, so that a verifier
// recomputes the digest and compares it with the env's name.
type Seal struct {
	Format          string              `json:"format"`
	Materialization Materialization     `json:"materialization"`
	Resolution      Resolution          `json:"resolution"`
	Tree            Tree                `json:"tree"`
	Interpreter     InterpreterIdentity `json:"interpreter"`
	Index           StatIndexRef        `json:"index"`
	Env             Env                 `json:"env"`
	Tool            string              `json:"tool"`
}

// Materialization is the local materialization digest (DESIGN §5) and its
// inputs besides the resolution's packages.
type Materialization struct {
	Digest      digest.Digest      `json:"digest"`
	Platform    string             `json:"platform"`
	Interpreter digest.Interpreter `json:"interpreter"`
	Resolution  digest.Digest      `json:"resolution"`
	Root        *Root              `json:"root"`
	// Bytecode is the v2 digest's bytecode mode: "unchecked-hash", or
	// null for an env without bytecode. Absent from v1 seals.
	Bytecode *string `json:"bytecode,omitempty"`
}

// MarshalJSON writes m with its interpreter as {"Path":…,"Version":…}:
// the keys every v1 and v2 seal has (digest.Interpreter had no JSON tags
// when they were written), which the seal content digest an accepted pin
// records hashes. A reader accepts them as they are: encoding/json
// matches "Path" to digest.Interpreter's "path" (no UnmarshalJSON, so that
// Parse's refusal of unknown fields still reaches into materialization).
func (m Materialization) MarshalJSON() ([]byte, error) {
	type sealedInterpreter struct {
		Path    string `json:"Path"`
		Version string `json:"Version"`
	}
	return json.Marshal(struct {
		Digest      digest.Digest     `json:"digest"`
		Platform    string            `json:"platform"`
		Interpreter sealedInterpreter `json:"interpreter"`
		Resolution  digest.Digest     `json:"resolution"`
		Root        *Root             `json:"root"`
		Bytecode    *string           `json:"bytecode,omitempty"`
	}{m.Digest, m.Platform, sealedInterpreter(m.Interpreter), m.Resolution, m.Root, m.Bytecode})
}

// Root is the provider's root distribution, or null for a bare lock.
type Root = digest.Root

// Resolution is the resolution the env was built from. The store's gc keeps
// every blob named by resolution.packages[].sha256 of every seal.
type Resolution struct {
	Digest   digest.Digest `json:"digest"`
	Platform string        `json:"platform"`
	Packages []Package     `json:"packages"`
	// Root is the root wheel installed with the packages (v2; null for a
	// bare lock), so that the env can be rebuilt from its seal alone.
	Root *Package `json:"root,omitempty"`
}

// Package is one installed wheel: the one model of a resolved wheel
// (digest.ResolvedWheel), whose URL a seal never records (the env does not
// depend on where the wheel came from; Check refuses a seal naming one).
type Package = digest.ResolvedWheel

// Tree is the sealed tree: its digest (DESIGN §5) and counts.
type Tree struct {
	Digest   digest.Digest `json:"digest"`
	Files    int           `json:"files"`
	Dirs     int           `json:"dirs"`
	Symlinks int           `json:"symlinks"`
	Bytes    int64         `json:"bytes"` // sum of the regular files' sizes
	RootMode uint32        `json:"root_mode"`
}

// FileIdentity identifies a file outside the env the env depends on (the
// interpreter, its libpython): where it is, its stat and its content hash.
type FileIdentity struct {
	Path    string        `json:"path"` // real path
	Size    int64         `json:"size"`
	MtimeNS int64         `json:"mtime_ns"`
	CtimeNS int64         `json:"ctime_ns"`
	Ino     uint64        `json:"ino"`
	SHA256  digest.Digest `json:"sha256"`
}

// InterpreterIdentity is what a seal records of the interpreter the env
// points at: its executable's file identity (whose Path is the real path),
// its version and implementation, and its libpython's file identity. Its
// fields are in the order seals have always written them, which embedding
// digest.Interpreter would change: Interpreter is the conversion.
type InterpreterIdentity struct {
	FileIdentity
	Version        string        `json:"version"`
	Implementation string        `json:"implementation"`
	LibPython      *FileIdentity `json:"libpython"` // null when statically linked
}

// Interpreter is the interpreter id identifies, as the local digest takes
// it: its real path and version.
func (id InterpreterIdentity) Interpreter() digest.Interpreter {
	return digest.Interpreter{Path: id.Path, Version: id.Version}
}

// StatIndexRef binds the stat index to the seal.
type StatIndexRef struct {
	Format  string        `json:"format"`
	SHA256  digest.Digest `json:"sha256"`
	Entries int           `json:"entries"`
}

// Env describes the env's layout for its users (the executor runs Python).
type Env struct {
	Python       string `json:"python"`        // relative to the env root, e.g. bin/python
	SitePackages string `json:"site_packages"` // e.g. lib/python3.11/site-packages
	Compiled     bool   `json:"compiled"`      // bytecode was compiled before sealing
	// Location is where the env was sealed (v2.1): the absolute, clean
	// path of its directory, which its scripts' shebangs, pyvenv.cfg, the
	// activate scripts and the bytecode's file names name, so that the env
	// works there and nowhere else. Commit records the final path (never
	// the staging one); an image's tree (materialize.Tree) records its path
	// in the image. Verify refuses an env that is elsewhere (env_drift).
	// Empty in seals written before v2.1, which are not checked for it.
	// Not in the seal content digest (ContentDigest).
	Location string `json:"location,omitempty"`
}

// SealPath returns where the seal of the env at dir lives (dir + ".seal.json").
func SealPath(dir string) string { return filepath.Clean(dir) + ".seal.json" }

// StatIndexPath returns where the stat index of the env at dir lives (dir + ".index").
func StatIndexPath(dir string) string { return filepath.Clean(dir) + ".index" }

// formatVersion splits "cruxprov.seal/vMAJOR[.MINOR]" (decimal digits);
// ok is false for anything else.
func formatVersion(f string) (major, minor string, ok bool) {
	rest, ok := strings.CutPrefix(f, "cruxprov.seal/v")
	if !ok {
		return "", "", false
	}
	major, minor, dot := strings.Cut(rest, ".")
	if !digits(major) || (dot && !digits(minor)) {
		return "", "", false
	}
	return major, minor, true
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// V1 reports whether s was written before the v2 local digest.
func (s *Seal) V1() bool {
	major, _, _ := formatVersion(s.Format)
	return major == "1"
}

// hasLocation reports whether format f records env.location: v2.1 and
// every later v2 minor (a minor keeps the fields of the ones before it).
func hasLocation(f string) bool {
	major, minor, _ := formatVersion(f)
	return major == "2" && minor != "" && strings.TrimLeft(minor, "0") != ""
}

// ComputeDigest recomputes the resolution digest from Resolution.Packages and
// the materialization digest from its inputs (v1 or v2, as the seal's format
// says), and checks both against what the seal states; in a v2 seal,
// env.compiled must agree with the digest's bytecode.
func (s *Seal) ComputeDigest() (digest.Digest, error) {
	rd, err := digest.ResolutionDigest(s.Resolution.Packages)
	if err != nil {
		return digest.Digest{}, err
	}
	if rd != s.Resolution.Digest || rd != s.Materialization.Resolution {
		return digest.Digest{}, fmt.Errorf("the packages hash to %s, the seal states %s", rd, s.Resolution.Digest)
	}
	if r, w := s.Materialization.Root, s.Resolution.Root; w != nil && (r == nil || r.Name != w.Name || r.Version != w.Version || r.SHA256 != w.SHA256) {
		return digest.Digest{}, errors.New("resolution.root is not the materialization's root")
	}
	root := s.Materialization.Root
	var md digest.Digest
	if s.V1() {
		if s.Materialization.Bytecode != nil {
			return digest.Digest{}, errors.New("a v1 seal names a bytecode mode, which only v2 digests have")
		}
		md, err = digest.LocalMaterializationDigestV1(s.Materialization.Platform, s.Materialization.Interpreter, rd, root)
	} else {
		bc := ""
		if s.Materialization.Bytecode != nil {
			if bc = *s.Materialization.Bytecode; bc == "" {
				return digest.Digest{}, errors.New(`materialization.bytecode is "", neither null nor a mode`)
			}
		}
		if s.Env.Compiled != (bc != "") {
			return digest.Digest{}, fmt.Errorf("env.compiled is %t but the digest's bytecode is %q", s.Env.Compiled, bc)
		}
		md, err = digest.LocalMaterializationDigest(s.Materialization.Platform, s.Materialization.Interpreter, rd, root, bc)
	}
	if err != nil {
		return digest.Digest{}, err
	}
	if md != s.Materialization.Digest {
		return digest.Digest{}, fmt.Errorf("the inputs hash to %s, the seal states %s", md, s.Materialization.Digest)
	}
	if s.Materialization.Platform != s.Resolution.Platform {
		return digest.Digest{}, fmt.Errorf("materialization platform %q differs from the resolution's %q", s.Materialization.Platform, s.Resolution.Platform)
	}
	if s.Interpreter.Interpreter() != s.Materialization.Interpreter {
		return digest.Digest{}, errors.New("the interpreter identity differs from the materialization's interpreter")
	}
	if err := s.checkLayout(); err != nil {
		return digest.Digest{}, err
	}
	return md, nil
}

// checkLayout holds env.python and env.site_packages to the venv layout
// of the materialization's interpreter (DESIGN §7: bin/python, and
// lib/pythonX.Y/site-packages): an executor runs env.python, so it is
// never taken from the seal's word alone (Verify also checks that the
// tree holds it as a symlink).
func (s *Seal) checkLayout() error {
	major, rest, _ := strings.Cut(s.Materialization.Interpreter.Version, ".")
	minor, _, _ := strings.Cut(rest, ".")
	if !digits(major) || !digits(minor) {
		return fmt.Errorf("interpreter version %q is not X.Y[.Z]", s.Materialization.Interpreter.Version)
	}
	if s.Env.Python != PythonLink {
		return fmt.Errorf("env.python is %q, not %q", s.Env.Python, PythonLink)
	}
	if want := "lib/python" + major + "." + minor + "/site-packages"; s.Env.SitePackages != want {
		return fmt.Errorf("env.site_packages is %q, not %q", s.Env.SitePackages, want)
	}
	return nil
}

// PythonLink is where every local env's interpreter link is, relative to
// the env root (the venv layout on POSIX).
const PythonLink = "bin/python"

// unreadable is what a detail adds for err: what to do about a permission
// denied (another user's store), nothing otherwise.
func unreadable(err error) string {
	if errors.Is(err, fs.ErrPermission) {
		grant := ""
		if d, ok := deniedat.FindErr(err); ok && d.Own() {
			// Its own (chmod by its own hand): "have the owner of it
			// give read access" sent the owner to itself.
			grant = ", or give read access back to " + d.At + ", which is this user's own"
		} else if ok {
			grant = ", or have the owner of " + d.At
			if d.Known {
				grant += fmt.Sprintf(" (uid %d)", d.Uid)
			}
			grant += " give read access to every user"
		}
		return " (permission denied: verify as a user who can read the env, its seal and the directories above them" + grant + "; a store's envs/ is 0755, its seals 0444)"
	}
	return ""
}

// deniedAt is the path whose mode denied this user what err failed to
// read: the first directory above err's path it may not enter, else that
// path itself (internal/deniedat); "" when err is no denied path.
func deniedAt(err error) string {
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrPermission) || !errors.As(err, &pe) {
		return ""
	}
	return deniedat.Path(pe.Path)
}

// unreadableRefusal is the seal_invalid refusal of an env or seal this
// user may not read (err, with detail's words and unreadable's): with
// the remedy that gives it read access (ActionGrantRead, the path that
// denied it), as the registry's own refusal of a file it may not read
// carries. It carried none, so a Go caller had only the words.
func unreadableRefusal(err error, format string, args ...any) *refusal.Error {
	r := refusal.Wrap(refusal.SealInvalid, err, "%s%s", fmt.Sprintf(format, args...), unreadable(err))
	if at := deniedAt(err); at != "" {
		r.WithRemedy(refusal.ActionGrantRead, at)
	}
	return r
}

// digestName reports whether name is an env directory's name: the 64
// lowercase hex digits of a materialization digest.
func digestName(name string) bool {
	if len(name) != 64 {
		return false
	}
	for _, c := range name {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Load reads and checks the seal of the env at dir: it must exist
// (seal_missing), be a regular file (a symlink there is seal_invalid),
// parse, carry a known format, and its recomputed
// materialization digest must equal the env directory's name (seal_invalid).
func Load(dir string) (*Seal, error) {
	dir = filepath.Clean(dir)
	// Not through a symlink (as the stat index is read): the seal is the
	// regular file beside the env that the env's watch (package watch)
	// watches, not a file elsewhere that a link put there names.
	b, err := ReadFile(SealPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		// No directory either: a mistyped path, not an env whose seal was
		// lost (rebuilding from its inputs would not make this path one).
		if _, derr := os.Lstat(dir); errors.Is(derr, fs.ErrNotExist) {
			return nil, refusal.New(refusal.SealMissing, "%s is not a sealed env (no such directory and no seal)", dir).WithRemedy(refusal.ActionListEnvs, dir)
		}
		if !digestName(filepath.Base(dir)) {
			// A directory no env is named as (the store's envs/ itself,
			// /tmp): rebuilding an env would not make this path one.
			return nil, refusal.New(refusal.SealMissing, "%s is not a sealed env (a directory, but not named by a materialization digest, and no seal beside it)", dir).WithRemedy(refusal.ActionListEnvs, dir)
		}
		return nil, refusal.New(refusal.SealMissing, "%s has no seal %s: it was never sealed or its creation was interrupted", dir, filepath.Base(SealPath(dir))).WithRemedy(refusal.ActionRebuildEnv, dir)
	}
	if err != nil {
		// There is a seal (or something at its name): one this user cannot
		// read is not missing, and rebuilding would not make it readable.
		return nil, unreadableRefusal(err, "cannot read the seal of %s", dir)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, refusal.Wrap(refusal.SealInvalid, err, "the seal of %s is unreadable", dir).WithRemedy(refusal.ActionRebuildEnv, dir)
	}
	md, err := s.ComputeDigest()
	if err != nil {
		return nil, refusal.Wrap(refusal.SealInvalid, err, "the seal of %s does not hash to its stated digest (tampered?)", dir).WithRemedy(refusal.ActionRebuildEnv, dir)
	}
	if md.Hex() != filepath.Base(dir) {
		return nil, refusal.New(refusal.SealInvalid, "the seal of %s names materialization %s, not the env's name", dir, md).WithRemedy(refusal.ActionRebuildEnv, dir)
	}
	return s, nil
}

// Parse decodes a seal document and checks its format and required fields.
func Parse(b []byte) (*Seal, error) {
	var probe struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	major, minor, ok := formatVersion(probe.Format)
	if !ok || (major != "1" && major != "2") {
		return nil, fmt.Errorf("format %q is not %s or %s (written by another version of cruxprov?)", probe.Format, Format, FormatV1)
	}
	// A v2.0 seal has no member this cruxprov does not know; a later
	// minor's new members are read past. No key twice, in any object, nor
	// two cases of one member's key: the seal content digest hashes the
	// values Parse reads, and another reader must not read others.
	var s Seal
	if err := strictjson.Decode(b, &s, !(minor == "" || minor == "0")); err != nil {
		return nil, err
	}
	switch {
	case s.Materialization.Digest.IsZero():
		return nil, errors.New("materialization.digest is missing")
	case s.Tree.Digest.IsZero():
		return nil, errors.New("tree.digest is missing")
	case s.Index.SHA256.IsZero() || s.Index.Format != StatIndexFormat:
		return nil, fmt.Errorf("index reference is missing or names format %q", s.Index.Format)
	case s.Interpreter.SHA256.IsZero() || !filepath.IsAbs(s.Interpreter.Path):
		return nil, errors.New("interpreter identity is incomplete")
	case s.Interpreter.LibPython != nil && (s.Interpreter.LibPython.SHA256.IsZero() || !filepath.IsAbs(s.Interpreter.LibPython.Path)):
		return nil, errors.New("libpython identity is incomplete")
	case !validPath(s.Env.Python) || !validPath(s.Env.SitePackages):
		return nil, errors.New("env layout paths are invalid")
	case hasLocation(s.Format) && (!filepath.IsAbs(s.Env.Location) || filepath.Clean(s.Env.Location) != s.Env.Location):
		return nil, fmt.Errorf("env.location %q is not an absolute clean path (a %s seal records where the env was sealed)", s.Env.Location, probe.Format)
	case !hasLocation(s.Format) && s.Env.Location != "":
		return nil, fmt.Errorf("env.location is in a %s seal, which has no such field (v2.1 added it)", probe.Format)
	case strings.TrimSpace(s.Tool) == "":
		return nil, errors.New("tool is missing")
	}
	for _, p := range s.Resolution.Packages {
		if p.URL != "" {
			return nil, fmt.Errorf("resolution.packages: %s names a URL, which a seal never records", p.Name)
		}
	}
	if r := s.Resolution.Root; r != nil && r.URL != "" {
		return nil, errors.New("resolution.root names a URL, which a seal never records")
	}
	return &s, nil
}

// Marshal encodes s as the seal document, indented, with a final newline.
func (s *Seal) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// IdentityOf returns the identity of the regular file at path (not
// following a final symlink: pass a real path), hashing its content.
func IdentityOf(path string) (FileIdentity, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return FileIdentity{}, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return FileIdentity{}, fmt.Errorf("%s is not a regular file", path)
	}
	sum, size, err := treehash.HashFile(path)
	if err != nil {
		return FileIdentity{}, err
	}
	if size != st.Size {
		return FileIdentity{}, fmt.Errorf("%s changed while it was hashed", path)
	}
	return FileIdentity{Path: path, Size: st.Size, MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano(), Ino: st.Ino, SHA256: digest.FromBytes(sum[:])}, nil
}

// Commit publishes a frozen env: it fills s.Tree and s.Index from ix and
// s.Env.Location with dir (absolute, clean: where the env's files say it
// is), writes the stat index beside dir, renames staging (the tree Freeze
// returned ix for) to dir, and writes the seal last. The seal is the
// commit point: a crash before it leaves an env that Verify refuses
// (seal_missing) and that the next create replaces.
//
// A dir that is a directory already (a replacement: env create
// --replace) is exchanged with the new tree in one step: staging is moved
// beside it first (".<hex>.new.tmp-*"), then the two are swapped with
// renameat2(RENAME_EXCHANGE), so that dir is at every moment a whole
// tree, the old one or the new one — a reader resolving it, a provider
// running from it, never finds it missing — and the live tree's mode is
// never lifted (an exchange within one directory rewrites no ".."). The
// old tree is left at the name the new one had, returned as replaced,
// for the caller to remove (debris the next create and gc remove).
// Between the exchange and the seal's rename a reader finds the new tree
// with the old index and seal: Verify waits for the env's lock, which the
// replacing create holds, and verifies again.
//
// Durability, in three flushes: the index and the seal are written to
// temporary files beside dir and fsynced together; staging is renamed to
// dir and then the index into place, and dir's parent is fsynced (both
// renames are on disk before the seal can be); then the seal is renamed
// into place and the parent fsynced again, so that an env reported created is still
// there after a power loss. The env's own files are not fsynced (as pip
// does not): see docs/seal.md.
func Commit(staging, dir string, s *Seal, ix *StatIndex) (replaced string, err error) {
	if dir, err = filepath.Abs(dir); err != nil {
		return "", err
	}
	ib, err := ix.MarshalBinary()
	if err != nil {
		return "", err
	}
	// The index is written and flushed while the seal is computed.
	var itmp, stmp string
	var ierr, serr error
	var wg sync.WaitGroup
	wg.Go(func() { itmp, ierr = writeTemp(StatIndexPath(dir), ib) })
	defer func() {
		wg.Wait()
		for _, p := range []string{itmp, stmp} {
			if p != "" {
				os.Remove(p) // gone once renamed
			}
		}
	}()
	s.SetTree(ix)
	s.Index = StatIndexRef{Format: StatIndexFormat, SHA256: digest.Sum(ib), Entries: len(ix.Entries)}
	// Where the env will be once renamed (for a replacement too: the new
	// tree is exchanged into dir), not staging: its files name dir.
	s.Env.Location = dir
	if _, err := s.ComputeDigest(); err != nil {
		return "", fmt.Errorf("refusing to write an inconsistent seal: %w", err)
	}
	sb, err := s.Marshal()
	if err != nil {
		return "", err
	}
	parent := filepath.Dir(dir)
	stmp, serr = writeTemp(SealPath(dir), sb)
	wg.Wait()
	if err := errors.Join(ierr, serr); err != nil {
		return "", err
	}
	fi, err := os.Lstat(dir)
	replacing := err == nil && fi.IsDir()
	target := dir
	if replacing {
		// Beside the old tree first: an empty directory of a unique
		// name, which the rename below replaces.
		if target, err = os.MkdirTemp(parent, "."+filepath.Base(dir)+".new.tmp-"); err != nil {
			return "", err
		}
	}
	// Moving a directory to a new parent rewrites its ".." entry, which
	// needs write permission on the directory itself: a user who is not
	// root cannot move the frozen 0555 root. Its mode is lifted for the
	// rename and restored at once (the root is not in the stat index; its
	// mode is the seal's tree.root_mode, checked by verify).
	if err := os.Chmod(staging, 0o755); err != nil {
		return "", err
	}
	// rename(2) itself: it replaces an empty directory (the name
	// reserved above), where os.Rename refuses any directory.
	if err := syscall.Rename(staging, target); err != nil {
		_ = os.Chmod(staging, 0o555)
		return "", &os.LinkError{Op: "rename", Old: staging, New: target, Err: err}
	}
	if err := os.Chmod(target, 0o555); err != nil {
		return "", err // an unsealed env, or a new tree beside: debris the next create removes
	}
	if replacing {
		if err := exchange(target, dir); err != nil {
			return "", fmt.Errorf("cannot exchange the new tree %s with the env's %s: %w", target, dir, err)
		}
		replaced = target // the old tree now
	}
	// The index only after the env is in place, so that a failed rename
	// leaves no index without its env.
	if err := os.Rename(itmp, StatIndexPath(dir)); err != nil {
		return replaced, err
	}
	if err := syncDir(parent); err != nil {
		return replaced, err
	}
	if err := os.Rename(stmp, SealPath(dir)); err != nil {
		return replaced, err
	}
	return replaced, syncDir(parent)
}

// SetTree fills s's format and tree (digest, counts, bytes, root mode)
// from the stat index of a frozen tree.
func (s *Seal) SetTree(ix *StatIndex) {
	s.Format = Format
	s.Tree = Tree{Digest: ix.TreeDigest(), RootMode: 0o555}
	for i := range ix.Entries {
		switch ix.Entries[i].Kind {
		case treehash.File:
			s.Tree.Files++
			s.Tree.Bytes += ix.Entries[i].Size
		case treehash.Dir:
			s.Tree.Dirs++
		case treehash.Symlink:
			s.Tree.Symlinks++
		}
	}
}

// exchangeByRenames swaps the directories a and b where they cannot be
// exchanged in one step: b to a third name, a to b, that name to a. A
// reader of b finds it missing between the first two renames.
func exchangeByRenames(a, b string) error {
	mid, err := os.MkdirTemp(filepath.Dir(b), "."+filepath.Base(b)+".old.tmp-")
	if err != nil {
		return err
	}
	if err := syscall.Rename(b, mid); err != nil { // over the empty mid
		os.Remove(mid)
		return &os.LinkError{Op: "rename", Old: b, New: mid, Err: err}
	}
	if err := os.Rename(a, b); err != nil {
		_ = os.Rename(mid, b)
		return err
	}
	return os.Rename(mid, a)
}

// writeTemp writes b to a new temporary file beside path (mode 0444,
// fsynced) and returns its name.
func writeTemp(path string, b []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o444)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func syncDir(dir string) error { return atomicfile.SyncDir(dir) }

// RebuildsAlone reports whether the seal names every input a rebuild
// from it alone needs: with a root, the root wheel's file
// (resolution.root, v2). A v1 seal (cruxprov of 2026-11-29 and -30)
// names the root by name, version and sha256 only, and is rebuilt from
// those inputs named (RebuildRemedy).
func (s *Seal) RebuildsAlone() bool {
	r := s.Materialization.Root
	return r == nil || s.Resolution.Root != nil && s.Resolution.Root.SHA256 == r.SHA256
}

// RebuildRemedy attaches to e the remedy that rebuilds the env at dir:
// from its seal (replace_env) where the seal can (RebuildsAlone), else
// from the inputs it names (rebuild_env with the root as
// NAME==VERSION@sha256:HEX, the platform, the interpreter and whether it
// was compiled), the command env verify advises and env create
// --replace ENV refuses otherwise.
func (s *Seal) RebuildRemedy(e *refusal.Error, dir string) *refusal.Error {
	if s.RebuildsAlone() {
		return e.WithRemedy(refusal.ActionReplaceEnv, dir)
	}
	r := s.Materialization.Root
	return e.WithRemedy(refusal.ActionRebuildEnv, dir).WithRebuildInputs(r.Name+"=="+r.Version+"@sha256:"+r.SHA256.Hex(), s.Materialization.Platform, s.Materialization.Interpreter.Path, !s.Env.Compiled)
}

// rebuildFromInputs says what RebuildRemedy advises for a seal that
// cannot rebuild the env alone.
func (s *Seal) rebuildFromInputs() string {
	v := "an older"
	if s.Format == FormatV1 {
		v = "a v1"
	}
	return fmt.Sprintf("create the env again from the inputs its seal names (%s seal names the root %s %s, not its wheel file, so it cannot be rebuilt from the seal alone; the new env is named by today's digest of those inputs, and the old one stays until the store's unused envs are collected)", v, s.Materialization.Root.Name, s.Materialization.Root.Version)
}
