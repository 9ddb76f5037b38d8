package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/install"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/sign"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/verify/container"
)

// TestContainerRunWithoutRuntimeRefused: an image whose env has no
// harness module (its provider's lock lists no cruxible-provider-runtime,
// as its signed provenance shows) is refused runtime_missing before
// anything is spawned (DESIGN §10), as a local env without it is, and the
// refusal is recorded. It was spawned: the container's python failed to
// import the harness and the run was recorded error harness_exited, exit
// 1, the provider's failure.
func TestContainerRunWithoutRuntimeRefused(t *testing.T) {
	for _, b := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s is not installed", b)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("runs podman as root (rootless podman here cannot hold the run's limits: executor.md)")
	}
	baseLayout, baseDigest := imagetest.Base(t)
	base, _, _, idx, shim := imageSetup(t, "cruxprov-noruntime-")
	bare, err := fixtures.BuildBare(filepath.Join(base, "bare"), fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	home, state := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000", "XDG_STATE_HOME="+state)
	run := func(a ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, a...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	ok := func(r result, what string) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	var doc struct {
		ChangeSet struct{ Metadata struct{ ID string } } `json:"changeSet"`
	}
	// image build refuses such an image (TestImageBuildWithoutRuntimeRefused):
	// it is made here as an older cruxprov made it, by image.Build without
	// that check, signed by the builder key the registry trusts.
	out, d := bareImage(t, base, bare, "oci:"+baseLayout+"@"+baseDigest.String(), shim)
	alice := filepath.Join(t.TempDir(), "alice")
	ok(run("key", "generate", "--out", alice, "--quiet"), "key generate")
	ok(run("key", "trust", alice+".pub", "--name", "alice"), "key trust alice")
	if err := json.Unmarshal([]byte(ok(run("key", "trust", filepath.Join(base, "builder.pub"), "--name", "ci", "--role", "builder", "--json"), "key trust ci")), &doc); err != nil {
		t.Fatal(err)
	}
	ok(run("changeset", "approve", doc.ChangeSet.Metadata.ID, "--key", alice+".key", "--quiet"), "approve the builder")
	ok(run("interface", "register", "acme.bare", "--schema", filepath.Join(base, "bare", "interfaces", "acme.bare.json"), "--quiet"), "interface register")
	// install refuses such a provider too (TestInstallWithoutRuntimeRefused
	// in install/): its pin is proposed here as an older cruxprov proposed
	// it, by what `install --backend container --image` runs, without
	// that check.
	ok(run("changeset", "approve", bareInstall(t, home, bare, "oci:"+out+"@"+d, idx), "--key", alice+".key", "--quiet"), "approve the install")
	input := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(input, []byte(`{}`), 0o644)
	r := run("run", fixtures.BareName, "hello", "--input", input, "--backend", "container")
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: "+string(refusal.RuntimeMissing)+": ") || !strings.Contains(r.stderr, "cruxible-provider-runtime") {
		t.Fatalf("a container run of an image without the runtime: %+v, want refused %s", r, refusal.RuntimeMissing)
	}
	var scan struct {
		Attempts []struct {
			Outcome *struct {
				Status    string `json:"status"`
				ErrorCode string `json:"error_code"`
				ExitCode  int    `json:"exit_code"`
			} `json:"outcome"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(ok(run("receipts", "scan", "--json"), "receipts scan")), &scan); err != nil {
		t.Fatal(err)
	}
	if len(scan.Attempts) != 1 || scan.Attempts[0].Outcome == nil || scan.Attempts[0].Outcome.Status != "refused" ||
		scan.Attempts[0].Outcome.ErrorCode != string(refusal.RuntimeMissing) || scan.Attempts[0].Outcome.ExitCode != -1 {
		t.Errorf("the receipt of the refused run: %+v", scan.Attempts)
	}
}

// bareImage builds the image of the provider bare, which has no runtime,
// into a new OCI layout on base with the cruxshim shim, signed by
// base/builder.key (imageSetup's, password pw) for the builder id
// https://ci.example/builder, through image.Build with its runtime check
// off (imagetest.WithoutRuntimeCheck), and returns the layout and the
// image's digest.
func bareImage(t *testing.T, base string, bare fixtures.Provider, baseRef, shim string) (string, string) {
	t.Helper()
	imagetest.WithoutRuntimeCheck(t)
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join(base, "builder.key"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := sign.LoadPrivateKey(pem, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "oci")
	res, err := image.Build(context.Background(), st, image.Options{
		Root: pipelinetest.OpenRoot(t, st, bare.Path), Platforms: []string{imagetest.Platform},
		Base: baseRef, Shims: map[string]string{"": shim}, Epoch: time.Unix(1700000000, 0),
		Key: key, BuilderID: "https://ci.example/builder", Tool: "cruxprov-test", Output: out,
	})
	if err != nil {
		t.Fatalf("image.Build of %s without the runtime check: %v", bare.Path, err)
	}
	return out, res.Digest.String()
}

// bareInstall proposes, in the store home, the registration of the
// provider bare (which has no runtime) with the container materialization
// of the image ref, as `install bare --index idx --backend container
// --image ref --python debian` does but with the runtime check off
// (pipelinetest.WithoutRuntimeCheck), and returns the change-set's id.
func bareInstall(t *testing.T, home string, bare fixtures.Provider, ref, idx string) string {
	t.Helper()
	pipelinetest.WithoutRuntimeCheck(t)
	ctx := context.Background()
	reg, err := registry.OpenDir(ctx, filepath.Join(home, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	ms, _, err := container.Materializations(ctx, reg, ref, bare.SHA256, digest.Digest{}, image.VerifyOptions{})
	if err != nil {
		t.Fatalf("the image %s: %v", ref, err)
	}
	client, err := index.New(idx, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var plats []string
	for _, m := range ms {
		plats = append(plats, m.Platform)
	}
	res, err := install.Install(ctx, st, reg, install.Options{
		Root: pipelinetest.OpenRoot(t, st, bare.Path), Platforms: plats, Python: debian, Client: client, Containers: ms,
	})
	if err != nil {
		t.Fatalf("install of %s without the runtime check: %v", bare.Path, err)
	}
	return res.ChangeSet.Metadata.ID.String()
}
