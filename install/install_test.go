package install

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/store"
)

// TestGCWaitsForTheProposal: a gc that comes between an install's env and
// its proposal (the moment gc --envs would take the env nothing names
// yet) finds the store held, decides nothing, and removes nothing; once
// the install is over, the proposal keeps the env.
func TestGCWaitsForTheProposal(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	r.registerInterfaces(t)
	fx, st, reg, client := r.fx, r.st, r.reg, r.client
	root := pipelinetest.OpenRoot(t, st, fx.Echo.Path)
	prepared := false
	gc := func() error {
		_, err := st.GC(ctx, store.GCOptions{Prepare: func(context.Context) (store.GCPlan, error) {
			prepared = true
			return store.GCPlan{}, nil
		}})
		return err
	}
	var during error
	res, err := Install(ctx, st, reg, Options{
		Root: root, Platforms: []string{"host"},
		Python: python, NoCompile: true, Client: client,
		Progress: func(stage, _ string) {
			if stage == "propose" {
				during = gc()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(during, store.ErrBusy) || prepared {
		t.Fatalf("gc between the env and its proposal: %v (prepared: %v), want store.ErrBusy before anything is decided", during, prepared)
	}
	env := res.Envs[res.Provider.Materializations[0].Platform]
	if _, err := os.Stat(env); err != nil {
		t.Fatalf("the env built: %v", err)
	}
	if err := gc(); err != nil || !prepared {
		t.Fatalf("gc once the install is over: %v (prepared: %v)", err, prepared)
	}
}

// TestInstallNamesEveryUnregisteredInterface: an install into a registry
// that knows none of acme-echo's interfaces is refused naming both
// (acme.echo and acme.diagnostics) and the command that registers one; it
// named the first entrypoint's alone, so an operator following
// operator.md registered it, installed, and was refused again for the
// next.
func TestInstallNamesEveryUnregisteredInterface(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	dir, st := r.dir, r.st
	root := pipelinetest.OpenRoot(t, st, r.fx.Echo.Path)
	_, err := Install(ctx, st, r.reg, Options{
		Root: root, Platforms: []string{"host"},
		Python: python, NoCompile: true, Client: r.client,
	})
	if refusal.CodeOf(err) != refusal.InterfaceUnregistered {
		t.Fatalf("Install: %v, want interface_unregistered", err)
	}
	for _, want := range []string{"acme.echo", "acme.diagnostics", "register each one's schema first"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionRegisterInterface || r.Target != "" {
		t.Errorf("remedy %+v, want register_interface (of no one interface: there are two)", r)
	}
	// Refused before anything was built or fetched: no env, no blob (it
	// built the host env first, then refused); once the caller closes the
	// root wheel, not even its private copy.
	root.Close()
	for _, sub := range []string{"envs", "blobs"} {
		var found []string
		filepath.WalkDir(filepath.Join(dir, "store", sub), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (sub == "blobs" || !strings.HasPrefix(d.Name(), ".")) {
				found = append(found, p)
			}
			return nil
		})
		if len(found) > 0 {
			t.Errorf("the refused install wrote %v", found)
		}
	}
}

// TestInstallWithoutRuntimeRefused: a provider whose lock resolves no
// cruxible-provider-runtime (acme-bare) is refused runtime_missing before
// anything is built, fetched or proposed: approved, its pin would be one
// every run refuses (DESIGN §10: every provider depends on the runtime).
// It was built and proposed, with a warning.
func TestInstallWithoutRuntimeRefused(t *testing.T) {
	needPython(t)
	ctx := context.Background()
	dir := testdir.New(t)
	bare, err := fixtures.BuildBare(filepath.Join(dir, "bare"), fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t, dir)
	reg := registry.NewStub()
	schema, err := os.ReadFile(filepath.Join(dir, "bare", "interfaces", "acme.bare.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.RegisterInterface(ctx, "acme.bare", schema); err != nil {
		t.Fatal(err)
	}
	root := pipelinetest.OpenRoot(t, st, bare.Path)
	var warnings []string
	_, err = Install(ctx, st, reg, Options{
		Root: root, Platforms: []string{"host"}, Python: python, NoCompile: true,
		Warn: func(s string) { warnings = append(warnings, s) },
	})
	if refusal.CodeOf(err) != refusal.RuntimeMissing {
		t.Fatalf("Install of a provider without the runtime: %v, want refused runtime_missing", err)
	}
	for _, want := range []string{filepath.Base(bare.Path), "cruxible-provider-runtime", "docs/provider-authors.md", "install the new wheel", "nothing was built or proposed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if css, err := reg.ChangeSets(ctx); err != nil || len(css) != 0 {
		t.Errorf("the refused install proposed %d change-sets (%v)", len(css), err)
	}
	root.Close()
	var found []string
	filepath.WalkDir(filepath.Join(dir, "store"), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
		case d.IsDir() && d.Name() == ".interpreters":
			return filepath.SkipDir // the interpreter's probe, remembered
		case !d.IsDir() && d.Name() != ".lock" && d.Name() != ".gate": // the store's own
			found = append(found, p)
		}
		return nil
	})
	if len(found) > 0 {
		t.Errorf("the refused install wrote %v", found)
	}
}

// TestInstallChecksImagesFirst: an image of a platform not installed
// (platform_unsupported, naming it and the platforms that install them
// all) and an image built from another resolution than the lock gives
// its platform (provenance_mismatch) are refused before anything is
// built or fetched; both were refused after every platform's env.
func TestInstallChecksImagesFirst(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	r.registerInterfaces(t)
	dir, fx, st, reg := r.dir, r.fx, r.st, r.reg
	host, err := pipeline.HostPlatform(ctx, st, python)
	if err != nil {
		t.Fatal(err)
	}
	const arm = "cp311-manylinux_2_36_aarch64"
	image := func(plat string) registry.Materialization {
		return registry.Materialization{Backend: registry.BackendContainer, Platform: plat, Image: "registry.example/acme/echo@sha256:" + strings.Repeat("ab", 32),
			Resolution: digest.Sum([]byte("another resolution"))}
	}
	root := pipelinetest.OpenRoot(t, st, fx.Echo.Path)
	for _, c := range []struct {
		name  string
		image registry.Materialization
		code  refusal.Code
		says  []string
	}{
		{"platform not installed", image(arm), refusal.PlatformUnsupported, []string{arm, "not among the platforms installed (host)"}},
		{"another resolution", image(host), refusal.ProvenanceMismatch, []string{"was built from resolution", host}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// No index: what fetching would need is not there, and
			// nothing is fetched before the refusal.
			_, err := Install(ctx, st, reg, Options{Root: root, Platforms: []string{"host"}, Python: python, NoCompile: true, Containers: []registry.Materialization{c.image}})
			if refusal.CodeOf(err) != c.code {
				t.Fatalf("Install: %v, want %s", err, c.code)
			}
			for _, want := range c.says {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
			if c.code == refusal.PlatformUnsupported {
				if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionNamePlatform || r.Target != "host,"+arm {
					t.Errorf("remedy %+v, want name_platform host,%s", r, arm)
				}
			}
			if envs, _ := filepath.Glob(filepath.Join(dir, "store", "envs", "[^.]*")); len(envs) != 0 {
				t.Errorf("the refused install built %v", envs)
			}
		})
	}
}

// TestCheckWheelInterfaces: Install's interface check of a wheel file,
// run alone (install at a --home with no store checks it against an
// empty registry before making one): every interface the registry lacks
// named, nil once they are registered, and a wheel that cannot be read
// left to the install's own refusal.
func TestCheckWheelInterfaces(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	err := CheckWheelInterfaces(ctx, r.reg, r.fx.Echo.Path)
	if refusal.CodeOf(err) != refusal.InterfaceUnregistered || !strings.Contains(err.Error(), "acme.echo, acme.diagnostics") {
		t.Errorf("against an empty registry: %v, want interface_unregistered naming both", err)
	}
	r.registerInterfaces(t)
	if err := CheckWheelInterfaces(ctx, r.reg, r.fx.Echo.Path); err != nil {
		t.Errorf("with its interfaces registered: %v", err)
	}
	if err := CheckWheelInterfaces(ctx, r.reg, filepath.Join(r.dir, "absent.whl")); err != nil {
		t.Errorf("of no wheel: %v, want nil (the install's reading refuses it)", err)
	}
}
