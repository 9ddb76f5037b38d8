// Package imagetest makes what image tests need and cannot commit: a
// Debian bookworm base image with python3.11 as an OCI layout (made once
// by mmdebstrap into a cache dir under os.TempDir() keyed by its inputs,
// committed by a rename so test binaries running at once never see half
// of one, reused by later runs, skipped with a clear message where
// mmdebstrap cannot run), that base without a shell (ShellFree), and
// cruxshim built static for amd64 once per test binary.
package imagetest

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
)

// Platform is the base's platform as a preset (Debian bookworm's CPython
// 3.11, glibc 2.36, x86_64).
const Platform = "cp311-manylinux_2_36_x86_64"

// BaseEpoch is the SOURCE_DATE_EPOCH of the test base image.
const BaseEpoch = 1700000000

var (
	baseOnce          sync.Once
	baseDir, baseSkip string
	baseDigest        v1.Hash
)

// Base is a bookworm base image (python3-minimal) as an OCI layout,
// made once by mmdebstrap into a cache dir under os.TempDir() keyed by
// its inputs and reused by later runs; the test skips when mmdebstrap is
// missing or cannot reach apt sources.
func Base(t testing.TB) (string, v1.Hash) {
	t.Helper()
	baseOnce.Do(func() { baseDir, baseDigest, baseSkip = makeBase() })
	if baseSkip != "" {
		t.Skip(baseSkip)
	}
	return baseDir, baseDigest
}

// baseLayout is the version of the base cache entry's layout and of how
// it is committed, part of its key: entries that racing builds of old
// left half-written in place (an empty layer beside the real one, a
// digest file over either) are never read.
const baseLayout = "atomic-1"

func makeBase() (string, v1.Hash, string) {
	mm, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return "", v1.Hash{}, "mmdebstrap is not installed (apt-get install mmdebstrap): no base image to build on"
	}
	ver, _ := exec.Command(mm, "--version").Output()
	args := []string{"--quiet", "--variant=essential", "--include=python3-minimal,libpython3.11-stdlib", "bookworm"}
	key := sha256.Sum256([]byte(fmt.Sprint(strings.TrimSpace(string(ver)), args, BaseEpoch, slimDirs, baseLayout)))
	dir := filepath.Join(os.TempDir(), "cruxprov-test-base-"+hex.EncodeToString(key[:8]))
	h, err := cached(dir, func(tmp string) (v1.Hash, error) { return buildBase(mm, args, tmp) })
	if err != nil {
		return "", v1.Hash{}, err.Error()
	}
	return filepath.Join(dir, "oci"), h, ""
}

// cached returns the digest of the cache entry dir (its file digest,
// the image's digest in its layout oci/), made by build first where it
// is missing. `go test ./...` runs several packages' test binaries at
// once, each wanting the same entry: build writes into a private
// directory beside dir, which is renamed to dir only once complete and
// readable, its digest file written last, so no reader ever sees half
// an entry (before, two processes built into dir itself, one removing
// it while the other wrote: a corrupt base that failed every test on
// it). A lock file beside it (dir.lock, flock) has a second process wait
// for the first's entry rather than build its own; where it cannot be
// opened, each builds, and one that loses the rename reads the winner's.
func cached(dir string, build func(tmp string) (v1.Hash, error)) (v1.Hash, error) {
	if h, ok := readEntry(dir); ok {
		return h, nil
	}
	if l := lockFile(dir + ".lock"); l != nil {
		defer l.Close() // unlocks
		if h, ok := readEntry(dir); ok {
			return h, nil
		}
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(tmp) // gone once renamed
	h, err := build(tmp)
	if err != nil {
		return v1.Hash{}, err
	}
	readable(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "digest"), []byte(h.String()), 0o644); err != nil {
		return v1.Hash{}, err
	}
	if err := os.Rename(tmp, dir); err == nil {
		return h, nil
	}
	if h, ok := readEntry(dir); ok {
		return h, nil // another process's, complete
	}
	// An entry without its digest: a build of old, interrupted. Set it
	// aside (a rename: whoever reads it still reads it whole) and put
	// this one in its place.
	stale, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".stale-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(stale)
	if err := os.Rename(dir, filepath.Join(stale, "entry")); err != nil && !os.IsNotExist(err) {
		return v1.Hash{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if h, ok := readEntry(dir); ok {
			return h, nil
		}
		return v1.Hash{}, err
	}
	return h, nil
}

// readEntry is the digest of the cache entry dir, ok when it is
// complete (its digest file, written last, names one).
func readEntry(dir string) (v1.Hash, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "digest"))
	if err != nil {
		return v1.Hash{}, false
	}
	h, err := v1.NewHash(strings.TrimSpace(string(b)))
	if err != nil {
		return v1.Hash{}, false
	}
	readable(dir) // an entry of an older run, made before blobs were
	return h, true
}

// lockWait bounds how long cached waits for another process's build of
// the entry (mmdebstrap takes a minute or two), and say is where it says
// that it waits. A holder that hangs (a test binary stopped in a
// debugger, an mmdebstrap waiting on a dead mirror) held every other
// test binary without a word until go test's -timeout killed it with a
// goroutine dump; now each says what it waits for, once, and past
// lockWait builds its own entry (the rename commit keeps two builds
// safe). Ctrl-C ends the wait as it ends the test binary. Vars, so that
// tests can lower and hear them.
var (
	lockWait = 5 * time.Minute
	say      = func(s string) { fmt.Fprintln(os.Stderr, s) }
)

// lockFile opens path (made where missing) and locks it exclusively,
// waiting for whoever holds it, lockWait at most; nil where it cannot be
// opened or locked, or the wait was given up. Closing it unlocks it. It
// opens read-only: a lock file another user made (root's, in /tmp) locks
// all the same.
func lockFile(path string) *os.File {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		f, err = os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	}
	if err != nil {
		return nil
	}
	deadline := time.Now().Add(lockWait)
	for said := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f
		}
		if err != syscall.EWOULDBLOCK || time.Now().After(deadline) {
			if err == syscall.EWOULDBLOCK {
				say(fmt.Sprintf("imagetest: gave up waiting for %s after %v: building the test base image here too", path, lockWait))
			}
			f.Close()
			return nil
		}
		if !said {
			say(fmt.Sprintf("imagetest: waiting for the test base image another test process is building (it holds %s), %v at most; Ctrl-C stops waiting", path, lockWait))
			said = true
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// buildBase makes the bookworm base with mmdebstrap (mm, args) and
// writes it as an OCI layout into dir/oci, returning its digest.
func buildBase(mm string, args []string, dir string) (v1.Hash, error) {
	tarPath := filepath.Join(dir, "base.tar")
	cmd := exec.Command(mm, append(args, tarPath)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("SOURCE_DATE_EPOCH=%d", BaseEpoch))
	if out, err := cmd.CombinedOutput(); err != nil {
		return v1.Hash{}, fmt.Errorf("mmdebstrap cannot make a base image here (no apt sources reachable?): %v: %s", err, lastLines(out))
	}
	slim := filepath.Join(dir, "slim.tar")
	if err := slimTar(tarPath, slim); err != nil {
		return v1.Hash{}, err
	}
	os.Remove(tarPath)
	tarPath = slim
	l, err := tarball.LayerFromFile(tarPath, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(1))
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := mutate.Append(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON),
		mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: time.Unix(BaseEpoch, 0).UTC()}, CreatedBy: "mmdebstrap"}})
	if err != nil {
		return v1.Hash{}, err
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: time.Unix(BaseEpoch, 0).UTC()}
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(filepath.Join(dir, "oci"), mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendImage(img); err != nil {
		return v1.Hash{}, err
	}
	h, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	os.Remove(tarPath)
	return h, nil
}

// PlatformARM is Platform's aarch64 twin, the arm64 entry of MultiArchBase.
const PlatformARM = "cp311-manylinux_2_36_aarch64"

// baseImage is Base's image.
func baseImage(t testing.TB) v1.Image {
	t.Helper()
	dir, h := Base(t)
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	img, err := lp.Image(h)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// MultiArchBase is Base as an image index of two platforms, written into
// a layout under t.TempDir(): the bookworm image for linux/amd64, and the
// same layers under a config that says linux/arm64 (an image build reads
// a base's files and never runs them, so the arm64 entry only has to be
// an arm64 image by its config for a build to take it as one). It returns
// the index's reference (oci:DIR@sha256:…) and each architecture's
// manifest digest.
func MultiArchBase(t testing.TB, out string) (string, map[string]v1.Hash) {
	t.Helper()
	amd := baseImage(t)
	cf, err := amd.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = "arm64"
	arm, err := mutate.ConfigFile(amd, cf)
	if err != nil {
		t.Fatal(err)
	}
	ix := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	p, err := layout.Write(out, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(ix); err != nil {
		t.Fatal(err)
	}
	d, err := ix.Digest()
	if err != nil {
		t.Fatal(err)
	}
	amdDigest, err := amd.Digest()
	if err != nil {
		t.Fatal(err)
	}
	armDigest, err := arm.Digest()
	if err != nil {
		t.Fatal(err)
	}
	readable(out)
	return "oci:" + out + "@" + d.String(), map[string]v1.Hash{"amd64": amdDigest, "arm64": armDigest}
}

func lastLines(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}

// slimDirs are left out of the test base: nothing of them runs in a
// test, and they are half its size (reading the base is most of a
// build's time under the race detector).
var slimDirs = []string{"./usr/share/locale/", "./usr/share/doc/", "./usr/share/man/", "./usr/share/perl/",
	"./usr/lib/x86_64-linux-gnu/perl/", "./usr/lib/x86_64-linux-gnu/gconv/", "./usr/share/info/"}

// slimTar copies the tar at src to dst without slimDirs' contents.
func slimTar(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	tr, tw := tar.NewReader(in), tar.NewWriter(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		skip := false
		for _, d := range slimDirs {
			if strings.HasPrefix(h.Name, d) && h.Name != d {
				skip = true
			}
		}
		if skip {
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	return tw.Close()
}

// readable makes the tree at dir readable by every user (go-containerregistry
// writes blobs 0600): tests read the base as uid 65534 too.
func readable(dir string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			os.Chmod(p, 0o755)
		} else if d.Type().IsRegular() {
			os.Chmod(p, 0o644)
		}
		return nil
	})
}

var (
	shimMu   sync.Mutex
	shimDir  string
	shimPath = map[string]string{} // GOARCH → path
)

// Shim is cruxshim built static for linux/amd64 (-trimpath, empty build
// id), once per test binary, in a directory readable by every user.
func Shim(t testing.TB) string { return ShimFor(t, "amd64") }

// ShimFor is Shim for the GOARCH arch (amd64, arm64).
func ShimFor(t testing.TB, arch string) string {
	t.Helper()
	shimMu.Lock()
	defer shimMu.Unlock()
	if p, ok := shimPath[arch]; ok {
		return p
	}
	if shimDir == "" {
		dir, err := os.MkdirTemp("", "cruxprov-image-shim-")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o755)
		shimDir = dir
	}
	p := filepath.Join(shimDir, "cruxshim-"+arch)
	if arch == "amd64" {
		p = filepath.Join(shimDir, "cruxshim")
	}
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-buildid=", "-o", p, "github.com/cruxible/cruxprov/cmd/cruxshim")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build cruxshim for %s: %v: %s", arch, err, out)
	}
	shimPath[arch] = p
	return p
}

// Cleanup removes the shim's directory; call it from TestMain.
func Cleanup() {
	if shimDir != "" {
		os.RemoveAll(shimDir)
	}
}

// Attestations are the in-toto statements, by predicate type, that the
// attestation image tagged tag (image.AttestationTag of the platform
// image) in the layout dir carries: each DSSE layer's payload, as the
// build wrote it.
func Attestations(t testing.TB, dir, tag string) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	for _, img := range TaggedImages(t, dir, tag) {
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			rc, err := l.Compressed()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			var e struct{ Payload string }
			if err != nil || json.Unmarshal(b, &e) != nil {
				t.Fatalf("attestation layer: %v %s", err, b)
			}
			body, err := base64.StdEncoding.DecodeString(e.Payload)
			var st struct{ PredicateType string }
			if err != nil || json.Unmarshal(body, &st) != nil {
				t.Fatalf("attestation payload: %v %s", err, body)
			}
			got[st.PredicateType] = body
		}
	}
	return got
}

// TaggedImages are the images the OCI layout dir tags tag (its
// index's org.opencontainers.image.ref.name annotation), in the index's
// order: none when no entry has that tag.
func TaggedImages(t testing.TB, dir, tag string) []v1.Image {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Image
	for _, m := range im.Manifests {
		if m.Annotations["org.opencontainers.image.ref.name"] != tag {
			continue
		}
		img, err := lp.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, img)
	}
	return out
}

// WithoutRuntimeCheck lets image.Build, in this test binary and until
// the test ends, make the image of a provider whose lock resolves no
// runtime (cruxible-provider-runtime), which it refuses runtime_missing
// otherwise (pipelinetest.WithoutRuntimeCheck, which install obeys too):
// such an image, as an older cruxprov or another tool made it, is what a
// test of a run's refusal of it needs. A cruxprov binary never links this
// package, so never builds one.
func WithoutRuntimeCheck(t testing.TB) {
	t.Helper()
	pipelinetest.WithoutRuntimeCheck(t)
}
