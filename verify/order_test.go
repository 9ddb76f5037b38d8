package verify_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/buildinfo"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/verify"
)

// pinnedEnv is a sealed env committed the way materialize commits one
// (seal.Freeze, seal.Commit), holding the root wheel's dist-info with the
// installed provider.toml and pylock.toml, a stand-in interpreter file
// (seal.Verify holds its identity only), and a registry whose accepted
// pin names it: verify.Verify end to end without Python or an index.
type pinnedEnv struct {
	base     string
	env      string
	reg      *registry.Dir
	key      registrytest.Key
	change   registry.Change // the accepted one; edit a copy and accept it again
	manifest []byte          // as installed
	lock     []byte
}

const (
	envPlatform = "cp311-manylinux_2_36_x86_64"
	envDistInfo = "lib/python3.11/site-packages/acme_echo-1.0.0.dist-info/cruxible"
)

func newPinnedEnv(t *testing.T) *pinnedEnv {
	t.Helper()
	ctx := context.Background()
	p := &pinnedEnv{base: testdir.New(t), manifest: []byte("name = \"acme-echo\"\n"), lock: []byte("lock-version = \"1.0\"\n")}
	home := filepath.Join(p.base, "home")
	python := filepath.Join(p.base, "python3.11")
	if err := os.WriteFile(python, bytes.Repeat([]byte("not really an interpreter\n"), 100), 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := seal.IdentityOf(python)
	if err != nil {
		t.Fatal(err)
	}
	const wheelName = "acme_echo-1.0.0-py3-none-any.whl"
	wheelSum := digest.Sum([]byte("the root wheel"))
	pkg := seal.Package{Name: "acme-echo", Version: "1.0.0", Filename: wheelName, SHA256: wheelSum, Size: 123}
	rd, err := digest.ResolutionDigest([]digest.ResolvedWheel{pkg})
	if err != nil {
		t.Fatal(err)
	}
	di := digest.Interpreter{Path: python, Version: "3.11.7"}
	root := &digest.Root{Name: "acme-echo", Version: "1.0.0", SHA256: wheelSum}
	md, err := digest.LocalMaterializationDigest(envPlatform, di, rd, root, "")
	if err != nil {
		t.Fatal(err)
	}
	s := &seal.Seal{
		Materialization: seal.Materialization{Digest: md, Platform: envPlatform, Interpreter: di, Resolution: rd, Root: root},
		Resolution:      seal.Resolution{Digest: rd, Platform: envPlatform, Packages: []seal.Package{pkg}, Root: &pkg},
		Interpreter:     seal.InterpreterIdentity{FileIdentity: id, Version: "3.11.7", Implementation: "cpython"},
		Env:             seal.Env{Python: seal.PythonLink, SitePackages: "lib/python3.11/site-packages"},
		Tool:            "cruxprov/test",
	}
	staging := filepath.Join(home, "staging")
	for _, d := range []string{filepath.Join(home, "envs"), filepath.Join(staging, "bin"), filepath.Join(staging, envDistInfo)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(python, filepath.Join(staging, "bin", "python")); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"provider.toml": p.manifest, "pylock.toml": p.lock} {
		if err := os.WriteFile(filepath.Join(staging, envDistInfo, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := seal.Freeze(ctx, staging, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.env = filepath.Join(home, "envs", md.Hex())
	if _, err := seal.Commit(staging, p.env, s, ix); err != nil {
		t.Fatal(err)
	}
	rep, err := seal.Verify(ctx, p.env, seal.Options{})
	if err != nil {
		t.Fatalf("the fixture env does not verify against its own seal: %v", err)
	}
	if p.reg, err = registry.OpenDir(ctx, filepath.Join(home, "registry")); err != nil {
		t.Fatal(err)
	}
	p.key = registrytest.NewKey(t, "alice", registry.RoleApprover)
	if _, err := p.reg.TrustKey(ctx, p.key.Key, "t"); err != nil {
		t.Fatal(err)
	}
	c := registrytest.Change("acme-echo", "1.0.0")
	pv := c.Provider
	pv.Package = &registry.Package{Name: "acme-echo", Version: "1.0.0", Filename: wheelName, SHA256: wheelSum}
	pv.ManifestDigest, pv.LockDigest = digest.Sum(p.manifest), digest.Sum(p.lock)
	pv.Protocol = []int{buildinfo.ProtocolVersion, buildinfo.ProtocolVersion}
	pv.Materializations = []registry.Materialization{{Backend: registry.BackendLocal, Platform: envPlatform, Digest: md, Resolution: rd,
		Seal: rep.ContentDigest, Path: p.env, Packages: []registry.Package{*pv.Package}}}
	p.change = c
	registrytest.Accept(t, p.reg, c, p.key)
	return p
}

// update accepts the pin again with edit applied to a copy of its
// provider (an update change).
func (p *pinnedEnv) update(t *testing.T, edit func(*registry.Provider)) {
	t.Helper()
	pv := *p.change.Provider
	pv.Protocol = append([]int(nil), pv.Protocol...)
	pv.Materializations = append([]registry.Materialization(nil), pv.Materializations...)
	edit(&pv)
	c := registry.Change{Action: registry.ActionUpdate, Provider: &pv}
	registrytest.Accept(t, p.reg, c, p.key)
	p.change = c
}

func (p *pinnedEnv) verify(o verify.Options) error {
	if o.StateDir == "" {
		o.StateDir = filepath.Join(p.base, "state")
	}
	_, err := verify.Verify(context.Background(), p.reg, "acme-echo", o)
	return err
}

// edit rewrites one file of the (read-only) env.
func (p *pinnedEnv) edit(t *testing.T, rel string, b []byte) {
	t.Helper()
	f := filepath.Join(p.env, filepath.FromSlash(rel))
	if err := os.Chmod(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The modes put back as sealed: only the content differs.
	if err := os.Chmod(f, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(f), 0o555); err != nil {
		t.Fatal(err)
	}
}

// TestManifestAndLockDrift: the installed manifest and lock hash to the
// pin's manifest and lock digests (DESIGN §9), or the verification is
// refused manifest_drift or lock_drift. No test raised either code: a
// checkProviderFiles that compared nothing passed every suite.
func TestManifestAndLockDrift(t *testing.T) {
	p := newPinnedEnv(t)
	if err := p.verify(verify.Options{Entrypoint: "echo"}); err != nil {
		t.Fatalf("the pinned env: %v, want ok", err)
	}
	other := digest.Sum([]byte("another manifest"))
	p.update(t, func(pv *registry.Provider) { pv.ManifestDigest = other })
	if err := p.verify(verify.Options{}); refusal.CodeOf(err) != refusal.ManifestDrift {
		t.Fatalf("a pin whose manifest digest is not the installed manifest's: %v, want manifest_drift", err)
	}
	p.update(t, func(pv *registry.Provider) { pv.ManifestDigest = digest.Sum(p.manifest); pv.LockDigest = other })
	if err := p.verify(verify.Options{}); refusal.CodeOf(err) != refusal.LockDrift {
		t.Fatalf("a pin whose lock digest is not the installed lock's: %v, want lock_drift", err)
	}
	// Both: the manifest is checked first.
	p.update(t, func(pv *registry.Provider) { pv.ManifestDigest = other })
	if err := p.verify(verify.Options{}); refusal.CodeOf(err) != refusal.ManifestDrift {
		t.Fatalf("manifest and lock both other: %v, want manifest_drift first", err)
	}
	p.update(t, func(pv *registry.Provider) {
		pv.ManifestDigest, pv.LockDigest = digest.Sum(p.manifest), digest.Sum(p.lock)
	})
	if err := p.verify(verify.Options{}); err != nil {
		t.Fatalf("the pin put right: %v, want ok", err)
	}
}

// TestInstalledManifestEditedIsEnvDrift: an installed provider.toml
// edited in place is found by the tree check, which runs before the
// manifest and lock are hashed: env_drift naming its path, fast and deep
// (docs/executor.md, "The order of the checks", says why the code's order
// differs from DESIGN §9's list).
func TestInstalledManifestEditedIsEnvDrift(t *testing.T) {
	p := newPinnedEnv(t)
	p.edit(t, envDistInfo+"/provider.toml", []byte("name = \"acme-evil\"\n"))
	for _, deep := range []bool{false, true} {
		err := p.verify(verify.Options{Deep: deep})
		if refusal.CodeOf(err) != refusal.EnvDrift || !bytes.Contains([]byte(err.Error()), []byte("provider.toml")) {
			t.Errorf("deep %v: the installed manifest edited: %v, want env_drift naming provider.toml", deep, err)
		}
	}
}

// TestProtocolRange: a pin whose protocol range does not include this
// cruxprov's protocol version is protocol_unsupported (DESIGN §9), and so
// is a pin that names no range, which cannot be said to include ours: it
// verified, checking nothing. Such a pin can no longer be proposed
// (changeset_invalid); one an older cruxprov accepted is
// registry/testdata/protocol-less, whose pin names no env here: the
// protocol is checked before the env.
func TestProtocolRange(t *testing.T) {
	p := newPinnedEnv(t)
	v := buildinfo.ProtocolVersion
	for _, c := range []struct {
		name  string
		rng   []int
		code  refusal.Code
		match string
	}{
		{"above ours", []int{v + 1, v + 2}, refusal.ProtocolUnsupported, ""},
		{"ours and above", []int{v, v + 1}, "", ""},
		{"no range", nil, refusal.ProtocolUnsupported, "names no protocol range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			target := "acme-echo==1.0.0@" + p.change.Provider.Package.SHA256.String()
			if c.rng == nil {
				target, err = protocolLessPin(t)
			} else {
				p.update(t, func(pv *registry.Provider) { pv.Protocol = c.rng })
				err = p.verify(verify.Options{Entrypoint: "echo"})
			}
			if refusal.CodeOf(err) != c.code || c.code == "" && err != nil {
				t.Fatalf("protocol %v: %v, want %q", c.rng, err, c.code)
			}
			if c.match != "" && !bytes.Contains([]byte(err.Error()), []byte(c.match)) {
				t.Errorf("protocol %v: %q does not say it %s", c.rng, err, c.match)
			}
			if c.match != "" {
				if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionPropose || r.Target != target {
					t.Errorf("protocol %v: remedy %+v, want %s of the pinned package", c.rng, r, refusal.ActionPropose)
				}
			}
		})
	}
}

// protocolLessPin verifies acme-echo in a copy of
// registry/testdata/protocol-less, whose accepted pin names no protocol
// range, and returns the propose target its remedy should name (the
// pinned package) and verify's error.
func protocolLessPin(t *testing.T) (string, error) {
	t.Helper()
	ctx := context.Background()
	base := testdir.New(t)
	root := filepath.Join(base, "registry")
	if err := os.CopyFS(root, os.DirFS(filepath.Join("..", "registry", "testdata", "protocol-less", "registry"))); err != nil {
		t.Fatal(err)
	}
	reg, err := registry.OpenDir(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	pin, err := reg.Pin(ctx, "acme-echo")
	if err != nil {
		t.Fatal(err)
	}
	if len(pin.Spec.Changes) != 1 || pin.Spec.Changes[0].Provider == nil || len(pin.Spec.Changes[0].Provider.Protocol) != 0 {
		t.Fatalf("the testdata pin is not one without a protocol range: %+v", pin.Spec)
	}
	pkg := pin.Spec.Changes[0].Provider.Package
	_, err = verify.Verify(ctx, reg, "acme-echo", verify.Options{Entrypoint: "echo", StateDir: filepath.Join(base, "state")})
	return pkg.Name + "==" + pkg.Version + "@" + pkg.SHA256.String(), err
}

// TestCheckOrder holds verify to DESIGN §9's order where two checks
// fail at once: the entrypoint before the protocol, the protocol before
// the env (a pin this cruxprov cannot speak is refused so even when its
// env is gone), the seal content digest before the manifest and lock.
func TestCheckOrder(t *testing.T) {
	p := newPinnedEnv(t)
	v := buildinfo.ProtocolVersion
	p.update(t, func(pv *registry.Provider) { pv.Protocol = []int{v + 1, v + 1} })
	if err := p.verify(verify.Options{Entrypoint: "nonesuch"}); refusal.CodeOf(err) != refusal.EntrypointUnknown {
		t.Errorf("an unknown entrypoint of a pin of another protocol: %v, want entrypoint_unknown", err)
	}
	if err := os.Rename(p.env, p.env+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := p.verify(verify.Options{Entrypoint: "echo"}); refusal.CodeOf(err) != refusal.ProtocolUnsupported {
		t.Errorf("a pin of another protocol whose env is gone: %v, want protocol_unsupported", err)
	}
	if err := os.Rename(p.env+".moved", p.env); err != nil {
		t.Fatal(err)
	}
	p.update(t, func(pv *registry.Provider) {
		pv.Protocol = []int{v, v}
		pv.ManifestDigest = digest.Sum([]byte("another manifest"))
		pv.Materializations[0].Seal = digest.Sum([]byte("another seal"))
	})
	if err := p.verify(verify.Options{}); refusal.CodeOf(err) != refusal.PinMismatch {
		t.Errorf("another seal content digest and manifest digest: %v, want pin_mismatch", err)
	}
}

// TestEnvNameIsThePinnedDigest: the seal must name the pinned
// materialization digest (DESIGN §9). seal.Verify holds the seal to the
// env's directory name, so verify holds that name to the pin's digest: a
// pin whose materialization digest is another env's, naming this env's
// path, is pin_mismatch, though the env verifies against its own seal and
// its seal content digest is the one the pin records.
func TestEnvNameIsThePinnedDigest(t *testing.T) {
	p := newPinnedEnv(t)
	p.update(t, func(pv *registry.Provider) { pv.Materializations[0].Digest = digest.Sum([]byte("another env")) })
	err := p.verify(verify.Options{Entrypoint: "echo"})
	if refusal.CodeOf(err) != refusal.PinMismatch || !bytes.Contains([]byte(err.Error()), []byte("is not its materialization digest")) {
		t.Fatalf("a pin naming this env under another materialization digest: %v, want pin_mismatch", err)
	}
}
