package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/internal/fixtures"
)

// testPlatform is the host's platform as a preset (Debian bookworm's
// CPython 3.11, glibc 2.36).
const testPlatform = "cp311-manylinux_2_36_x86_64"

// baseEpoch is the SOURCE_DATE_EPOCH of the test base image.
const baseEpoch = 1700000000

var (
	baseOnce          sync.Once
	baseDir, baseSkip string
	baseDigest        v1.Hash
)

// testBase is a bookworm base image (python3-minimal) as an OCI layout,
// made once by mmdebstrap into a cache dir under os.TempDir() keyed by
// its inputs and reused by later runs; the test skips when mmdebstrap is
// missing or cannot reach apt sources.
func testBase(t *testing.T) (string, v1.Hash) {
	t.Helper()
	baseOnce.Do(func() { baseDir, baseDigest, baseSkip = makeBase() })
	if baseSkip != "" {
		t.Skip(baseSkip)
	}
	return baseDir, baseDigest
}

func makeBase() (string, v1.Hash, string) {
	mm, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return "", v1.Hash{}, "mmdebstrap is not installed (apt-get install mmdebstrap): no base image to build on"
	}
	ver, _ := exec.Command(mm, "--version").Output()
	args := []string{"--quiet", "--variant=essential", "--include=python3-minimal,libpython3.11-stdlib", "bookworm"}
	key := sha256.Sum256([]byte(fmt.Sprint(strings.TrimSpace(string(ver)), args, baseEpoch)))
	dir := filepath.Join(os.TempDir(), "cruxprov-test-base-"+hex.EncodeToString(key[:8]))
	if b, err := os.ReadFile(filepath.Join(dir, "digest")); err == nil {
		if h, err := v1.NewHash(strings.TrimSpace(string(b))); err == nil {
			return filepath.Join(dir, "oci"), h, ""
		}
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", v1.Hash{}, err.Error()
	}
	tarPath := filepath.Join(dir, "base.tar")
	cmd := exec.Command(mm, append(args, tarPath)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("SOURCE_DATE_EPOCH=%d", baseEpoch))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", v1.Hash{}, fmt.Sprintf("mmdebstrap cannot make a base image here (no apt sources reachable?): %v: %s", err, lastLines(out))
	}
	l, err := tarball.LayerFromFile(tarPath, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(1))
	if err != nil {
		return "", v1.Hash{}, err.Error()
	}
	img, err := mutate.Append(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON),
		mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: time.Unix(baseEpoch, 0).UTC()}, CreatedBy: "mmdebstrap"}})
	if err != nil {
		return "", v1.Hash{}, err.Error()
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: time.Unix(baseEpoch, 0).UTC()}
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", v1.Hash{}, err.Error()
	}
	p, err := layout.Write(filepath.Join(dir, "oci"), mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		return "", v1.Hash{}, err.Error()
	}
	if err := p.AppendImage(img); err != nil {
		return "", v1.Hash{}, err.Error()
	}
	h, _ := img.Digest()
	os.Remove(tarPath)
	if err := os.WriteFile(filepath.Join(dir, "digest"), []byte(h.String()), 0o644); err != nil {
		return "", v1.Hash{}, err.Error()
	}
	return filepath.Join(dir, "oci"), h, ""
}

func lastLines(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}

var (
	shimOnce     sync.Once
	shimPath     string
	shimErr      error
	fixturesOnce sync.Once
	fx           *fixtures.Set
	fxDir        string
	idxURL       string
)

// testShim is cruxshim built static for amd64, once per test binary.
func testShim(t *testing.T) string {
	t.Helper()
	shimOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cruxprov-image-shim-")
		if err != nil {
			shimErr = err
			return
		}
		shimPath = filepath.Join(dir, "cruxshim")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-buildid=", "-o", shimPath, "github.com/cruxible/cruxprov/cmd/cruxshim")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if out, err := cmd.CombinedOutput(); err != nil {
			shimErr = fmt.Errorf("go build cruxshim: %v: %s", err, out)
		}
	})
	if shimErr != nil {
		t.Fatal(shimErr)
	}
	return shimPath
}

// testIndex serves the fixture wheels as a pinned index, once per binary.
func testIndex(t *testing.T) (*fixtures.Set, *index.Client) {
	t.Helper()
	fixturesOnce.Do(func() {
		var err error
		if fxDir, err = os.MkdirTemp("", "cruxprov-image-fx-"); err != nil {
			panic(err)
		}
		if fx, err = fixtures.Build(filepath.Join(fxDir, "fx"), fixtures.Options{}); err != nil {
			panic(err)
		}
		idx := filepath.Join(fxDir, "index")
		if _, err := index.Build(context.Background(), idx, filepath.Dir(fx.Runtime.Path)); err != nil {
			panic(err)
		}
		srv := httptest.NewServer(http.FileServer(http.Dir(idx)))
		idxURL = srv.URL + "/simple/"
	})
	c, err := index.New(idxURL, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return fx, c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fxDir != "" {
		os.RemoveAll(fxDir)
	}
	if shimPath != "" {
		os.RemoveAll(filepath.Dir(shimPath))
	}
	os.Exit(code)
}
