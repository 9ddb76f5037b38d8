package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/python"
)

// embedInputs writes a manifest and a lock for the distribution name to dir.
func embedInputs(t *testing.T, dir, name string, s *fixtures.Set) (manifestPath, lockPath string) {
	t.Helper()
	m := strings.Replace(string(s.Echo.Manifest), `name = "acme-echo"`, `name = "`+name+`"`, 1)
	manifestPath, lockPath = filepath.Join(dir, "provider.toml"), filepath.Join(dir, "pylock.toml")
	if err := os.WriteFile(manifestPath, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lockPath, s.Echo.Lock, 0o644); err != nil {
		t.Fatal(err)
	}
	return manifestPath, lockPath
}

func members(t *testing.T, path string) map[string][]byte {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	out := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		out[f.Name] = b.Bytes()
	}
	return out
}

// TestPackageEmbed embeds a manifest and lock into a plain wheel: the
// output passes inspect, keeps every other member, is deterministic, and
// pip installs it (with the two files in its dist-info).
func TestPackageEmbed(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	in := t.TempDir()
	plain := wheeltest.Write(t, in, "Acme_Plain-2.0.0-py3-none-any.whl", map[string]string{
		"acme_plain/__init__.py": "from cruxible_provider_runtime import ProviderResult\n\ndef run(ctx):\n    return ProviderResult.ok(ctx.input)\n",
	})
	mf, lf := embedInputs(t, in, "acme-plain", s)
	out := t.TempDir()
	r := cruxprov(t, "package", "embed", plain, "--manifest", mf, "--lock", lf, "-o", out, "--json")
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	var v struct {
		Schema  string `json:"schema"`
		Output  string `json:"output"`
		Inspect struct {
			Wheel struct{ SHA256 string } `json:"wheel"`
		} `json:"inspect"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Schema != "cruxprov.package.embed/v1" {
		t.Fatalf("%v %s", err, r.stdout)
	}
	outPath := filepath.Join(out, "Acme_Plain-2.0.0-py3-none-any.whl")
	if v.Output != outPath {
		t.Fatalf("output %s", v.Output)
	}
	d := inspectJSON(t, outPath)
	if d.Manifest.Name != "acme-plain" || d.Wheel.SHA256 != v.Inspect.Wheel.SHA256 || len(d.Entrypoints) != 4 {
		t.Fatalf("inspect of the output: %+v", d)
	}
	before, after := members(t, plain), members(t, outPath)
	mb, _ := os.ReadFile(mf)
	if !bytes.Equal(after["Acme_Plain-2.0.0.dist-info/cruxible/provider.toml"], mb) ||
		!bytes.Equal(after["Acme_Plain-2.0.0.dist-info/cruxible/pylock.toml"], s.Echo.Lock) {
		t.Error("the embedded files are not the inputs")
	}
	for name, b := range before {
		if strings.HasSuffix(name, "/RECORD") {
			continue
		}
		if !bytes.Equal(after[name], b) {
			t.Errorf("%s changed", name)
		}
	}
	if len(after) != len(before)+2 {
		t.Errorf("%d members, want %d", len(after), len(before)+2)
	}
	if !strings.Contains(string(after["Acme_Plain-2.0.0.dist-info/RECORD"]), "Acme_Plain-2.0.0.dist-info/cruxible/pylock.toml,sha256=") {
		t.Errorf("RECORD does not list the lock:\n%s", after["Acme_Plain-2.0.0.dist-info/RECORD"])
	}

	// The same inputs give the same bytes; embedding again replaces.
	again := filepath.Join(t.TempDir(), "Acme_Plain-2.0.0-py3-none-any.whl")
	if r := cruxprov(t, "package", "embed", outPath, "--manifest", mf, "--lock", lf, "-o", again, "--quiet"); r.code != 0 || strings.TrimSpace(r.stdout) != again {
		t.Fatalf("--quiet prints the wheel written alone: %+v", r)
	}
	x, _ := os.ReadFile(outPath)
	y, _ := os.ReadFile(again)
	if !bytes.Equal(x, y) {
		t.Error("re-embedding the same files changed the bytes")
	}

	// pip installs the output, manifest and lock included.
	if testing.Short() {
		return
	}
	venv := pipVenv(t, s.Runtime.Path, outPath)
	site := strings.TrimSpace(pyRun(t, filepath.Join(venv, "bin", "python"), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
	got, err := os.ReadFile(filepath.Join(site, "Acme_Plain-2.0.0.dist-info", "cruxible", "provider.toml"))
	if err != nil || !bytes.Equal(got, mb) {
		t.Errorf("pip-installed manifest: %v", err)
	}
	pyRun(t, filepath.Join(venv, "bin", "python"), "-I", "-c", "import acme_plain")
}

// TestPackageEmbedPlatformWheel embeds into a foreign platform's wheel and
// pip installs it with --target --platform.
func TestPackageEmbedPlatformWheel(t *testing.T) {
	if testing.Short() {
		t.Skip("pip oracle: skipped in -short")
	}
	s := fixtures.ForTest(t, fixtures.Options{})
	lib := s.NativeLib["win_amd64"]
	in := t.TempDir()
	mf, lf := embedInputs(t, in, "acme-native-lib", s)
	outPath := filepath.Join(t.TempDir(), lib.Filename)
	if r := cruxprov(t, "package", "embed", lib.Path, "--manifest", mf, "--lock", lf, "-o", outPath); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	target := t.TempDir()
	pyRun(t, hostPython(t), "-m", "pip", "install", "--quiet", "--target", target, "--platform", "win_amd64",
		"--only-binary=:all:", "--no-deps", "--no-index", outPath)
	if _, err := os.Stat(filepath.Join(target, "acme_native_lib-1.0.0.dist-info", "cruxible", "pylock.toml")); err != nil {
		t.Error(err)
	}
}

func TestPackageEmbedRefusals(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	in := t.TempDir()
	mf, lf := embedInputs(t, in, "acme-echo", s)
	write := func(name, content string) string {
		p := filepath.Join(in, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wrongName, _ := embedInputs(t, t.TempDir(), "acme-other", s)
	badLock := write("bad.toml", "lock-version = \"1.0\"\n[[packages]]\nname = 5\n")
	selfLock := write("self.toml", string(s.Echo.Lock)+"\n[[packages]]\nname = \"acme-echo\"\nversion = \"1.0.0\"\nwheels = [{ name = \"acme_echo-1.0.0-py3-none-any.whl\", url = \"https://x.example/a.whl\", hashes = { sha256 = \""+strings.Repeat("a", 64)+"\" } }]\n")
	notTOML := write("not.toml", "[[[")
	// acme-echo's METADATA requires cruxible-provider-runtime==
	// python.RuntimeVersion (no marker: on every platform).
	noRuntime := write("noruntime.toml", "lock-version = \"1.0\"\ncreated-by = \"test\"\npackages = []\n")
	oldRuntime := write("oldruntime.toml", strings.ReplaceAll(string(s.Echo.Lock), python.RuntimeVersion, "0.0.9"))
	outDir := t.TempDir()
	out := filepath.Join(outDir, s.Echo.Filename)
	cases := []struct {
		name, code string
		args       []string
	}{
		{"manifest names another wheel", "manifest_invalid", []string{s.Echo.Path, "--manifest", wrongName, "--lock", lf, "-o", out}},
		{"manifest not TOML", "manifest_invalid", []string{s.Echo.Path, "--manifest", notTOML, "--lock", lf, "-o", out}},
		{"lock invalid", "lock_invalid", []string{s.Echo.Path, "--manifest", mf, "--lock", badLock, "-o", out}},
		{"lock lists the provider", "lock_invalid", []string{s.Echo.Path, "--manifest", mf, "--lock", selfLock, "-o", out}},
		{"lock lacks a Requires-Dist", "lock_invalid", []string{s.Echo.Path, "--manifest", mf, "--lock", noRuntime, "-o", out}},
		{"lock pins a Requires-Dist outside its specifier", "lock_invalid", []string{s.Echo.Path, "--manifest", mf, "--lock", oldRuntime, "-o", out}},
		{"tampered source", "record_mismatch", []string{tamper(t, s.Echo.Path, "acme_echo/__init__.py"), "--manifest", mf, "--lock", lf, "-o", out}},
	}
	// What the refusal's detail says, where the code alone does not tell.
	details := map[string]string{
		"lock lacks a Requires-Dist":                      `"cruxible-provider-runtime==` + python.RuntimeVersion + `", but the lock has no cruxible-provider-runtime`,
		"lock pins a Requires-Dist outside its specifier": `"cruxible-provider-runtime==` + python.RuntimeVersion + `", but the lock pins cruxible-provider-runtime 0.0.9`,
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := refusedCode(t, append([]string{"package", "embed"}, c.args...)...); got != c.code {
				t.Errorf("code %s, want %s", got, c.code)
			}
			if r := cruxprov(t, append([]string{"package", "embed"}, c.args...)...); details[c.name] != "" && !strings.Contains(r.stderr, details[c.name]) {
				t.Errorf("the refusal lacks %q: %s", details[c.name], r.stderr)
			}
			ents, _ := os.ReadDir(outDir)
			if len(ents) != 0 {
				t.Errorf("a refused embed left %v", ents)
			}
		})
	}
	for _, u := range []struct {
		name string
		args []string
	}{
		{"no --manifest", []string{s.Echo.Path, "--lock", lf, "-o", out}},
		{"no --lock", []string{s.Echo.Path, "--manifest", mf, "-o", out}},
		{"no -o", []string{s.Echo.Path, "--manifest", mf, "--lock", lf}},
		{"no wheel", []string{"--manifest", mf, "--lock", lf, "-o", out}},
		{"manifest missing", []string{s.Echo.Path, "--manifest", filepath.Join(in, "nope.toml"), "--lock", lf, "-o", out}},
	} {
		t.Run(u.name, func(t *testing.T) {
			if r := cruxprov(t, append([]string{"package", "embed"}, u.args...)...); r.code != exitUsage {
				t.Errorf("%v: %+v", u.args, r)
			}
		})
	}
}

// TestPackageEmbedOutputDirMissing: -o into a directory that does not
// exist is a usage error naming -o (nothing written); it used to exit 1
// with a bare "stat DIR: no such file or directory".
func TestPackageEmbedOutputDirMissing(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	mf, lf := embedInputs(t, t.TempDir(), "acme-echo", s)
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	r := cruxprov(t, "package", "embed", s.Echo.Path, "--manifest", mf, "--lock", lf, "-o", filepath.Join(missing, s.Echo.Filename))
	if r.code != exitUsage || !strings.Contains(r.stderr, "-o") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("%+v", r)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("%s was created", missing)
	}
}

// TestPackageEmbedInputErrors: what the caller named that cannot be used
// is said as such, naming the flag, and a failed embed leaves nothing. A
// missing WHEEL is a usage error as inspect's is (it was refused
// wheel_invalid); an -o that is neither a directory nor this wheel's file
// name is a usage error naming -o (it was refused wheel_invalid, blaming
// the index); a refused embed into -o DIR/ leaves no DIR behind (it was
// made before anything was checked); an -o directory this user cannot
// write is named with -o, not as the temporary directory inside it.
func TestPackageEmbedInputErrors(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	in := t.TempDir()
	mf, lf := embedInputs(t, in, "acme-echo", s)
	wrongName, _ := embedInputs(t, t.TempDir(), "acme-other", s)
	outDir := t.TempDir()
	for _, c := range []struct {
		name, says string
		args       []string
	}{
		{"wheel missing", "usage: WHEEL " + filepath.Join(in, "nope.whl") + ": no such file or directory", []string{filepath.Join(in, "nope.whl"), "--manifest", mf, "--lock", lf, "-o", outDir}},
		{"lock missing", "usage: --lock " + filepath.Join(in, "nope.toml") + ": no such file or directory", []string{s.Echo.Path, "--manifest", mf, "--lock", filepath.Join(in, "nope.toml"), "-o", outDir}},
		{"-o neither a directory nor a wheel name", "usage: -o " + filepath.Join(outDir, "rel3") + " is neither a directory nor a wheel file name: give -o a directory", []string{s.Echo.Path, "--manifest", mf, "--lock", lf, "-o", filepath.Join(outDir, "rel3")}},
		{"-o named for another wheel", "usage: -o " + filepath.Join(outDir, "acme_echo-2.0.0-py3-none-any.whl") + " does not name the same wheel as WHEEL", []string{s.Echo.Path, "--manifest", mf, "--lock", lf, "-o", filepath.Join(outDir, "acme_echo-2.0.0-py3-none-any.whl")}},
		{"-o not a wheel name", "usage: -o " + filepath.Join(outDir, "out.zip") + " is neither a directory nor a wheel file name", []string{s.Echo.Path, "--manifest", mf, "--lock", lf, "-o", filepath.Join(outDir, "out.zip")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cruxprov(t, append([]string{"package", "embed"}, c.args...)...)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, c.says) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%+v, want exit 64 saying %q", r, c.says)
			}
			if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
				t.Errorf("left %v", ents)
			}
		})
	}
	// Refused (and failed) into -o DIR/ that this run made: no DIR left,
	// nor the missing directories above it.
	top := filepath.Join(outDir, "release")
	for _, args := range [][]string{
		{s.Echo.Path, "--manifest", wrongName, "--lock", lf},
		{tamper(t, s.Echo.Path, "acme_echo/__init__.py"), "--manifest", mf, "--lock", lf},
	} {
		r := cruxprov(t, append(append([]string{"package", "embed"}, args...), "-o", filepath.Join(top, "v1")+"/")...)
		if r.code != exitRefused {
			t.Errorf("%v: %+v, want refused", args, r)
		}
		if _, err := os.Stat(top); err == nil {
			t.Errorf("a refused embed left %s", top)
		}
	}
	// A directory made before this run stays.
	if err := os.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := cruxprov(t, "package", "embed", s.Echo.Path, "--manifest", wrongName, "--lock", lf, "-o", top+"/"); r.code != exitRefused {
		t.Errorf("%+v", r)
	}
	if _, err := os.Stat(top); err != nil {
		t.Errorf("a refused embed removed the existing %s: %v", top, err)
	}

	// An -o directory this user may not write (root writes all: as uid
	// 65534).
	asuser.Require(t, "run as uid 65534")
	dir := asuser.Dir(t, "embed-ro")
	exe := asuser.Copy(t, dir, bin)
	var args []string
	for _, f := range []string{s.Echo.Path, mf, lf} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil { // root's: not writable by 65534
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", filepath.Join(dir, "home"),
		"package", "embed", args[0], "--manifest", args[1], "--lock", args[2], "-o", ro+"/")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	r := runCmd(t, cmd)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "error: cannot write the embedded wheel into "+ro+" (-o): permission denied; give -o a directory this user may write") ||
		strings.Contains(r.stderr, ".cruxprov-embed") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("a read-only -o: %+v", r)
	}
}

var (
	hostPyOnce sync.Once
	hostPy     string
	hostPyErr  error
)

// hostPython is the real interpreter behind python3 on PATH (a pyenv shim here).
func hostPython(t *testing.T) string {
	t.Helper()
	hostPyOnce.Do(func() {
		out, err := exec.Command("python3", "-I", "-c", "import os, sys; print(os.path.realpath(sys.executable))").Output()
		hostPy, hostPyErr = strings.TrimSpace(string(out)), err
	})
	if hostPyErr != nil {
		t.Fatalf("python3 is needed for the pip oracle: %v", hostPyErr)
	}
	return hostPy
}

func pyRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1", "PIP_ROOT_USER_ACTION=ignore")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s%s", name, args, err, o.String(), e.String())
	}
	return o.String()
}

// pipVenv makes a venv (without its own pip: ensurepip is slow) and has the
// host's pip install wheels into it with --no-index --no-deps.
func pipVenv(t *testing.T, wheels ...string) string {
	t.Helper()
	venv := filepath.Join(t.TempDir(), "venv")
	pyRun(t, hostPython(t), "-m", "venv", "--without-pip", venv)
	pyRun(t, hostPython(t), append([]string{"-m", "pip", "--python", filepath.Join(venv, "bin", "python"), "install", "--quiet", "--no-index", "--no-deps"}, wheels...)...)
	return venv
}
