package materialize

import (
	"archive/zip"
	"io"

	"github.com/cruxible/cruxprov/wheel"
)

// The wheel package verifies members while Extract streams them in archive
// order, one at a time. To install the members of one wheel on several
// cores at once, the installer opens the same archive's members by name
// (the names wheel.Open checked) and verifies each stream with the wheel
// package's own reader (wheel.MemberReader): never more than the declared
// size, and at the end of the member a refusal instead of io.EOF when the
// size or the RECORD hash differs, or the member has no RECORD hash.

// memberReader streams one member verified against its RECORD line, and
// may copy the bytes it yields into the unpacked cache entry being written.
type memberReader struct {
	r   *wheel.MemberReader
	n   int64
	err error

	tee    *teeFile // when set, the bytes read are also written here at teeOff
	teeOff int64
	cached string // when set, r reads this unpacked-cache entry, not the archive
}

func openMember(zf *zip.File, f wheel.File) (*memberReader, error) {
	r, err := wheel.OpenMember(zf, f)
	if err != nil {
		return nil, err
	}
	return &memberReader{r: r}, nil
}

// openCached streams member f from the unpacked-cache entry of slot s,
// verified the same way.
func openCached(s *cacheSlot, f wheel.File) *memberReader {
	r := io.NewSectionReader(s.src, s.offsets[f.Name], f.Size)
	return &memberReader{r: wheel.NewMemberReader(r, f), cached: s.path}
}

// Read implements io.Reader.
func (m *memberReader) Read(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	n, err := m.r.Read(p)
	if m.tee != nil && n > 0 {
		m.tee.writeAt(p[:n], m.teeOff+m.n)
	}
	m.n += int64(n)
	if err != nil && err != io.EOF && m.cached != "" {
		// The archive was not read: the cache is wrong, not the wheel.
		err = &cacheDamaged{entry: m.cached, err: err}
	}
	m.err = err
	return n, err
}

// Close releases the member's decompressor.
func (m *memberReader) Close() error { return m.r.Close() }
