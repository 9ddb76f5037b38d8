package wheel

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"

	"github.com/cruxible/cruxprov/internal/verifying"
	"github.com/cruxible/cruxprov/refusal"
)

// MemberReader streams one member and verifies it against its RECORD line
// (with internal/verifying's reader, the one every verified copy in
// cruxprov goes through): it never yields more than the declared size,
// and at the end of the member returns a *refusal.Error instead of io.EOF
// when the size or the sha256 differs (record_mismatch). A member without
// a RECORD hash is refused (record_missing) at its first Read, except
// RECORD itself and the signature files RECORD.jws and RECORD.p7s of a
// File that Open returned, which the wheel spec exempts: their size alone
// is checked. Errors are sticky.
type MemberReader struct {
	ctx context.Context // nil: not checked
	f   File
	v   *verifying.Reader
	zm  *zipMember // nil when the bytes do not come from the archive
	err error
}

// OpenMember returns a verifying reader of zf, the archive member that f
// describes (the File from Files or Extract of the same archive, opened
// here through another zip.Reader of it, say, to read several members at
// once). A zip header whose size is not f's is refused (record_mismatch).
// The caller closes the reader.
func OpenMember(zf *zip.File, f File) (*MemberReader, error) {
	if zf.UncompressedSize64 != uint64(f.Size) {
		return nil, refusal.New(refusal.RecordMismatch, "%q is %d bytes in the zip and %d in RECORD; %s", f.Name, zf.UncompressedSize64, f.Size, changed)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, refusal.Wrap(refusal.WheelInvalid, err, "cannot open %q in the archive; fetch the wheel again", f.Name)
	}
	zm := &zipMember{rc: rc}
	m := NewMemberReader(zm, f)
	m.zm = zm
	return m, nil
}

// NewMemberReader returns a reader of r, another copy of member f's bytes
// (an unpacked cache of the wheel), verified as OpenMember's is.
func NewMemberReader(r io.Reader, f File) *MemberReader {
	m := &MemberReader{f: f}
	if f.unhashed {
		m.v = verifying.NewUnhashed(r, f.Size)
	} else if m.v, m.err = verifying.NewReader(r, verifying.Want{SHA256: f.SHA256, Size: f.Size}); m.err != nil {
		m.err = refusal.Wrap(refusal.RecordMissing, verifying.ErrHashMissing, "%q has no RECORD hash; rebuild the wheel", f.Name)
	}
	return m
}

// Read implements io.Reader.
func (m *MemberReader) Read(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	if m.ctx != nil {
		if err := m.ctx.Err(); err != nil {
			m.err = err
			return 0, err
		}
	}
	n, err := m.v.Read(p)
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF && m.zm != nil && m.zm.crc != nil:
		// The bytes are RECORD's, but the zip's own CRC disagrees.
		m.err = refusal.Wrap(refusal.WheelInvalid, m.zm.crc, "%q fails the zip's CRC check; fetch the wheel again", m.f.Name)
		return 0, m.err
	case err == io.EOF:
		m.err = io.EOF
		return n, io.EOF
	}
	m.err = m.refuse(err)
	return 0, m.err
}

// refuse names the member in a failure of the verifying reader.
func (m *MemberReader) refuse(err error) error {
	var e *verifying.Error
	switch {
	// Each detail says the mismatch once: where the cause's own text
	// ("got sha256:…, want sha256:…") was not in it, it followed the
	// detail, the same hashes said twice.
	case errors.As(err, &e) && e.Over():
		return refusal.Wrap(refusal.RecordMismatch, e, "%q inflates past its declared %d bytes: %v; %s", m.f.Name, m.f.Size, e, changed)
	case errors.Is(err, errInflates):
		return refusal.Wrap(refusal.RecordMismatch, err, "%q inflates past its declared %d bytes; %s", m.f.Name, m.f.Size, changed)
	case e != nil && e.SizeDiffers():
		return refusal.Wrap(refusal.RecordMismatch, e, "%q: %v (RECORD's); %s", m.f.Name, e, changed)
	case e != nil:
		return refusal.Wrap(refusal.RecordMismatch, e, "%q: %v (RECORD's); %s", m.f.Name, e, changed)
	case refusal.CodeOf(err) != "":
		return err
	}
	return refusal.Wrap(refusal.WheelInvalid, err, "cannot read %q from the archive; fetch the wheel again", m.f.Name)
}

// Verified reports whether the member was read to its end and matched
// RECORD.
func (m *MemberReader) Verified() bool { return m.err == io.EOF }

// Close releases the member's decompressor (a no-op for NewMemberReader).
func (m *MemberReader) Close() error {
	if m.zm == nil {
		return nil
	}
	return m.zm.rc.Close()
}

// errInflates is archive/zip's refusal of a member that inflates past its
// header's size, which Open held equal to RECORD's.
var errInflates = errors.New("the member inflates past its declared size")

// zipMember adapts archive/zip's member reader to the verifying reader:
// zip's own size and CRC checks end the stream as io.EOF, so that the
// size and the sha256 are what decide (a short member is a size
// mismatch, not a zip error); a CRC failure is kept for the end, and an
// overrun (zip stops it with ErrFormat) is reported as one.
type zipMember struct {
	rc  io.ReadCloser
	crc error
}

func (z *zipMember) Read(p []byte) (int, error) {
	n, err := z.rc.Read(p)
	switch {
	case err == nil, err == io.EOF:
	case errors.Is(err, zip.ErrChecksum):
		z.crc = err
		err = io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = io.EOF
	case errors.Is(err, zip.ErrFormat):
		err = errInflates
	}
	return n, err
}

// open returns a verifying reader for files[i].
func (w *Wheel) open(ctx context.Context, i int) (*MemberReader, error) {
	m, err := OpenMember(w.zfiles[i], w.files[i])
	if err != nil {
		return nil, Named(w.name.String(), err)
	}
	m.ctx = ctx
	return m, nil
}

// readMember reads files[i] whole, verified.
func (w *Wheel) readMember(ctx context.Context, i int) ([]byte, error) {
	v, err := w.open(ctx, i)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	var buf bytes.Buffer
	buf.Grow(int(min(w.files[i].Size, 1<<20))) // the size is declared, not yet true
	if _, err := io.Copy(&buf, v); err != nil {
		return nil, Named(w.name.String(), err)
	}
	return buf.Bytes(), nil
}

func nilContext() context.Context { return context.Background() }

// ReadFile returns the verified bytes of the member name, a path in the
// archive ("flask-3.1.3.dist-info/cruxible/provider.toml"). A name the
// wheel lacks is an error wrapping fs.ErrNotExist (a *fs.PathError);
// files larger than 64 MiB are refused as refusal.WheelInvalid (use
// Extract for those).
func (w *Wheel) ReadFile(name string) ([]byte, error) {
	i, ok := w.byName[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if w.files[i].Size > maxMetaFile {
		return nil, refusal.New(refusal.WheelInvalid, "%q is %d bytes, more than ReadFile's %d", name, w.files[i].Size, maxMetaFile)
	}
	return w.readMember(nilContext(), i)
}

// Verify streams every member and checks it against RECORD, writing
// nothing; the first fault is returned.
func (w *Wheel) Verify(ctx context.Context) error {
	return w.Extract(ctx, func(File, io.Reader) error { return nil })
}

// Extract calls fn for every regular member, in archive order, with a
// reader of its bytes (a *MemberReader). The reader yields at most the
// declared size and ends with a *refusal.Error instead of io.EOF when the
// bytes differ from RECORD, so a caller that copies until io.EOF holds a
// verified file. Whatever fn leaves unread is read and checked after it
// returns: a member's fault is returned even when fn stopped early. The
// bytes fn sees before the end of a member are unverified: a caller
// writing them must discard its output when Extract returns an error.
//
// Extract stops at the first error, from fn, from verification, or from
// ctx.
func (w *Wheel) Extract(ctx context.Context, fn func(File, io.Reader) error) error {
	for i := range w.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		v, err := w.open(ctx, i)
		if err != nil {
			return err
		}
		err = fn(w.files[i], v)
		if err == nil && !v.Verified() {
			_, err = io.Copy(io.Discard, v)
		}
		v.Close()
		if err != nil {
			return Named(w.name.String(), err)
		}
	}
	return nil
}

// Named returns err with the wheel's file name before its detail, when
// err is a refusal of the wheel's own (wheel_invalid, wheel_unsafe_path,
// record_missing, record_mismatch) whose detail does not name it yet: a
// member's fault ("RECORD says "pkg/mod.py" is 783 bytes…") did not say
// which wheel of an env's dozens it was in. Any other error is returned
// as it is, and so is a refusal wrapped in another error (a damaged cache
// entry's, which is not the wheel's fault).
func Named(filename string, err error) error {
	r, ok := err.(*refusal.Error)
	if !ok || filename == "" || strings.Contains(r.Detail, filename) {
		return err
	}
	switch r.Code {
	case refusal.WheelInvalid, refusal.WheelUnsafePath, refusal.RecordMissing, refusal.RecordMismatch:
	default:
		return err
	}
	n := *r
	n.Detail = filename + ": " + r.Detail
	return &n
}

// changed is what a member that is not what RECORD says says to do: the
// wheel's bytes are not those its build wrote (tampered with, or edited
// by hand after the build), so nothing of it may be used.
const changed = "the wheel was changed after it was built (tampered with, or a file edited in it by hand): do not install it; rebuild it from its source"
