package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"path"
	"strings"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/wheel"
)

// FetchRoot downloads a provider's root wheel name==version from the
// pinned index c: the file the index lists for that name and version
// whose bytes hash to sum (only those bytes are accepted, whatever else
// the index lists). It returns the bytes and the file name. Refusals:
// offline_miss without an index, hash_missing without a sha256,
// fetch_failed when no listed wheel has those bytes. install and image
// build take NAME==VERSION --sha256 HEX through it.
func FetchRoot(ctx context.Context, c *index.Client, name, version string, sum digest.Digest) ([]byte, string, error) {
	if c == nil {
		// The store keeps wheels by content, not by the file name the
		// index published, which the image's provenance records: offline,
		// the root wheel is given as its file.
		return nil, "", refusal.New(refusal.OfflineMiss, "%s==%s is fetched from the index only, and an offline install has none: give the root wheel as its file (%s-%s-….whl, sha256 %s) instead of NAME==VERSION", name, version, strings.ReplaceAll(name, "-", "_"), version, sum.Hex())
	}
	if sum.IsZero() {
		return nil, "", refusal.New(refusal.HashMissing, "%s==%s: give the root wheel's sha256, so that only those bytes install", name, version)
	}
	proj, err := c.Project(ctx, name)
	if err != nil {
		return nil, "", err
	}
	var listed []string
	for _, f := range proj.Files {
		fn, err := wheel.ParseFilename(f.Filename)
		if err != nil || fn.Name != proj.Name {
			continue
		}
		listed = append(listed, f.Filename)
		if fn.Version != version {
			continue
		}
		if h := f.Hashes["sha256"]; h != "" && h != sum.Hex() {
			continue
		}
		b, err := downloadRoot(ctx, c, f, sum)
		if err != nil {
			return nil, "", err
		}
		if b == nil {
			continue // other bytes, and the page listed no sha256 for them: another file may be the one
		}
		return b, path.Base(f.Filename), nil
	}
	return nil, "", refusal.New(refusal.FetchFailed, "the index %s lists no wheel of %s %s with sha256 %s (wheels of %s it lists: %d)", index.Redact(c.BaseURL()), name, version, sum, proj.Name, len(listed))
}

// maxRoot bounds a root wheel fetched as NAME==VERSION: its bytes are
// held in memory, and a hostile index must not make that unbounded.
const maxRoot = 1 << 30

// rootAttempts and rootBackoff are the fetch's: transient failures of
// the root's download are retried as any wheel's (docs/index.md).
const (
	rootAttempts = 4
	rootBackoff  = 250 * time.Millisecond
)

// downloadRoot downloads the root wheel candidate f, retrying transport
// failures. It returns nil bytes when they are not sum's and the page
// listed no sha256 for f (another candidate may be the one); other bytes
// than the sha256 the page listed is hash_mismatch.
func downloadRoot(ctx context.Context, c *index.Client, f index.File, sum digest.Digest) ([]byte, error) {
	delay := rootBackoff
	var last error
	for attempt := 1; attempt <= rootAttempts; attempt++ {
		b, got, err := readRoot(ctx, c, f, sum)
		if err == nil {
			if got != sum {
				if f.Hashes["sha256"] == sum.Hex() {
					return nil, refusal.New(refusal.HashMismatch, "%s from %s: got %s, but the index lists it with sha256 %s, the sha256 pinned; the index serves other bytes than it lists", f.Filename, index.Redact(f.URL), got, sum)
				}
				return nil, nil
			}
			return b, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if refusal.CodeOf(err) != "" {
			return nil, err
		}
		if !index.Retryable(err) {
			return nil, refusal.Wrap(refusal.FetchFailed, err, "downloading %s from %s", f.Filename, index.Redact(f.URL))
		}
		last = err
		if attempt < rootAttempts {
			wait := index.RetryDelay(err, delay)
			c.Emit(index.Event{Kind: index.EventRetry, URL: index.Redact(f.URL), Attempt: attempt, Attempts: rootAttempts, Wait: wait, Err: err})
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
			delay *= 2
		}
	}
	return nil, refusal.Wrap(refusal.FetchFailed, last, "downloading %s from %s failed %d times; check the index and retry", f.Filename, index.Redact(f.URL), rootAttempts)
}

// readRoot reads one download of f, at most maxRoot bytes, and returns
// them with their digest; bytes that are not sum's are dropped unjoined,
// so a hostile body costs at most maxRoot of memory. Memory grows with
// the bytes received, a chunk at a time, and they are hashed as they
// come: a length the index declares is a bound (over maxRoot is refused
// before a byte is read), never an allocation, so an index that declares
// 1 GiB and sends nothing costs nothing. The bytes stay in memory, not a
// temp file: install and image build take the root wheel as bytes (a
// --wheel file is read whole too), and maxRoot bounds them.
func readRoot(ctx context.Context, c *index.Client, f index.File, sum digest.Digest) ([]byte, digest.Digest, error) {
	rc, n, err := c.Open(ctx, f)
	if err != nil {
		return nil, digest.Digest{}, err
	}
	defer rc.Close()
	tooBig := refusal.New(refusal.FetchFailed, "%s from %s is larger than %d bytes, more than a root wheel fetched as NAME==VERSION may be; download it and give it as its file", f.Filename, index.Redact(f.URL), int64(maxRoot))
	if n > maxRoot {
		return nil, digest.Digest{}, tooBig
	}
	// One path for a declared length and none: the transport holds a
	// body to its declared length, and one cut short of it is an
	// unexpected EOF (retried), whatever was declared.
	h := sha256.New()
	var chunks [][]byte
	var total int64
	for {
		chunk := make([]byte, rootChunk)
		k, err := io.ReadFull(rc, chunk)
		total += int64(k)
		if total > maxRoot {
			return nil, digest.Digest{}, tooBig
		}
		h.Write(chunk[:k])
		chunks = append(chunks, chunk[:k])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, digest.Digest{}, err
		}
	}
	got := digest.FromBytes(h.Sum(nil))
	if got != sum {
		return nil, got, nil
	}
	return bytes.Join(chunks, nil), got, nil
}

// rootChunk is how much readRoot allocates ahead of the bytes received.
const rootChunk = 1 << 20
