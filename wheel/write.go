package wheel

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"hash/crc32"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// Entry is one file to write into a wheel.
type Entry struct {
	// Name is the member path ("pkg/__init__.py",
	// "pkg-1.0.dist-info/METADATA").
	Name string
	// Data is the file's content.
	Data []byte
	// Mode is the permission bits (0 means 0644); only 0o777 is kept.
	Mode fs.FileMode
}

// msdos date 1980-01-01, time 00:00:00: the earliest zip timestamp, used
// for every member so that the output does not depend on the clock.
const (
	fixedDate = 1<<5 | 1
	fixedTime = 0
)

// Write writes a deterministic wheel named filename (a wheel file name,
// from which the dist-info directory "<distribution>-<version>.dist-info"
// is derived as written) holding files and a generated RECORD.
//
// The output depends only on the inputs: members sorted by name with the
// dist-info members last and RECORD the very last, every timestamp
// 1980-01-01 00:00:00, Unix modes, no extra fields, and members STORED
// (uncompressed), so the bytes do not change with the Go release's
// deflate. RECORD lists every file with "sha256=<urlsafe b64 nopad>" and
// its size, and itself as "RECORD,,".
//
// files must include the dist-info's WHEEL and METADATA and must not
// include RECORD; names must be safe (see Open) and unique. A fault in
// the inputs is refusal.WheelInvalid (refusal.WheelUnsafePath for a bad
// name); nothing is written then.
func Write(w io.Writer, filename string, files []Entry) error {
	name, err := ParseFilename(filename)
	if err != nil {
		return err
	}
	distInfo := name.Distribution + "-" + name.Version + ".dist-info"
	members := make([]member, 0, len(files))
	for _, f := range files {
		mode := f.Mode & fs.ModePerm
		if mode == 0 {
			mode = 0o644
		}
		members = append(members, member{name: f.Name, mode: mode, data: f.Data})
	}
	return writeMembers(w, distInfo, members)
}

// member is one file to write: either data (stored) or a raw zip member
// copied as it is.
type member struct {
	name string
	mode fs.FileMode
	data []byte
	raw  *zip.File // when set, copied with its compression
	sum  digest.Digest
	size int64
}

// writeMembers sorts, checks and writes members plus a generated RECORD.
func writeMembers(w io.Writer, distInfo string, members []member) error {
	record := distInfo + "/RECORD"
	seen := map[string]bool{}
	for _, m := range members {
		if err := checkMemberName(m.name); err != nil {
			return err
		}
		if strings.HasSuffix(m.name, "/") {
			return refusal.New(refusal.WheelInvalid, "entry %q is a directory; write files only", m.name)
		}
		if seen[m.name] {
			return refusal.New(refusal.WheelInvalid, "entry %q given twice", m.name)
		}
		seen[m.name] = true
		if m.name == record {
			return refusal.New(refusal.WheelInvalid, "entry %q: RECORD is generated, do not pass it", m.name)
		}
	}
	for _, need := range []string{"WHEEL", "METADATA"} {
		if !seen[distInfo+"/"+need] {
			return refusal.New(refusal.WheelInvalid, "no %s/%s among the entries; a wheel needs it", distInfo, need)
		}
	}
	inDist := func(n string) bool { return strings.HasPrefix(n, distInfo+"/") }
	slices.SortFunc(members, func(a, b member) int {
		if da, db := inDist(a.name), inDist(b.name); da != db {
			if da {
				return 1
			}
			return -1
		}
		return strings.Compare(a.name, b.name)
	})

	zw := zip.NewWriter(w)
	var lines []recordLine
	for i := range members {
		m := &members[i]
		if err := writeMember(zw, m); err != nil {
			return err
		}
		lines = append(lines, recordLine{path: m.name, hash: m.sum, size: m.size})
	}
	lines = append(lines, recordLine{path: record, size: -1})
	rec := member{name: record, mode: 0o644, data: formatRecord(lines)}
	if err := writeMember(zw, &rec); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return refusal.Wrap(refusal.WheelInvalid, err, "cannot finish the wheel archive")
	}
	return nil
}

// writeMember writes one member with a fixed header: stored data, or the
// raw bytes of a source member (whose sum and size the caller verified).
func writeMember(zw *zip.Writer, m *member) error {
	fh := &zip.FileHeader{
		Name:           m.name,
		ReaderVersion:  20,
		CreatorVersion: 20,
		ModifiedDate:   fixedDate,
		ModifiedTime:   fixedTime,
	}
	fh.SetMode(m.mode)
	if !isASCII(m.name) {
		fh.Flags |= 0x800 // name is UTF-8
	}
	src := io.Reader(nil)
	if m.raw != nil {
		fh.Method = m.raw.Method
		fh.CRC32 = m.raw.CRC32
		fh.CompressedSize64 = m.raw.CompressedSize64
		fh.UncompressedSize64 = m.raw.UncompressedSize64
		r, err := m.raw.OpenRaw()
		if err != nil {
			return refusal.Wrap(refusal.WheelInvalid, err, "cannot read %q from the source wheel", m.name)
		}
		src = r
	} else {
		fh.Method = zip.Store
		fh.CRC32 = crc32.ChecksumIEEE(m.data)
		fh.CompressedSize64 = uint64(len(m.data))
		fh.UncompressedSize64 = uint64(len(m.data))
		sum := sha256.Sum256(m.data)
		m.sum, m.size = digest.FromBytes(sum[:]), int64(len(m.data))
		src = bytes.NewReader(m.data)
	}
	fw, err := zw.CreateRaw(fh)
	if err != nil {
		return refusal.Wrap(refusal.WheelInvalid, err, "cannot write %q", m.name)
	}
	if _, err := io.Copy(fw, src); err != nil {
		return refusal.Wrap(refusal.WheelInvalid, err, "cannot write %q", m.name)
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Rewrite writes src to w with the dist-info files in replace added or
// replaced (keys are member paths inside src.DistInfo(), values their new
// content, written stored with mode 0644) and RECORD regenerated. Every
// other member keeps its bytes (copied raw, with its compression) and its
// mode, after src is verified in full against its RECORD: a tampered
// wheel is refused, never laundered into a fresh RECORD. Members are
// ordered as Write orders them, with the same fixed timestamps, so the
// same inputs give the same bytes. The signature files RECORD.jws and
// RECORD.p7s are dropped: they sign the old RECORD. Directory entries
// are dropped too (installers create directories as needed).
func Rewrite(ctx context.Context, w io.Writer, src *Wheel, replace map[string][]byte) error {
	if err := src.Verify(ctx); err != nil {
		return err
	}
	prefix := src.distInfo + "/"
	record := prefix + "RECORD"
	var members []member
	for name := range replace {
		if !strings.HasPrefix(name, prefix) || name == record || name == record+".jws" || name == record+".p7s" {
			return refusal.New(refusal.WheelInvalid, "cannot replace %q: only files inside %s other than RECORD and its signatures", name, src.distInfo)
		}
	}
	for i, f := range src.files {
		if _, ok := replace[f.Name]; ok || f.Name == record || f.Name == record+".jws" || f.Name == record+".p7s" {
			continue
		}
		members = append(members, member{name: f.Name, mode: modeOr644(f.Mode), raw: src.zfiles[i], sum: f.SHA256, size: f.Size})
	}
	for name, data := range replace {
		members = append(members, member{name: name, mode: 0o644, data: data})
	}
	return writeMembers(w, src.distInfo, members)
}

func modeOr644(m fs.FileMode) fs.FileMode {
	if m == 0 {
		return 0o644
	}
	return m
}
