package imagetest

import (
	"archive/tar"
	"bytes"
	"io"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Shells are the names ShellFree removes from the base's bin
// directories: every POSIX and login shell Debian packages, and the
// multi-call binaries that are one (busybox, toybox).
var Shells = []string{"sh", "ash", "dash", "bash", "rbash", "busybox", "toybox", "zsh", "ksh", "ksh93", "mksh", "lksh",
	"pdksh", "posh", "yash", "csh", "tcsh", "fish"}

// binDirs are where ShellFree looks for Shells (bookworm's /bin and
// /sbin are links to usr/bin and usr/sbin: their files are there).
var binDirs = []string{"bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin", "usr/local/sbin"}

// ShellFree is Base with every shell removed, as an image without one
// (distroless, scratch with an interpreter) has none: one more layer
// that whites out each file or link of Shells in the base's bin
// directories (as a Dockerfile's RUN rm would), written as an OCI layout
// into out. It returns the image's reference (oci:DIR@sha256:…) and the
// paths it removed, sorted; the test fails when the base holds no sh,
// which would leave nothing to show.
func ShellFree(t testing.TB, out string) (string, []string) {
	t.Helper()
	img := baseImage(t)
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]*tar.Header{} // the base's headers of binDirs and their parents
	var gone []string
	for _, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hd, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				rc.Close()
				t.Fatal(err)
			}
			name := strings.TrimSuffix(strings.TrimPrefix(path.Clean("/"+hd.Name), "/"), "/")
			if hd.Typeflag == tar.TypeDir {
				if slices.Contains(binDirs, name) || name == "usr" || name == "usr/local" {
					dirs[name] = hd
				}
				continue
			}
			d, base := path.Split(name)
			if slices.Contains(binDirs, strings.TrimSuffix(d, "/")) && slices.Contains(Shells, base) && !slices.Contains(gone, name) {
				gone = append(gone, name)
			}
		}
		rc.Close()
	}
	slices.Sort(gone)
	if !slices.Contains(gone, "usr/bin/sh") && !slices.Contains(gone, "bin/sh") {
		t.Fatalf("the base image holds no sh in %v (found %v): nothing to remove", binDirs, gone)
	}
	// The whiteouts, under their directories as the base has them (the
	// same headers: a layer's directory entry replaces the lower one's).
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(BaseEpoch, 0).UTC()
	written := map[string]bool{}
	var dirOf func(d string)
	dirOf = func(d string) {
		if d == "." || d == "" || written[d] {
			return
		}
		dirOf(path.Dir(d))
		written[d] = true
		hd := &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch}
		if b, ok := dirs[d]; ok {
			hd = &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: b.Mode, Uid: b.Uid, Gid: b.Gid, ModTime: b.ModTime}
		}
		if err := tw.WriteHeader(hd); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range gone {
		d, base := path.Split(p)
		dirOf(strings.TrimSuffix(d, "/"))
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: d + ".wh." + base, Mode: 0o644, ModTime: epoch}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	wl, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	free, err := mutate.Append(img, mutate.Addendum{Layer: wl, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "rm " + strings.Join(gone, " ")}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(out, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(free); err != nil {
		t.Fatal(err)
	}
	d, err := free.Digest()
	if err != nil {
		t.Fatal(err)
	}
	readable(out)
	return "oci:" + out + "@" + d.String(), gone
}
