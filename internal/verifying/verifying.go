// Package verifying owns the one reader that checks bytes while they
// stream (STYLE #7, after go-containerregistry's internal/verify): it
// hashes what it yields, never yields more than the expected size, and
// where its source ends returns a refusal instead of io.EOF when the
// bytes are not the expected ones. Every verified copy in cruxprov reads
// through it: a wheel's members against RECORD (wheel/, and
// materialize/ through wheel.MemberReader, from the archive or the
// unpacked-wheel cache), blobs written to the store (store.Write, which
// fetch/ streams downloads into) and blobs rehashed when opened from it
// (store.OpenVerified, store.Check).
//
// The one rule: bytes are verified against a sha256 and, when known, a
// size. Bytes without a sha256 are refused (hash_missing) when the reader
// is made. The only bytes read without one are those a specification
// exempts from hashing (a wheel's RECORD and its signature files), whose
// owner asks for that by name (NewUnhashed) and gets the size check alone.
//
// It does not know where bytes come from or what they are: a caller that
// needs another code or wording (record_mismatch for a wheel member)
// finds the *Error in the refusal's chain with errors.As and names the
// bytes itself.
package verifying

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// SizeUnknown is Want.Size when the size is not known.
const SizeUnknown int64 = -1

// Want is what the bytes must be.
type Want struct {
	// SHA256 is their digest; required.
	SHA256 digest.Digest
	// Size is their exact length in bytes, or SizeUnknown.
	Size int64
	// Max bounds the length when Size is SizeUnknown (0: no bound), so
	// that a source that sends without end is cut off.
	Max int64
}

// limit is the most bytes that may be yielded, or -1 for no bound.
func (w Want) limit() int64 {
	switch {
	case w.Size >= 0:
		return w.Size
	case w.Max > 0:
		return w.Max
	}
	return -1
}

// Error is a mismatch: the bytes read are not those wanted. It is the
// cause a Reader's refusal wraps.
type Error struct {
	// Want is what was expected (a zero SHA256 for a size-only check).
	Want Want
	// Got is the sha256 of the bytes read; zero when they were not read
	// to the end (too many) or were not hashed.
	Got digest.Digest
	// GotSize is how many bytes were read; one more than the bound when
	// the source had more.
	GotSize int64
}

// Over reports whether the source had more bytes than the bound.
func (e *Error) Over() bool {
	l := e.Want.limit()
	return l >= 0 && e.GotSize > l
}

// SizeDiffers reports whether the mismatch is one of size (too many
// bytes, or not as many as Want.Size); else it is one of hash.
func (e *Error) SizeDiffers() bool {
	return e.Over() || e.Want.Size >= 0 && e.GotSize != e.Want.Size
}

// Code is the refusal code of the mismatch: size_mismatch or
// hash_mismatch.
func (e *Error) Code() refusal.Code {
	if e.SizeDiffers() {
		return refusal.SizeMismatch
	}
	return refusal.HashMismatch
}

func (e *Error) Error() string {
	switch {
	case e.Over() && e.Want.Size < 0:
		return fmt.Sprintf("got more than %d bytes, the bound when no size is given", e.Want.Max)
	case e.Over():
		return fmt.Sprintf("got more than %d bytes, want %d", e.Want.Size, e.Want.Size)
	case e.SizeDiffers():
		return fmt.Sprintf("got %d bytes, want %d", e.GotSize, e.Want.Size)
	}
	return fmt.Sprintf("got %s, want %s", e.Got, e.Want.SHA256)
}

// ErrHashMissing is the cause of the refusal NewReader returns for a Want
// without a sha256.
var ErrHashMissing = errors.New("no sha256 to verify against")

// Reader yields the bytes of its source while hashing them. It never
// yields more than the bound (Want.Size, or Want.Max), and where the
// source ends it returns io.EOF only when the size and the sha256 are
// those wanted; otherwise a *refusal.Error (size_mismatch or
// hash_mismatch) wrapping an *Error. The bytes yielded before the end are
// unverified: a caller writing them discards its output on any error.
// An error of the source is returned as it is. Errors are sticky.
type Reader struct {
	r    io.Reader
	want Want
	h    hash.Hash // nil for NewUnhashed
	n    int64
	err  error
}

// NewReader returns a Reader of r that verifies its bytes against want.
// A want without a sha256 is refused: the refusal (hash_missing, wrapping
// ErrHashMissing) is returned, and no reader.
func NewReader(r io.Reader, want Want) (*Reader, error) {
	if want.SHA256.IsZero() {
		return nil, refusal.Wrap(refusal.HashMissing, ErrHashMissing, "the bytes have no sha256")
	}
	return &Reader{r: r, want: want, h: sha256.New()}, nil
}

// NewUnhashed returns a Reader of r that checks the size alone (size may
// not be SizeUnknown). It exists for the bytes a specification exempts
// from hashing (a wheel's RECORD and its signature files), and for them
// only.
func NewUnhashed(r io.Reader, size int64) *Reader {
	if size < 0 {
		return &Reader{err: refusal.Wrap(refusal.HashMissing, ErrHashMissing, "the bytes have neither a sha256 nor a size")}
	}
	return &Reader{r: r, want: Want{Size: size}}
}

// Check verifies b, all of the bytes, against want, as a Reader that read
// them would at its end: nil, or the same refusals.
func Check(b []byte, want Want) error {
	if want.SHA256.IsZero() {
		return refusal.Wrap(refusal.HashMissing, ErrHashMissing, "the bytes have no sha256")
	}
	v := &Reader{want: want, n: int64(len(b)), h: sha256.New()}
	v.h.Write(b)
	return v.end()
}

// N returns how many bytes were yielded.
func (v *Reader) N() int64 { return v.n }

// Verified reports whether the source ended with the bytes wanted.
func (v *Reader) Verified() bool { return v.err == io.EOF }

func (v *Reader) refuse(e *Error) error {
	v.err = refusal.Wrap(e.Code(), e, "the bytes are not those expected")
	return v.err
}

// end checks what was read once the source ended.
func (v *Reader) end() error {
	e := &Error{Want: v.want, GotSize: v.n}
	if v.h != nil {
		e.Got = digest.FromBytes(v.h.Sum(nil))
	}
	if e.SizeDiffers() || v.h != nil && e.Got != v.want.SHA256 {
		return v.refuse(e)
	}
	v.err = io.EOF
	return nil
}

// Read implements io.Reader.
func (v *Reader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	limit := v.want.limit()
	if limit >= 0 {
		// At most one byte past the bound: enough to see a source that
		// has more.
		if rest := limit - v.n + 1; int64(len(p)) > rest {
			p = p[:rest]
		}
	}
	n, err := v.r.Read(p)
	if limit >= 0 && v.n+int64(n) > limit {
		return 0, v.refuse(&Error{Want: v.want, GotSize: limit + 1})
	}
	if v.h != nil {
		v.h.Write(p[:n])
	}
	v.n += int64(n)
	switch err {
	case nil:
		return n, nil
	case io.EOF:
		if err := v.end(); err != nil {
			return 0, err
		}
		return n, io.EOF
	}
	v.err = err
	return n, err
}
