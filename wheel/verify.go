package wheel

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"io/fs"

	"github.com/cruxible/cruxprov/refusal"
)

// verifier streams one member: it never yields more than the declared
// size, hashes what it yields, and at the end of the member returns a
// refusal instead of io.EOF when the size or the RECORD hash differs.
type verifier struct {
	ctx  context.Context
	f    File
	rc   io.ReadCloser
	h    hash.Hash
	n    int64
	err  error
	done bool
}

func (v *verifier) fail(err error) (int, error) {
	v.err = err
	return 0, err
}

// Read implements io.Reader.
func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if err := v.ctx.Err(); err != nil {
		v.err = err
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	// Ask for at most one byte past the declared size, enough to see a
	// member that inflates further.
	if rest := v.f.Size - v.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := v.rc.Read(p)
	// archive/zip itself returns (0, ErrFormat) once the stream passes the
	// header's size, which equals RECORD's: that is the same overrun.
	if v.n+int64(n) > v.f.Size || errors.Is(err, zip.ErrFormat) && v.n+int64(len(p)) > v.f.Size {
		return v.fail(refusal.New(refusal.RecordMismatch, "%q inflates past its declared %d bytes; treat the wheel as tampered, nothing of it may be used", v.f.Name, v.f.Size))
	}
	v.h.Write(p[:n])
	v.n += int64(n)
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF, errors.Is(err, zip.ErrChecksum), errors.Is(err, io.ErrUnexpectedEOF):
		if v.n != v.f.Size {
			return v.fail(refusal.New(refusal.RecordMismatch, "%q has %d bytes, RECORD says %d; treat the wheel as tampered", v.f.Name, v.n, v.f.Size))
		}
		if !v.f.SHA256.IsZero() {
			if got := hex.EncodeToString(v.h.Sum(nil)); got != v.f.SHA256.Hex() {
				return v.fail(refusal.New(refusal.RecordMismatch, "%q has sha256 %s, RECORD says %s; treat the wheel as tampered", v.f.Name, got, v.f.SHA256.Hex()))
			}
		}
		if err != io.EOF {
			return v.fail(refusal.Wrap(refusal.WheelInvalid, err, "%q fails the zip's CRC check; fetch the wheel again", v.f.Name))
		}
		v.done = true
		v.err = io.EOF
		return n, io.EOF
	default:
		return v.fail(refusal.Wrap(refusal.WheelInvalid, err, "cannot read %q from the archive; fetch the wheel again", v.f.Name))
	}
}

// open returns a verifying reader for files[i].
func (w *Wheel) open(ctx context.Context, i int) (*verifier, error) {
	rc, err := w.zfiles[i].Open()
	if err != nil {
		return nil, refusal.Wrap(refusal.WheelInvalid, err, "cannot open %q in the archive; fetch the wheel again", w.files[i].Name)
	}
	return &verifier{ctx: ctx, f: w.files[i], rc: rc, h: sha256.New()}, nil
}

// readMember reads files[i] whole, verified.
func (w *Wheel) readMember(ctx context.Context, i int) ([]byte, error) {
	v, err := w.open(ctx, i)
	if err != nil {
		return nil, err
	}
	defer v.rc.Close()
	var buf bytes.Buffer
	buf.Grow(int(min(w.files[i].Size, 1<<20))) // the size is declared, not yet true
	if _, err := io.Copy(&buf, v); err != nil {
		return nil, err
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
// reader of its bytes. The reader yields at most the declared size and
// ends with a *refusal.Error instead of io.EOF when the bytes differ from
// RECORD, so a caller that copies until io.EOF holds a verified file.
// Whatever fn leaves unread is read and checked after it returns: a
// member's fault is returned even when fn stopped early. The bytes fn sees
// before the end of a member are unverified: a caller writing them must
// discard its output when Extract returns an error.
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
		if err == nil && !v.done {
			_, err = io.Copy(io.Discard, v)
		}
		v.rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
