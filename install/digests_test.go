package install

import (
	"archive/zip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/seal"
)

// TestInstallPinsTheDigests: what install proposes is what DESIGN §5 and
// §9 say a pin holds, each recomputed here from the files themselves, not
// from what install returns: an entrypoint's implementation digest over
// its interface (the registered schema's digest), its name and object and
// the root wheel's sha256 (the distribution, never the manifest's or the
// lock's digest); the manifest and lock digests, the sha256 of the
// provider.toml and pylock.toml the wheel carries, which the env holds
// as installed (what verify hashes before every run); the env's
// materialization digest, its directory's name and its seal's; the seal
// content digest of its seal. No test recomputed the implementation
// digest a pin records: an install that hashed the manifest's digest as
// the distribution passed the install suite.
func TestInstallPinsTheDigests(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	schemas := r.registerInterfaces(t)
	fx, st, reg, client := r.fx, r.st, r.reg, r.client
	res, err := Install(ctx, st, reg, Options{
		Root: pipelinetest.OpenRoot(t, st, fx.Echo.Path), Platforms: []string{"host"},
		Python: python, NoCompile: true, Client: client,
	})
	if err != nil {
		t.Fatal(err)
	}
	wb, err := os.ReadFile(fx.Echo.Path)
	if err != nil {
		t.Fatal(err)
	}
	wheelSum := digest.Sum(wb)
	p := res.Provider
	if p.Package == nil || p.Package.SHA256 != wheelSum {
		t.Fatalf("the pinned package %+v, want the root wheel's sha256 %s", p.Package, wheelSum)
	}
	if len(p.Entrypoints) == 0 {
		t.Fatal("no entrypoint pinned")
	}
	for _, e := range p.Entrypoints {
		if want := schemas[e.Interface.ID]; e.Interface.Digest != want {
			t.Errorf("entrypoint %s: interface %s digest %s, the registered schema's is %s", e.Name, e.Interface.ID, e.Interface.Digest, want)
		}
		want, err := digest.ImplementationDigest(e.Interface.ID, schemas[e.Interface.ID], e.Name, e.Object, wheelSum)
		if err != nil {
			t.Fatal(err)
		}
		if e.ImplementationDigest != want {
			t.Errorf("entrypoint %s: implementation digest %s, want %s (over the root wheel's sha256)", e.Name, e.ImplementationDigest, want)
		}
	}
	// The manifest and lock, as the wheel carries them.
	zr, err := zip.NewReader(readerAt(wb), int64(len(wb)))
	if err != nil {
		t.Fatal(err)
	}
	inWheel := map[string]digest.Digest{}
	for _, f := range zr.File {
		if dir, name := filepath.Split(f.Name); strings.HasSuffix(dir, ".dist-info/cruxible/") && (name == "provider.toml" || name == "pylock.toml") {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			inWheel[name] = digest.Sum(b)
		}
	}
	if p.ManifestDigest != inWheel["provider.toml"] || p.LockDigest != inWheel["pylock.toml"] || p.ManifestDigest.IsZero() || p.LockDigest.IsZero() {
		t.Errorf("manifest %s, lock %s pinned; the wheel's are %s, %s", p.ManifestDigest, p.LockDigest, inWheel["provider.toml"], inWheel["pylock.toml"])
	}
	var local []registry.Materialization
	for _, m := range p.Materializations {
		if m.Backend == registry.BackendLocal {
			local = append(local, m)
		}
	}
	if len(local) != 1 {
		t.Fatalf("local materializations %+v, want one", p.Materializations)
	}
	m := local[0]
	s, err := seal.Load(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	md, err := s.ComputeDigest()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(m.Path) != m.Digest.Hex() || md != m.Digest {
		t.Errorf("the env %s, its seal's inputs hash to %s; the pin names %s", m.Path, md, m.Digest)
	}
	if s.Materialization.Root == nil || s.Materialization.Root.SHA256 != wheelSum || m.Resolution != s.Resolution.Digest {
		t.Errorf("the seal's root %+v and resolution %s; the pin's wheel %s and resolution %s", s.Materialization.Root, s.Resolution.Digest, wheelSum, m.Resolution)
	}
	if cd, err := seal.ContentDigest(s); err != nil || cd != m.Seal {
		t.Errorf("seal content digest %s (%v), the pin records %s", cd, err, m.Seal)
	}
	// The env holds the wheel's manifest and lock as installed.
	di := filepath.Join(m.Path, filepath.FromSlash(s.Env.SitePackages), "acme_echo-"+p.Package.Version+".dist-info", "cruxible")
	for name, want := range inWheel {
		b, err := os.ReadFile(filepath.Join(di, name))
		if err != nil || digest.Sum(b) != want {
			t.Errorf("the installed %s: %v, hashes to %s, want %s", name, err, digest.Sum(b), want)
		}
	}
}

type readerAt []byte

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r)) {
		return 0, io.EOF
	}
	n := copy(p, r[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
