package main

import (
	"encoding/json"

	"github.com/cruxible/cruxprov/digest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

// TestVerifyPlatformThatCannotBeOne: verify and run of an approved
// provider with a --platform that is no platform ("garbage") are refused
// platform_unsupported, as lock resolve --platform garbage is, advising
// the list of presets, which runs; they were refused pin_unapproved,
// advising to propose the provider again "for garbage". The container
// backend too. A preset the pin has no env for stays pin_unapproved,
// naming what the pin has.
func TestVerifyPlatformThatCannotBeOne(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	run, _, approveInstall := approvingStore(t, w, base, debian)
	approveInstall()
	in := filepath.Join(base, "in.json")
	os.WriteFile(in, []byte(`{"message":"hi"}`), 0o644)
	follow := adviceFollower(t, base, nil)
	for _, args := range [][]string{
		{"verify", "acme-echo", "--platform", "garbage"},
		{"verify", "acme-echo", "--backend", "container", "--platform", "garbage"},
		{"run", "acme-echo", "echo", "--input", in, "--platform", "garbage"},
		{"run", "acme-echo", "echo", "--input", in, "--backend", "container", "--platform", "garbage"},
	} {
		r := run(args...)
		if !strings.Contains(r.stderr, `no platform "garbage"`) || strings.Contains(r.stderr, "propose") {
			t.Errorf("%v: %+v", args, r)
		}
		f := follow(strings.Join(args, " "), r, refusal.PlatformUnsupported, "cruxprov platform list")
		if !strings.Contains(f.stdout, "cp312-manylinux_2_17_aarch64") {
			t.Errorf("%v: platform list lists no preset: %+v", args, f)
		}
	}
	r := run("verify", "acme-echo", "--platform", "cp312-manylinux_2_17_aarch64")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.PinUnapproved)+": provider acme-echo has no accepted local materialization for cp312-manylinux_2_17_aarch64 (its pin has: local cp311-") {
		t.Errorf("a preset the pin has no env for: %+v", r)
	}
}

// TestVerifySealMissingAdviceRuns: verify NAME of an approved provider
// whose env lost its seal (seal_missing) advises the rebuild with the
// inputs the accepted pin knows, the package NAME==VERSION and its
// sha256, the platform, the interpreter, and --no-compile for an env
// made without bytecode; it advised `env create --replace --wheel WHEEL
// --platform PLATFORM --python PYTHON`, all placeholders. The advice,
// run as printed (the index from the store's config.yaml; --index URL
// filled in without it), rebuilds the env under its pinned digest and
// verify passes again. env verify PATH, which knows no pin, still asks
// for the inputs.
func TestVerifySealMissingAdviceRuns(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	home := filepath.Join(base, "home")
	run, must, approveInstall := approvingStore(t, w, base, debian)
	approveInstall() // --no-compile
	var rep struct {
		Env             string
		Materialization struct{ Platform string }
	}
	if err := json.Unmarshal([]byte(must("verify", "acme-echo", "--json").stdout), &rep); err != nil || rep.Env == "" {
		t.Fatalf("verify --json: %v %+v", err, rep)
	}
	b, err := os.ReadFile(w.echo)
	if err != nil {
		t.Fatal(err)
	}
	want := "cruxprov env create --replace acme-echo==1.0.0 --sha256 " + digest.Sum(b).Hex() + " --platform " + rep.Materialization.Platform + " --python " + debian + " --no-compile"
	follow := adviceFollower(t, base, []string{"CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME=" + filepath.Join(base, "state")})
	cfg := filepath.Join(home, "config.yaml")
	for _, tc := range []struct {
		name   string
		config bool
	}{{"index in config.yaml", true}, {"--index URL", false}} {
		{ // (not subtests: the store's helpers fail the parent test)
			os.Remove(cfg)
			advice, fill := want+" --home "+home, []string(nil)
			if tc.config {
				if err := os.WriteFile(cfg, []byte("format: cruxprov.config/v1\nindex: "+w.url+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				advice, fill = want+" --index URL --home "+home, []string{"--index URL", "--index " + w.url}
			}
			if err := os.Remove(rep.Env + ".seal.json"); err != nil {
				t.Fatal(err)
			}
			r := run("verify", "acme-echo")
			follow(tc.name+": verify of an env without its seal", r, refusal.SealMissing, advice, fill...)
			must("verify", "acme-echo", "--deep")
			// env verify PATH knows no pin: the operator names the inputs.
			os.Remove(rep.Env + ".seal.json")
			r = run("env", "verify", rep.Env)
			if !strings.Contains(r.stderr, "to fix: cruxprov env create --replace --wheel WHEEL --platform PLATFORM --python PYTHON") {
				t.Errorf("%s: env verify PATH without its seal: %+v", tc.name, r)
			}
			if tc.config {
				follow(tc.name+": verify again", run("verify", "acme-echo"), refusal.SealMissing, advice)
			} else {
				follow(tc.name+": verify again", run("verify", "acme-echo"), refusal.SealMissing, advice, fill...)
			}
		}
	}
	// The --json refusal carries the inputs.
	os.Remove(rep.Env + ".seal.json")
	r := run("verify", "acme-echo", "--json")
	var doc struct {
		Refused struct {
			Code   string
			Remedy struct {
				Action, Command, Package, Python string
				Platforms                        []string
				NoBytecode                       bool
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Refused.Code != string(refusal.SealMissing) ||
		doc.Refused.Remedy.Package != "acme-echo==1.0.0@sha256:"+digest.Sum(b).Hex() || doc.Refused.Remedy.Python != debian ||
		len(doc.Refused.Remedy.Platforms) != 1 || !doc.Refused.Remedy.NoBytecode || !strings.HasPrefix(doc.Refused.Remedy.Command, want) {
		t.Errorf("--json: %v %+v", err, doc)
	}
}

// TestVerifyEnvGoneAdviceRuns: verify NAME of an approved provider whose
// env is gone from the store, its tree and its seal both (removed by
// hand), advises the same filled rebuild as for a lost seal alone: the
// accepted pin knows the inputs, and their digest is the env's name. It
// advised `cruxprov env list`, which no longer lists the env. The advice,
// run as printed, rebuilds the env under its pinned digest and verify
// passes again; run NAME gives the same advice.
func TestVerifyEnvGoneAdviceRuns(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	home := filepath.Join(base, "home")
	run, must, approveInstall := approvingStore(t, w, base, debian)
	approveInstall() // --no-compile
	var rep struct {
		Env             string
		Materialization struct{ Platform string }
	}
	if err := json.Unmarshal([]byte(must("verify", "acme-echo", "--json").stdout), &rep); err != nil || rep.Env == "" {
		t.Fatalf("verify --json: %v %+v", err, rep)
	}
	b, err := os.ReadFile(w.echo)
	if err != nil {
		t.Fatal(err)
	}
	advice := "cruxprov env create --replace acme-echo==1.0.0 --sha256 " + digest.Sum(b).Hex() + " --platform " + rep.Materialization.Platform +
		" --python " + debian + " --no-compile --index URL --home " + home
	follow := adviceFollower(t, base, []string{"CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME=" + filepath.Join(base, "state")})
	gone := func() {
		t.Helper()
		testdir.Writable(rep.Env)
		for _, p := range []string{rep.Env, rep.Env + ".index", rep.Env + ".seal.json"} {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	gone()
	in := filepath.Join(base, "in.json")
	os.WriteFile(in, []byte(`{"message":"hi"}`), 0o644)
	r := run("run", "acme-echo", "echo", "--input", in)
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.SealMissing)+": ") ||
		!strings.Contains(r.stderr, "is gone") || !strings.HasSuffix(strings.TrimSpace(r.stderr), "; to fix: "+advice) {
		t.Errorf("run of a provider whose env is gone: %+v\nwant advice %q", r, advice)
	}
	r = run("verify", "acme-echo")
	if !strings.Contains(r.stderr, "is gone") {
		t.Errorf("verify of a provider whose env is gone does not say so: %+v", r)
	}
	follow("verify of a provider whose env and seal are gone", r, refusal.SealMissing, advice, "--index URL", "--index "+w.url)
	must("verify", "acme-echo", "--deep")
	tok := filepath.Join(base, "token")
	os.WriteFile(tok, []byte("s3cret"), 0o600)
	must("run", "acme-echo", "echo", "--input", in, "--secret", "acme/api-token=@"+tok)
}

// TestVerifyPlatformHost: verify and run --platform host of a provider
// installed --platform host pick the env pinned for the host's platform,
// as install, env create and lock resolve take host: the id of the
// platform of config.yaml's python, else python3 (pipeline.HostPlatform).
// They were refused pin_unapproved "no accepted local materialization for
// host", advising to propose the provider again for it. With the
// container backend host is that id too, which the pin has no image for.
// An interpreter that cannot be probed is refused platform_unsupported,
// naming it.
func TestVerifyPlatformHost(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	run, must, approveInstall := approvingStore(t, w, base, debian)
	approveInstall()
	in := filepath.Join(base, "in.json")
	os.WriteFile(in, []byte(`{"message":"hi"}`), 0o644)
	secret := filepath.Join(base, "token")
	os.WriteFile(secret, []byte("s"), 0o600)
	var rep struct {
		Materialization struct{ Platform string }
	}
	if err := json.Unmarshal([]byte(must("verify", "acme-echo", "--json").stdout), &rep); err != nil || rep.Materialization.Platform == "" {
		t.Fatalf("verify --json: %v %+v", err, rep)
	}
	must("verify", "acme-echo", "--platform", "host")
	must("run", "acme-echo", "echo", "--input", in, "--secret", "acme/api-token=@"+secret, "--platform", "host")
	r := run("verify", "acme-echo", "--backend", "container", "--platform", "host")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.PinUnapproved)+": provider acme-echo has no accepted container materialization for "+rep.Materialization.Platform+" ") {
		t.Errorf("container, host: %+v", r)
	}
	cfg := filepath.Join(base, "home", "config.yaml")
	if err := os.WriteFile(cfg, []byte("format: cruxprov.config/v1\npython: "+filepath.Join(base, "no-python")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"verify", "acme-echo", "--platform", "host"},
		{"run", "acme-echo", "echo", "--input", in, "--platform", "host"},
	} {
		r := run(args...)
		if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.PlatformUnsupported)+": --platform host is the platform of the interpreter "+filepath.Join(base, "no-python")+",") {
			t.Errorf("%v, config.yaml's python missing: %+v", args, r)
		}
	}
}

// TestVerifySealMissingAdviceNonPresetHost: the rebuild verify advises for
// an env whose seal is missing names the pin's platform id, which for an
// env made --platform host on a host no preset covers (a glibc newer than
// the presets', here as the store's probe cache has it) is no preset: env
// create --platform refused it ("no platform preset"), so the advice
// could not be run. env create takes it where the interpreter's host
// platform is that id: the advice, run as printed, rebuilds the env under
// its pinned digest and verify passes (fetch takes the id too); another
// id is still refused, naming the interpreter's.
func TestVerifySealMissingAdviceNonPresetHost(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	home := filepath.Join(base, "home")
	run, must, approveInstall := approvingStore(t, w, base, debian)
	// The host as the probe cache remembers it, moved to glibc 2.99.
	must("fetch", "--wheel", w.echo, "--platform", "host", "--python", debian, "--index", w.url, "--quiet")
	cached, _ := filepath.Glob(filepath.Join(home, "envs", ".interpreters", "*.json"))
	if len(cached) != 1 {
		t.Fatalf("probe cache: %v", cached)
	}
	b, err := os.ReadFile(cached[0])
	if err != nil {
		t.Fatal(err)
	}
	var entry struct {
		Interpreter struct{ Glibc string }
	}
	json.Unmarshal(b, &entry)
	major, minor, ok := strings.Cut(entry.Interpreter.Glibc, ".")
	if !ok || major != "2" {
		t.Skipf("host glibc %q: not a manylinux host", entry.Interpreter.Glibc)
	}
	moved := strings.NewReplacer("manylinux_2_"+minor+"_", "manylinux_2_99_", `"glibc":"2.`+minor+`"`, `"glibc":"2.99"`).Replace(string(b))
	if moved == string(b) || !strings.Contains(moved, `"glibc":"2.99"`) {
		t.Fatalf("probe cache entry not moved: %s", b)
	}
	if err := os.WriteFile(cached[0], []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	approveInstall()
	var rep struct {
		Env             string
		Materialization struct{ Platform string }
	}
	if err := json.Unmarshal([]byte(must("verify", "acme-echo", "--json").stdout), &rep); err != nil || !strings.Contains(rep.Materialization.Platform, "manylinux_2_99_") {
		t.Fatalf("verify --json: %v %+v", err, rep)
	}
	wb, err := os.ReadFile(w.echo)
	if err != nil {
		t.Fatal(err)
	}
	want := "cruxprov env create --replace acme-echo==1.0.0 --sha256 " + digest.Sum(wb).Hex() + " --platform " + rep.Materialization.Platform + " --python " + debian + " --no-compile --index URL --home " + home
	if err := os.Remove(rep.Env + ".seal.json"); err != nil {
		t.Fatal(err)
	}
	follow := adviceFollower(t, base, []string{"CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME=" + filepath.Join(base, "state")})
	follow("verify of an env without its seal", run("verify", "acme-echo"), refusal.SealMissing, want, "--index URL", "--index "+w.url)
	must("verify", "acme-echo", "--deep")
	// fetch, which probes no interpreter for a preset, takes it too.
	must("fetch", "--wheel", w.echo, "--platform", rep.Materialization.Platform, "--python", debian, "--index", w.url, "--quiet")
	other := strings.Replace(rep.Materialization.Platform, "_2_99_", "_2_98_", 1)
	r := run("env", "create", "--replace", "acme-echo==1.0.0", "--sha256", digest.Sum(wb).Hex(), "--platform", other, "--python", debian, "--no-compile", "--index", w.url)
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.PlatformUnsupported)+": no platform preset \""+other+"\", nor is it the host platform of "+debian+" ("+rep.Materialization.Platform+")") {
		t.Errorf("env create --platform %s: %+v", other, r)
	}
}

// TestVerifyUnpinnedPlatformAdviceFilled: verify and run --platform P of a
// provider whose pin has no env for P advise proposing it again for P with
// the platforms the pin has and P, and the pin's interpreter: the advice
// named --platform PLATFORM --python PYTHON, placeholders, though the pin
// and the command line know them. With the index in the store's
// config.yaml the advice has no placeholder left, and runs as printed,
// proposing the pin's env and P's resolution; without it, --index URL is
// the one to fill in (no pin records the index).
func TestVerifyUnpinnedPlatformAdviceFilled(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	home := filepath.Join(base, "home")
	run, must, approveInstall := approvingStore(t, w, base, debian)
	approveInstall()
	var rep struct {
		Env             string
		Materialization struct{ Platform string }
	}
	if err := json.Unmarshal([]byte(must("verify", "acme-echo", "--json").stdout), &rep); err != nil || rep.Materialization.Platform == "" {
		t.Fatalf("verify --json: %v %+v", err, rep)
	}
	b, err := os.ReadFile(w.echo)
	if err != nil {
		t.Fatal(err)
	}
	const other = "cp312-manylinux_2_17_aarch64"
	// --no-compile: the pin's env was made without bytecode (approvingStore),
	// which its digest covers; the advice without it proposed another env.
	want := "cruxprov install acme-echo==1.0.0 --sha256 " + digest.Sum(b).Hex() + " --platform " + rep.Materialization.Platform + "," + other + " --python " + debian + " --no-compile"
	in := filepath.Join(base, "in.json")
	os.WriteFile(in, []byte(`{"message":"hi"}`), 0o644)
	follow := adviceFollower(t, base, []string{"CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME=" + filepath.Join(base, "state")})
	placeholder := regexp.MustCompile(`<[^>]*>|\b[A-Z][A-Z_]{2,}\b`)
	for _, args := range [][]string{
		{"verify", "acme-echo", "--platform", other},
		{"run", "acme-echo", "echo", "--input", in, "--platform", other},
	} {
		r := run(args...)
		follow(strings.Join(args, " ")+", no index configured", r, refusal.PinUnapproved, want+" --index URL --home "+home, "--index URL", "--index "+w.url)
	}
	cfg := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(cfg, []byte("format: cruxprov.config/v1\nindex: "+w.url+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run("verify", "acme-echo", "--platform", other)
	_, advice, _ := strings.Cut(r.stderr, "; to fix: ")
	if m := placeholder.FindString(advice); m != "" {
		t.Errorf("the advice has a placeholder %q: %s", m, advice)
	}
	f := follow("verify, the index in config.yaml", r, refusal.PinUnapproved, want+" --home "+home)
	if !strings.Contains(f.stdout, other) || !strings.Contains(f.stdout, "env "+rep.Env) {
		t.Errorf("the install advised proposes neither the pin's env nor %s: %+v", other, f)
	}
}

// TestVerifyResolutionOnlyPlatformAdviceRuns: verify --platform P of a
// provider installed for the host and P, whose interpreter does not run
// P (its pin holds P's resolution alone, for an image), advises the
// verify of the env it has, which runs. It advised proposing the
// provider again with the pin's platforms and interpreter: an install
// that proposed the same pin, "it changes nothing … reject it".
func TestVerifyResolutionOnlyPlatformAdviceRuns(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	const arm = "cp312-manylinux_2_17_aarch64"
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	run, must, _ := approvingStore(t, w, base, debian)
	id := strings.TrimSpace(must("install", w.echo, "--platform", "host,"+arm, "--python", debian, "--index", w.url, "--no-compile", "--quiet").stdout)
	must("changeset", "approve", id, "--key", filepath.Join(base, "keys", "k.key"))
	follow := adviceFollower(t, base, []string{"CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME=" + filepath.Join(base, "state")})
	r := run("verify", "acme-echo", "--platform", arm)
	if !strings.Contains(r.stderr, "its pin holds the resolution of "+arm+" alone") {
		t.Errorf("verify --platform %s: %+v", arm, r)
	}
	host := strings.TrimSpace(must("platform", "show", "host", "--python", debian, "--quiet").stdout)
	if i := strings.IndexByte(host, '\n'); i >= 0 {
		host = host[:i]
	}
	host = strings.TrimSpace(strings.TrimPrefix(host, "id"))
	f := follow("verify --platform "+arm, r, refusal.PinUnapproved, "cruxprov --home "+filepath.Join(base, "home")+" verify acme-echo --platform "+host)
	if !strings.HasPrefix(f.stdout, "ok acme-echo revision 1") {
		t.Errorf("the advice: %+v", f)
	}
}
