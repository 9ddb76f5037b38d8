package podman

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/refusal"
)

func TestNameable(t *testing.T) {
	for dir, want := range map[string]bool{
		"/tmp": true, "/var/tmp": true, "/run/user/1001": true, "/tmp/a.b_c-d/e__f--g": true,
		"/tmp/fixF/Tmp": false, "/tmp/with space": false, "/tmp/.hidden": false, "/tmp/a-": false,
		"/tmp/a:b": false, "/tmp/a@b": false, "relative/tmp": false, "/" + strings.Repeat("a", 240): false,
	} {
		if got := nameable(dir); got != want {
			t.Errorf("nameable(%q) = %v, want %v", dir, got, want)
		}
	}
}

// TestPullWhateverTheTempDir: a run from a layout stages a one-entry
// layout of its own, and podman names the image it pulls by that
// layout's path; in a temp directory with an uppercase letter (TMPDIR
// /tmp/…/Tmp) podman refused it, "repository name must be lowercase",
// and every container run from a layout was container_unavailable. The
// pull stages in a directory podman can name (/tmp) instead.
func TestPullWhateverTheTempDir(t *testing.T) {
	installed(t) // a pull, no run: rootless too, limits or not
	upper := filepath.Join(t.TempDir(), "Tmp Dir")
	if err := os.Mkdir(upper, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", upper)
	ref, m := tinyLayout(t)
	e := &Executor{}
	id, err := e.pull(context.Background(), ref, m)
	if err != nil {
		t.Fatalf("pull with TMPDIR %q: %v", upper, err)
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", id).Run() })
	if id != m.Config.Digest.Hex {
		t.Errorf("podman stored the image as %s, want its config digest %s", id, m.Config.Digest.Hex)
	}
	// (podman leaves a file of its own there: not the pull's layout.)
	if left, _ := filepath.Glob(filepath.Join(upper, pullPrefix+"*")); len(left) != 0 {
		t.Errorf("the pull staged in the temp directory: %v", left)
	}
}

// TestPullNoStagingDir: where no directory tried is both writable and an
// image name, the pull is refused container_unavailable with the remedy
// of another temporary directory (cmd/ renders it TMPDIR=DIR), not
// podman's "repository name must be lowercase".
func TestPullNoStagingDir(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "Upper")
	os.Mkdir(bad, 0o755)
	defer func(f func() []string) { stagingDirs = f }(stagingDirs)
	stagingDirs = func() []string { return []string{bad, filepath.Join(t.TempDir(), "missing")} }
	_, err := stagePull("oci:/x@sha256:00")
	if refusal.CodeOf(err) != refusal.ContainerUnavailable {
		t.Fatalf("%v, want container_unavailable", err)
	}
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionSetTempDir {
		t.Errorf("remedy %+v, want %s", rem, refusal.ActionSetTempDir)
	}
	if !strings.Contains(err.Error(), bad) {
		t.Errorf("%v does not name the directory tried", err)
	}
}

// tinyLayout is a one-file image (no interpreter: it is pulled, never
// run) in an OCI layout under t.TempDir(), and its manifest.
func tinyLayout(t *testing.T) (image.Ref, *v1.Manifest) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	body := []byte(t.Name())
	tw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write(body)
	tw.Close()
	l, err := tarball.LayerFromReader(bytes.NewReader(b.Bytes()), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), l)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := layout.Write(dir, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	h, _ := img.Digest()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return image.Ref{Layout: dir, Digest: h}, m
}
