package materialize

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/wheel"
)

// The wheel package verifies members while Extract streams them in archive
// order, one at a time. To install the members of one wheel on several
// cores at once, the installer opens the same archive's members by name
// (the names wheel.Open checked) and verifies each stream itself, the same
// way: never more than the declared size, and at the end of the member a
// refusal instead of io.EOF when the size or the RECORD hash differs.

// memberReader streams one member and verifies it against its RECORD line.
type memberReader struct {
	f   wheel.File
	rc  io.ReadCloser
	h   hash.Hash
	n   int64
	err error

	tee    *teeFile // when set, the bytes read are also written here at teeOff
	teeOff int64
	cached string // when set, rc reads this unpacked-cache entry, not the archive
}

func openMember(zf *zip.File, f wheel.File) (*memberReader, error) {
	if zf.UncompressedSize64 != uint64(f.Size) {
		return nil, refusal.New(refusal.RecordMismatch, "%q is %d bytes in the zip and %d in RECORD; treat the wheel as tampered", f.Name, zf.UncompressedSize64, f.Size)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, refusal.Wrap(refusal.WheelInvalid, err, "cannot open %q in the archive; fetch the wheel again", f.Name)
	}
	return &memberReader{f: f, rc: rc, h: sha256.New()}, nil
}

// openCached streams member f from the unpacked-cache entry src (at off),
// verified the same way.
func openCached(s *cacheSlot, f wheel.File) *memberReader {
	r := io.NewSectionReader(s.src, s.offsets[f.Name], f.Size)
	return &memberReader{f: f, rc: io.NopCloser(r), h: sha256.New(), cached: s.path}
}

func (m *memberReader) fail(err error) (int, error) {
	if m.cached != "" {
		// The archive was not read: the cache is wrong, not the wheel.
		err = &cacheDamaged{entry: m.cached, err: err}
	}
	m.err = err
	return 0, err
}

// Read implements io.Reader.
func (m *memberReader) Read(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if rest := m.f.Size - m.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := m.rc.Read(p)
	if m.n+int64(n) > m.f.Size || errors.Is(err, zip.ErrFormat) && m.n+int64(len(p)) > m.f.Size {
		return m.fail(refusal.New(refusal.RecordMismatch, "%q inflates past its declared %d bytes; treat the wheel as tampered", m.f.Name, m.f.Size))
	}
	m.h.Write(p[:n])
	if m.tee != nil && n > 0 {
		m.tee.writeAt(p[:n], m.teeOff+m.n)
	}
	m.n += int64(n)
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF, errors.Is(err, zip.ErrChecksum), errors.Is(err, io.ErrUnexpectedEOF):
		if m.n != m.f.Size {
			return m.fail(refusal.New(refusal.RecordMismatch, "%q has %d bytes, RECORD says %d; treat the wheel as tampered", m.f.Name, m.n, m.f.Size))
		}
		if got := hex.EncodeToString(m.h.Sum(nil)); m.f.SHA256.IsZero() || got != m.f.SHA256.Hex() {
			return m.fail(refusal.New(refusal.RecordMismatch, "%q has sha256 %s, RECORD says %s; treat the wheel as tampered", m.f.Name, got, m.f.SHA256.Hex()))
		}
		if err != io.EOF {
			return m.fail(refusal.Wrap(refusal.WheelInvalid, err, "%q fails the zip's CRC check; fetch the wheel again", m.f.Name))
		}
		m.err = io.EOF
		return n, io.EOF
	default:
		return m.fail(refusal.Wrap(refusal.WheelInvalid, err, "cannot read %q from the archive; fetch the wheel again", m.f.Name))
	}
}

// Close releases the member's decompressor.
func (m *memberReader) Close() error { return m.rc.Close() }
