package wheel

import (
	"archive/zip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/refusal"
)

// Bounds no real wheel comes near; a wheel beyond them is refused as
// refusal.WheelInvalid before anything is decompressed.
const (
	// bombRatio is the largest uncompressed:compressed ratio accepted for
	// a member whose uncompressed size exceeds bombMinSize. Deflate cannot
	// exceed about 1032:1; real wheels' members (even files of zeros in
	// test data) stay below 100:1 at that size.
	bombRatio = 200
	// bombMinSize is the size above which bombRatio applies: small
	// members (an empty __init__.py, a run of spaces) may have any ratio.
	bombMinSize = 1 << 20
	// maxMetaFile bounds RECORD and every file read whole by ReadFile
	// (dist-info files); the largest RECORDs on PyPI are a few MiB.
	maxMetaFile = 64 << 20
	// maxMembers bounds the number of archive members.
	maxMembers = 1 << 20
)

// File is one regular member of a wheel, as its RECORD line declares it.
type File struct {
	// Name is the member's path in the archive ("pkg/__init__.py").
	Name string
	// Size is the uncompressed size in bytes, equal in the zip header and
	// in RECORD.
	Size int64
	// Mode is the permission bits the zip recorded (0 when the creating
	// system recorded none); installers use the executable bits.
	Mode fs.FileMode
	// SHA256 is the RECORD hash; zero only for RECORD itself and the
	// signature files RECORD.jws and RECORD.p7s, which the spec exempts.
	SHA256 digest.Digest

	// unhashed marks those exempt files (set by Open alone): a File
	// made elsewhere without a hash is refused when read.
	unhashed bool
}

// Wheel is an opened wheel whose structure has been checked: safe member
// names, no links, exactly one .dist-info matching the file name, WHEEL
// and METADATA parsed and consistent with the file name, RECORD present
// and listing exactly the archive's files with matching sizes. The
// contents of the members are verified only as they are read (Verify,
// Extract, ReadFile).
type Wheel struct {
	name     Filename
	zr       *zip.Reader
	closer   io.Closer
	distInfo string
	dataDir  string
	files    []File
	byName   map[string]int // index into files and zfiles
	zfiles   []*zip.File
	meta     Metadata
	info     WheelInfo
}

// Open opens the wheel file at path; its base name must be a valid wheel
// file name. The caller closes the Wheel.
func Open(path string) (*Wheel, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, refusal.Wrap(refusal.WheelInvalid, err, "cannot open wheel %s", path)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, refusal.Wrap(refusal.WheelInvalid, err, "cannot stat wheel %s", path)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, refusal.New(refusal.WheelInvalid, "wheel %s is not a regular file", path)
	}
	w, err := OpenReader(f, st.Size(), filepath.Base(path))
	if err != nil {
		f.Close()
		return nil, err
	}
	w.closer = f
	return w, nil
}

// OpenReader opens a wheel of size bytes read through r; filename is its
// wheel file name (the base name, percent-decoded if it came from a URL).
// Every structural fault is a *refusal.Error (see the package doc).
func OpenReader(r io.ReaderAt, size int64, filename string) (*Wheel, error) {
	name, err := ParseFilename(filename)
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // names are checked below, always
		return nil, refusal.Wrap(refusal.WheelInvalid, err, "%s is not a readable zip archive; fetch it again", filename)
	}
	w := &Wheel{name: name, zr: zr, byName: map[string]int{}}
	for _, check := range []func() error{w.checkMembers, w.findDistInfo, w.checkRecord, w.readMeta} {
		if err := check(); err != nil {
			return nil, Named(filename, err)
		}
	}
	return w, nil
}

// Close releases the file Open opened; it is a no-op for OpenReader.
func (w *Wheel) Close() error {
	if w.closer == nil {
		return nil
	}
	return w.closer.Close()
}

// Filename returns the parsed wheel file name.
func (w *Wheel) Filename() Filename { return w.name }

// DistInfo returns the name of the .dist-info directory as it appears in
// the archive ("flask-3.1.3.dist-info").
func (w *Wheel) DistInfo() string { return w.distInfo }

// DataDir returns the name of the .data directory in the archive
// ("flask-3.1.3.data"), or "" when the wheel has none.
func (w *Wheel) DataDir() string { return w.dataDir }

// Metadata returns what METADATA declares.
func (w *Wheel) Metadata() Metadata { return w.meta }

// WheelInfo returns what WHEEL declares.
func (w *Wheel) WheelInfo() WheelInfo { return w.info }

// Files returns the regular members in archive order (directory entries
// are accepted and left out: installers create directories as needed).
func (w *Wheel) Files() []File { return slices.Clone(w.files) }

// checkMembers checks every member's name and type, the compression
// method and ratio, and refuses duplicates and a path that is both a file
// and a directory.
//
// Duplicates are exact byte-for-byte name duplicates. Names differing
// only by case are accepted: wheels are installed on case-sensitive file
// systems here, and a collision on another file system is the
// installer's install_conflict, as it is between two wheels.
func (w *Wheel) checkMembers() error {
	if len(w.zr.File) > maxMembers {
		return refusal.New(refusal.WheelInvalid, "%s has %d members, more than %d", w.name, len(w.zr.File), maxMembers)
	}
	dirs := map[string]bool{}
	for _, zf := range w.zr.File {
		if err := checkMemberName(zf.Name); err != nil {
			return err
		}
		if err := checkType(zf); err != nil {
			return err
		}
		if strings.HasSuffix(zf.Name, "/") {
			d := strings.TrimSuffix(zf.Name, "/")
			if dirs[d] {
				return refusal.New(refusal.WheelInvalid, "directory %q appears twice; rebuild the wheel", zf.Name)
			}
			dirs[d] = true
			continue
		}
		if _, dup := w.byName[zf.Name]; dup {
			return refusal.New(refusal.WheelInvalid, "member %q appears twice (duplicate members are read differently by different tools); do not install this wheel", zf.Name)
		}
		if zf.Flags&0x1 != 0 {
			return refusal.New(refusal.WheelInvalid, "member %q is encrypted; rebuild the wheel", zf.Name)
		}
		if zf.Method != zip.Store && zf.Method != zip.Deflate {
			return refusal.New(refusal.WheelInvalid, "member %q uses compression method %d; wheels use stored or deflate", zf.Name, zf.Method)
		}
		if zf.UncompressedSize64 > 1<<62 || zf.CompressedSize64 > 1<<62 {
			return refusal.New(refusal.WheelInvalid, "member %q declares an impossible size", zf.Name)
		}
		u, c := zf.UncompressedSize64, zf.CompressedSize64
		if u > bombMinSize && (c == 0 || u/c > bombRatio) {
			return refusal.New(refusal.WheelInvalid, "decompression bomb: member %q inflates %d bytes to %d (more than %d:1); do not install this wheel", zf.Name, c, u, bombRatio)
		}
		if zf.Method == zip.Store && u != c {
			return refusal.New(refusal.WheelInvalid, "stored member %q declares %d bytes but occupies %d; rebuild the wheel", zf.Name, u, c)
		}
		w.byName[zf.Name] = len(w.files)
		w.files = append(w.files, File{Name: zf.Name, Size: int64(u), Mode: zf.Mode().Perm()})
		w.zfiles = append(w.zfiles, zf)
	}
	// A path may not be a file and a directory at once ("a" and "a/b").
	for name := range w.byName {
		if dirs[name] {
			return refusal.New(refusal.WheelInvalid, "%q is both a file and a directory; rebuild the wheel", name)
		}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, clash := w.byName[d]; clash {
				return refusal.New(refusal.WheelInvalid, "%q is both a file and a directory; rebuild the wheel", d)
			}
		}
	}
	return nil
}

// checkType refuses links and special files. The Unix type bits in the
// high half of the external attributes are checked whatever system the
// zip claims made it, because some installers honour them regardless.
func checkType(zf *zip.File) error {
	const sIFMT, sIFREG, sIFDIR, sIFLNK = 0o170000, 0o100000, 0o040000, 0o120000
	t := (zf.ExternalAttrs >> 16) & sIFMT
	switch {
	case t == sIFLNK || zf.Mode()&fs.ModeSymlink != 0:
		return refusal.New(refusal.WheelUnsafePath, "member %q is a symbolic link; do not install this wheel and report it to its author", zf.Name)
	case t != 0 && t != sIFREG && t != sIFDIR, zf.Mode()&(fs.ModeType&^fs.ModeDir) != 0:
		return refusal.New(refusal.WheelUnsafePath, "member %q is a special file, not a regular file or directory; do not install this wheel", zf.Name)
	case t == sIFDIR && !strings.HasSuffix(zf.Name, "/"):
		return refusal.New(refusal.WheelInvalid, "member %q is marked a directory but its name lacks the trailing '/'; rebuild the wheel", zf.Name)
	}
	return nil
}

// findDistInfo finds the one top-level "<name>-<version>.dist-info"
// directory and the optional "<name>-<version>.data" directory, both
// matching the file name after normalization.
func (w *Wheel) findDistInfo() error {
	var infos, datas []string
	for _, zf := range w.zr.File {
		top, _, _ := strings.Cut(zf.Name, "/")
		if !strings.Contains(zf.Name, "/") {
			continue
		}
		switch {
		case strings.HasSuffix(top, ".dist-info"):
			if !slices.Contains(infos, top) {
				infos = append(infos, top)
			}
		case strings.HasSuffix(top, ".data"):
			if !slices.Contains(datas, top) {
				datas = append(datas, top)
			}
		}
	}
	if len(infos) != 1 {
		return refusal.New(refusal.WheelInvalid, "%s has %d .dist-info directories %q, want exactly one; rebuild the wheel", w.name, len(infos), infos)
	}
	w.distInfo = infos[0]
	stem := strings.TrimSuffix(w.distInfo, ".dist-info")
	if !w.matchesName(stem) {
		return refusal.New(refusal.WheelInvalid, "%s holds %s, which names another distribution or version; rebuild the wheel", w.name, w.distInfo)
	}
	for _, d := range datas {
		if !w.matchesName(strings.TrimSuffix(d, ".data")) {
			return refusal.New(refusal.WheelInvalid, "%s holds %s, which names another distribution or version; rebuild the wheel", w.name, d)
		}
		if w.dataDir != "" {
			return refusal.New(refusal.WheelInvalid, "%s has two .data directories; rebuild the wheel", w.name)
		}
		w.dataDir = d
	}
	if w.dataDir != "" {
		for _, f := range w.files {
			rest, ok := strings.CutPrefix(f.Name, w.dataDir+"/")
			if !ok {
				continue
			}
			scheme, _, nested := strings.Cut(rest, "/")
			if !nested || !slices.Contains([]string{"purelib", "platlib", "headers", "scripts", "data"}, scheme) {
				return refusal.New(refusal.WheelInvalid, "%s: %q is not under a wheel scheme (purelib, platlib, headers, scripts, data); rebuild the wheel", w.name, f.Name)
			}
		}
	}
	return nil
}

// matchesName reports whether "<name>-<version>" names the same
// distribution and version as the wheel's file name, after normalization.
func (w *Wheel) matchesName(stem string) bool {
	i := strings.LastIndexByte(stem, '-')
	if i <= 0 {
		return false
	}
	return pep503.Normalize(stem[:i]) == w.name.Name && sameVersion(stem[i+1:], w.name.Version)
}

// checkRecord reads RECORD and holds it to the archive: every file listed
// with a sha256 and its zip size, every line naming a file.
func (w *Wheel) checkRecord() error {
	recName := w.distInfo + "/RECORD"
	i, ok := w.byName[recName]
	if !ok {
		return refusal.New(refusal.RecordMissing, "%s has no %s; rebuild the wheel", w.name, recName)
	}
	if w.files[i].Size > maxMetaFile {
		return refusal.New(refusal.WheelInvalid, "%s is %d bytes, more than %d", recName, w.files[i].Size, maxMetaFile)
	}
	for _, name := range []string{recName, recName + ".jws", recName + ".p7s"} {
		if j, ok := w.byName[name]; ok {
			w.files[j].unhashed = true // the spec's exemption: checked by size alone
		}
	}
	b, err := w.readMember(nilContext(), i)
	if err != nil {
		return err
	}
	lines, err := parseRecord(b)
	if err != nil {
		return err
	}
	exempt := func(name string) bool {
		return name == recName || name == recName+".jws" || name == recName+".p7s"
	}
	listed := map[string]bool{}
	for _, l := range lines {
		j, ok := w.byName[l.path]
		if !ok && w.isDirRow(l) {
			continue // a directory listed as pip lists none, and accepts: nothing to check
		}
		if !ok {
			return refusal.New(refusal.RecordMissing, "RECORD lists %q, which the wheel lacks; rebuild the wheel", l.path)
		}
		listed[l.path] = true
		f := &w.files[j]
		if exempt(l.path) {
			if !l.hash.IsZero() {
				return refusal.New(refusal.RecordMismatch, "RECORD records a hash for %q, which cannot be hashed in RECORD; rebuild the wheel", l.path)
			}
			if l.size >= 0 && l.size != f.Size {
				return refusal.New(refusal.RecordMismatch, "RECORD says %q is %d bytes, the archive says %d; %s", l.path, l.size, f.Size, changed)
			}
			continue
		}
		if l.hash.IsZero() || l.size < 0 {
			return refusal.New(refusal.RecordMissing, "RECORD has no hash or size for %q; rebuild the wheel", l.path)
		}
		if l.size != f.Size {
			return refusal.New(refusal.RecordMismatch, "RECORD says %q is %d bytes, the archive says %d; %s", l.path, l.size, f.Size, changed)
		}
		f.SHA256 = l.hash
	}
	for _, f := range w.files {
		if !listed[f.Name] && !exempt(f.Name) {
			return refusal.New(refusal.RecordMissing, "%q is not listed in RECORD; rebuild the wheel", f.Name)
		}
	}
	return nil
}

// isDirRow reports whether RECORD line l names a directory of the
// archive ("pkg/", an entry or the parent of a member) without a hash or a
// size. Some build tools list directories so; the row carries nothing to
// verify, and pip installs such wheels. A directory row with a hash or a
// size is not one.
func (w *Wheel) isDirRow(l recordLine) bool {
	if !strings.HasSuffix(l.path, "/") || !l.hash.IsZero() || l.size >= 0 {
		return false
	}
	for _, zf := range w.zr.File {
		if strings.HasPrefix(zf.Name, l.path) {
			return true
		}
	}
	return false
}

// readMeta reads and checks WHEEL and METADATA.
func (w *Wheel) readMeta() error {
	b, err := w.ReadFile(w.distInfo + "/WHEEL")
	if errors.Is(err, fs.ErrNotExist) {
		return refusal.New(refusal.WheelInvalid, "%s has no %s/WHEEL; rebuild the wheel", w.name, w.distInfo)
	}
	if err != nil {
		return err
	}
	if w.info, err = parseWheelInfo(b); err != nil {
		return err
	}
	b, err = w.ReadFile(w.distInfo + "/METADATA")
	if errors.Is(err, fs.ErrNotExist) {
		return refusal.New(refusal.WheelInvalid, "%s has no %s/METADATA; rebuild the wheel", w.name, w.distInfo)
	}
	if err != nil {
		return err
	}
	if w.meta, err = parseMetadata(b); err != nil {
		return err
	}
	if pep503.Normalize(w.meta.Name) != w.name.Name || !sameVersion(w.meta.Version, w.name.Version) {
		return refusal.New(refusal.WheelInvalid, "METADATA names %s %s, the file name %s %s; rebuild the wheel", w.meta.Name, w.meta.Version, w.name.Distribution, w.name.Version)
	}
	return nil
}

// EntryPoints parses the dist-info's entry_points.txt, keyed by group
// ("console_scripts", "gui_scripts", ...). A wheel without the file has
// none (an empty map, no error).
func (w *Wheel) EntryPoints() (map[string][]EntryPoint, error) {
	b, err := w.ReadFile(w.distInfo + "/entry_points.txt")
	if errors.Is(err, fs.ErrNotExist) {
		return map[string][]EntryPoint{}, nil
	}
	if err != nil {
		return nil, err
	}
	return parseEntryPoints(b)
}
