package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestProposeAdviceKeepsEnvsBesideImages: a pin holds local envs and
// container images together (one install: --python runs one of its
// --platforms, and --backend container --image adds the images). The
// advice that proposes such a pin again, or one that adds an image to a
// pin of envs, rendered `install … --backend container` without
// --no-compile where the pin's envs were made without bytecode, which
// their digests cover: followed as printed, it proposed other envs (its
// diff replaced them). Each such advice now carries it, and, run as
// printed (placeholders filled in), proposes the pin's envs: verify
// --backend container of a pin of envs (which adds the images), the
// proposal of another image where a pinned layout is gone (verify
// --backend container's restore_layout, its "or"), and a pin approved
// below a threshold raised since, whose advice proposes the very
// provider the pin holds, envs and images.
func TestProposeAdviceKeepsEnvsBesideImages(t *testing.T) {
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("needs %s", envPython)
	}
	dir := testdir.New(t)
	fx, idx := fixtureindex.Serve(t, dir)
	baseRef, _ := imagetest.MultiArchBase(t, filepath.Join(dir, "base"))
	priv, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "builder.key"), priv, 0o600)
	os.WriteFile(filepath.Join(dir, "builder.pub"), pub, 0o644)
	home, state, out := filepath.Join(dir, "home"), filepath.Join(dir, "state"), filepath.Join(dir, "oci")
	env := []string{"CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000", "XDG_STATE_HOME=" + state}
	run, ok := homeRunner(t, home, env)
	idRE := regexp.MustCompile(`(?:proposed change-set|change-set) (sha256:[0-9a-f]{64})`)
	approve := func(what, stdout string, keys ...string) {
		t.Helper()
		id := idRE.FindStringSubmatch(stdout)
		if id == nil {
			t.Fatalf("%s: no change-set proposed: %s", what, stdout)
		}
		for _, k := range keys {
			ok("approve "+what, "changeset", "approve", id[1], "--key", filepath.Join(dir, k+".key"), "--quiet")
		}
	}
	// provider is the provider a pin (provider show) or a change-set
	// (changeset show) holds, from its --json document.
	provider := func(args ...string) map[string]any {
		t.Helper()
		var doc struct {
			Spec struct {
				Changes []struct{ Provider map[string]any }
			}
		}
		if s := ok(strings.Join(args, " "), append(args, "--json")...); json.Unmarshal([]byte(s), &doc) != nil || len(doc.Spec.Changes) != 1 {
			t.Fatalf("%v: no provider in %s", args, s)
		}
		return doc.Spec.Changes[0].Provider
	}
	// local is what a provider pins of each backend but container.
	local := func(p map[string]any) []any {
		var ms []any
		for _, m := range p["materializations"].([]any) {
			if m.(map[string]any)["backend"] != "container" {
				ms = append(ms, m)
			}
		}
		return ms
	}
	// follow runs the advice of r (the "or" one where or is true) with
	// fill's placeholders replaced, and returns the provider it proposed
	// and its change-set's id.
	follow := func(what string, r result, code refusal.Code, or bool, fill ...string) (map[string]any, string) {
		t.Helper()
		line := strings.TrimSpace(r.stderr)
		cmdline, alt, _ := strings.Cut(line[strings.Index(line, "; to fix: ")+len("; to fix: "):], "; or: ")
		if or {
			cmdline = alt
		}
		if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(code)+":") || !strings.HasPrefix(cmdline, "cruxprov install ") {
			t.Fatalf("%s: want %s advising an install: %+v", what, code, r)
		}
		if !strings.Contains(cmdline, " --no-compile ") {
			t.Errorf("%s: the advice proposes envs with bytecode, the pin's have none: %s", what, cmdline)
		}
		cmd := exec.Command("sh", "-c", strings.NewReplacer(append(fill, "--index URL", "--index "+idx)...).Replace(cmdline))
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH")), env...)
		f := runCmd(t, cmd)
		id := idRE.FindStringSubmatch(f.stdout)
		if f.code != 0 || id == nil {
			t.Fatalf("%s: the advice as printed: %+v", what, f)
		}
		return provider("changeset", "show", id[1]), id[1]
	}

	var built struct{ Digest string }
	r := run("image", "build", fx.Echo.Name+"=="+fx.Echo.Version, "--sha256", fx.Echo.SHA256.Hex(), "--index", idx,
		"--platform", imagetest.Platform+","+imagetest.PlatformARM, "--base", baseRef,
		"--shim", imagetest.Platform+"="+imagetest.Shim(t), "--shim", imagetest.PlatformARM+"="+imagetest.ShimFor(t, "arm64"),
		"--output", "oci:"+out, "--sign-key", filepath.Join(dir, "builder.key"), "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &built) != nil || built.Digest == "" {
		t.Fatalf("image build: %+v", r)
	}
	for _, k := range []string{"alice", "bob"} {
		ok("key generate "+k, "key", "generate", "--out", filepath.Join(dir, k), "--quiet")
	}
	ok("key trust alice", "key", "trust", filepath.Join(dir, "alice.pub"), "--name", "alice")
	approve("the builder key", ok("key trust ci", "key", "trust", filepath.Join(dir, "builder.pub"), "--name", "ci", "--role", "builder"), "alice")
	for _, i := range []string{"acme.echo", "acme.diagnostics"} {
		ok("interface register "+i, "interface", "register", i, "--schema", fx.Interfaces[i].Path, "--quiet")
	}
	approve("the local install", ok("install", "install", fx.Echo.Path, "--index", idx, "--platform", "host", "--python", envPython, "--no-compile"), "alice")
	envs := local(provider("provider", "show", "acme-echo"))

	// A pin of envs made without bytecode, and an image to add: the
	// proposal keeps the envs (it proposed them with bytecode).
	image := "oci:" + out + "@" + built.Digest
	p, id := follow("verify --backend container of a pin of envs", run("verify", "acme-echo", "--backend", "container", "--state-dir", state), refusal.PinUnapproved, false,
		"PLATFORM", imagetest.Platform+","+imagetest.PlatformARM, "PYTHON", envPython, "REF@sha256:DIGEST", image)
	if got := local(p); !reflect.DeepEqual(got[:1], envs) {
		t.Fatalf("the proposal of an image beside the pin's env proposes another env:\n%v\nwant\n%v", got, envs)
	}
	approve("the envs and images", "change-set "+id, "alice")
	both := provider("provider", "show", "acme-echo")

	// Its layout gone: the other image proposed (the layout copied
	// elsewhere) keeps the envs.
	aside := filepath.Join(dir, "ci-artifact")
	if err := os.Rename(out, aside); err != nil {
		t.Fatal(err)
	}
	p, _ = follow("verify of a layout gone", run("verify", "acme-echo", "--backend", "container", "--platform", imagetest.Platform, "--state-dir", state), refusal.FetchFailed, true,
		"REF@sha256:DIGEST", "oci:"+aside+"@"+built.Digest)
	if got, want := local(p), local(both); !reflect.DeepEqual(got, want) {
		t.Fatalf("the proposal of another image proposes other envs:\n%v\nwant\n%v", got, want)
	}
	if err := os.Rename(aside, out); err != nil {
		t.Fatal(err)
	}

	// Approved below a threshold raised since: the advice proposes the
	// very provider the pin holds, its envs and images.
	approve("bob", ok("key trust bob", "key", "trust", filepath.Join(dir, "bob.pub"), "--name", "bob"), "alice")
	approve("threshold 2", ok("policy set", "policy", "set", "--threshold", "2"), "alice")
	if p, _ := follow("verify below the threshold", run("verify", "acme-echo", "--state-dir", state), refusal.PinUnapproved, false); !reflect.DeepEqual(p, both) {
		t.Fatalf("the advice proposes another provider than the pin's envs and images:\n%v\nwant\n%v", p, both)
	}
}
