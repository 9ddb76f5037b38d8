package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/store"
)

// layerCache keeps the env layers a store's builds wrote
// (store.ImageLayersDir), so that a rebuild with nothing changed takes the
// layer instead of materializing and compressing the env again.
//
// An entry's key is a sha256 over everything the layer's bytes depend on:
// the local materialization digest of the env (the resolution, root wheel,
// platform, interpreter path and version, bytecode or not), the env's path
// in the image, the epoch, the gzip level and block size, and the sha256 of
// the running cruxprov executable (its installer and compressor). The entry
// is <key>.tar.gz and <key>.json (the layer's digests and size, and the
// seal it was built under), written after the layer is synced. A hit must
// have a seal of this format whose recomputed materialization digest is
// the planned one, whose interpreter (and libpython) still hash as sealed,
// and a layer file whose bytes hash to the recorded
// digest (and they are rehashed again wherever they are read:
// fileLayer.Compressed, the layout writer, a push). The entries are the store owner's data at the trust of
// the pyc cache; gc removes them all. The zero layerCache caches nothing.
type layerCache struct {
	dir, key string
	md       digest.Digest
}

type layerEntry struct {
	Digest v1.Hash         `json:"digest"`
	DiffID v1.Hash         `json:"diff_id"`
	Size   int64           `json:"size"`
	Seal   json.RawMessage `json:"seal"`
}

func newLayerCache(home string, md digest.Digest, epoch time.Time) layerCache {
	exe := executableDigest()
	if exe == "" || md.IsZero() {
		return layerCache{}
	}
	h := sha256.New()
	fmt.Fprintf(h, "cruxprov image env layer v1\nmaterialization %s\nenv %s\nepoch %d\ngzip %d %d\nexecutable %s\n",
		md, EnvPath, epoch.Unix(), GzipLevel, GzipBlock, exe)
	return layerCache{dir: filepath.Join(home, store.ImageLayersDir), key: hex.EncodeToString(h.Sum(nil)), md: md}
}

func (c layerCache) paths() (layer, entry string) {
	return filepath.Join(c.dir, c.key+".tar.gz"), filepath.Join(c.dir, c.key+".json")
}

// load is the cached layer and its seal, or nil, nil.
func (c layerCache) load() (*seal.Seal, *fileLayer) {
	if c.key == "" {
		return nil, nil
	}
	lp, ep := c.paths()
	raw, err := os.ReadFile(ep)
	if err != nil {
		return nil, nil
	}
	var e layerEntry
	if json.Unmarshal(raw, &e) != nil || e.Digest.Algorithm != "sha256" || e.DiffID.Algorithm != "sha256" {
		return nil, nil
	}
	// A tree's seal (materialize.Tree) has no stat index: decoded as is,
	// then held to the planned digest.
	s := new(seal.Seal)
	if err := json.Unmarshal(e.Seal, s); err != nil || s.Format != seal.Format || s.Materialization.Digest != c.md {
		return nil, nil
	}
	if d, err := s.ComputeDigest(); err != nil || d != c.md {
		return nil, nil
	}
	// The materialization digest names the interpreter by path and version
	// only: one updated in place (a distro fix, same version) compiles and
	// seals differently, so the layer and its seal are the old build's. A
	// miss then, as a --no-cache build would differ.
	for _, id := range []*seal.FileIdentity{&s.Interpreter.FileIdentity, s.Interpreter.LibPython} {
		if id == nil {
			continue
		}
		if now, err := seal.IdentityOf(id.Path); err != nil || now.SHA256 != id.SHA256 || now.Size != id.Size {
			return nil, nil
		}
	}
	// Rehashed here (a few tens of ms), so that a damaged entry is a miss
	// that rebuilds, not a build that fails later.
	f, err := os.Open(lp)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	h := sha256.New()
	if n, err := io.Copy(h, f); err != nil || n != e.Size || hex.EncodeToString(h.Sum(nil)) != e.Digest.Hex {
		return nil, nil
	}
	return s, &fileLayer{path: lp, digest: e.Digest, diffID: e.DiffID, size: e.Size}
}

// write writes the env layer: into the cache (then recorded with s), or
// at staged when there is no cache or it cannot be written to.
func (c layerCache) write(ctx context.Context, staged string, entries []entry, epoch time.Time, s *seal.Seal) (*fileLayer, error) {
	if c.key == "" || os.MkdirAll(c.dir, 0o755) != nil {
		return writeLayer(ctx, staged, entries, epoch)
	}
	// Written in the build's staging (in the store, so the rename is
	// atomic), not beside the cache: a build killed while it compressed
	// leaves its temp where the next build's CleanStaging removes it.
	lp, ep := c.paths()
	l, err := writeLayer(ctx, staged, entries, epoch)
	if err != nil {
		os.Remove(staged)
		return nil, err
	}
	sealDoc, err := s.Marshal()
	if err == nil {
		// One mode for the entry's two files, whatever the umask: 0644,
		// as its .json and the store's other cache entries replaced by a
		// rename (docs/store.md); the staged layer is its writer's 0600.
		err = os.Chmod(staged, 0o644)
	}
	if err == nil {
		err = os.Rename(staged, lp)
	}
	if err != nil {
		return l, nil // the layer is written (at staged); only the cache entry is missing
	}
	l.path = lp
	e, err := json.Marshal(layerEntry{Digest: l.digest, DiffID: l.diffID, Size: l.size, Seal: sealDoc})
	if err == nil {
		_ = atomicfile.WriteFile(ep, e, 0o644)
	}
	return l, nil
}

var (
	exeOnce sync.Once
	exeHex  string
)

// executableDigest is the sha256 of the running executable, "" when it
// cannot be read (then nothing is cached).
func executableDigest() string {
	exeOnce.Do(func() {
		p, err := os.Executable()
		if err != nil {
			return
		}
		f, err := os.Open(p)
		if err != nil {
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err == nil {
			exeHex = hex.EncodeToString(h.Sum(nil))
		}
	})
	return exeHex
}
