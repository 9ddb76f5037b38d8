package pipeline

import (
	"context"
	"io"
	"path"
	"strings"

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
		return nil, "", refusal.New(refusal.OfflineMiss, "%s==%s is fetched from the index only, and --offline has none: give the root wheel as its file (%s-%s-….whl, sha256 %s) instead of NAME==VERSION", name, version, strings.ReplaceAll(name, "-", "_"), version, sum.Hex())
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
		rc, _, err := c.Open(ctx, f)
		if err != nil {
			return nil, "", err
		}
		b, err := io.ReadAll(io.LimitReader(rc, 1<<30))
		rc.Close()
		if err != nil {
			return nil, "", refusal.Wrap(refusal.FetchFailed, err, "downloading %s from %s", f.Filename, index.Redact(f.URL))
		}
		if digest.Sum(b) != sum {
			continue
		}
		return b, path.Base(f.Filename), nil
	}
	return nil, "", refusal.New(refusal.FetchFailed, "the index %s lists no wheel of %s %s with sha256 %s (wheels of %s it lists: %d)", index.Redact(c.BaseURL()), name, version, sum, proj.Name, len(listed))
}
