package image

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cruxible/cruxprov/refusal"
)

// verifyReader reads rc, at most size bytes (size < 0: any), hashing
// them, and returns an image_digest_mismatch refusal instead of io.EOF
// when what was read is not want (or not size bytes long): a blob read
// from a layout or a registry is never trusted to be what its name says.
func verifyReader(rc io.ReadCloser, want v1.Hash, size int64) io.ReadCloser {
	return &verifying{rc: rc, want: want, size: size, h: sha256.New()}
}

type verifying struct {
	rc   io.ReadCloser
	want v1.Hash
	size int64
	n    int64
	h    hash.Hash
	err  error
}

func (v *verifying) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.size >= 0 && int64(len(p)) > v.size-v.n+1 {
		p = p[:v.size-v.n+1]
	}
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.size >= 0 && v.n > v.size {
		v.err = refusal.New(refusal.ImageDigestMismatch, "blob %s is longer than its %d bytes", v.want, v.size)
		return 0, v.err
	}
	if errors.Is(err, io.EOF) {
		got := hex.EncodeToString(v.h.Sum(nil))
		switch {
		case v.want.Algorithm != "sha256":
			v.err = refusal.New(refusal.ImageDigestMismatch, "blob %s: only sha256 digests are accepted", v.want)
		case got != v.want.Hex:
			v.err = refusal.New(refusal.ImageDigestMismatch, "blob %s hashes to sha256:%s", v.want, got)
		case v.size >= 0 && v.n != v.size:
			v.err = refusal.New(refusal.ImageDigestMismatch, "blob %s has %d bytes, not %d", v.want, v.n, v.size)
		default:
			v.err = io.EOF
		}
		return n, v.err
	}
	return n, err
}

func (v *verifying) Close() error { return v.rc.Close() }

// checkBytes is the refusal for b not hashing to want.
func checkBytes(b []byte, want v1.Hash, what string) error {
	sum := sha256.Sum256(b)
	if want.Algorithm != "sha256" || hex.EncodeToString(sum[:]) != want.Hex {
		return refusal.New(refusal.ImageDigestMismatch, "%s %s hashes to sha256:%x", what, want, sum)
	}
	return nil
}
