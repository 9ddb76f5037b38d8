package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/wheeltest"
)

// TestEmbedAdviceWritesBesideTheWheel: inspect of a wheel built without
// its manifest (dist/X.whl, as pip wheel -w dist and python -m build
// write it) advises package embed into dist/embedded/, and that command
// run as printed in the project writes the provider there, adding no
// directory to the project's root. It advised -o embedded/ (and
// provider-authors.md -o release/): a new top-level directory beside the
// provider's package, which setuptools' flat-layout discovery takes for a
// second package, and the author's next build failed with "Multiple
// top-level packages discovered in a flat-layout: ['embedded', …]".
func TestEmbedAdviceWritesBesideTheWheel(t *testing.T) {
	proj := t.TempDir()
	if err := os.Mkdir(filepath.Join(proj, "dist"), 0o755); err != nil {
		t.Fatal(err)
	}
	wheeltest.Write(t, filepath.Join(proj, "dist"), "acme_web_fetch-1.0.0-py3-none-any.whl", map[string]string{
		"acme_web_fetch/__init__.py": "",
		"DI/METADATA":                "Metadata-Version: 2.1\nName: acme-web-fetch\nVersion: 1.0.0\nRequires-Dist: cruxible-provider-runtime==0.2.0\n",
	})
	for name, body := range map[string]string{
		"provider.toml": "schema = 1\nname = \"acme-web-fetch\"\nprotocol = [1, 1]\n\n[[entrypoints]]\nname = \"fetch\"\nobject = \"acme_web_fetch.impl:Fetch\"\ninterface = { id = \"web.fetch\", digest = \"sha256:5f17d3aafa95a59a05c1abece31b23a7a0e003f715ee229f6ea3d089ea5c41e2\" }\n",
		"pylock.toml":   "lock-version = \"1.0\"\ncreated-by = \"uv\"\n\n[[packages]]\nname = \"cruxible-provider-runtime\"\nversion = \"0.2.0\"\nwheels = [{ url = \"https://x/cruxible_provider_runtime-0.2.0-py3-none-any.whl\", hashes = { sha256 = \"8b6deb8bc45804aad0ff783fac88426dd8dadd7ea98f3cdeb0c626e286dcde0d\" } }]\n",
	} {
		if err := os.WriteFile(filepath.Join(proj, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := os.ReadDir(proj)
	run := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = proj
		cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir())
		return runCmd(t, cmd)
	}
	r := run("inspect", "dist/acme_web_fetch-1.0.0-py3-none-any.whl")
	_, advice, ok := strings.Cut(r.stderr, "; to fix: ")
	const want = "cruxprov package embed dist/acme_web_fetch-1.0.0-py3-none-any.whl --manifest provider.toml --lock pylock.toml -o dist/embedded/"
	if r.code != exitRefused || !ok || strings.TrimSpace(advice) != want {
		t.Fatalf("inspect of a wheel without its manifest: %+v\nwant the advice %q", r, want)
	}
	args := strings.Fields(strings.TrimSpace(advice))
	if r := run(args[1:]...); r.code != 0 {
		t.Fatalf("the advice as printed: %+v", r)
	}
	if r := run("inspect", "dist/embedded/acme_web_fetch-1.0.0-py3-none-any.whl"); r.code != 0 {
		t.Fatalf("inspect of the embedded wheel: %+v", r)
	}
	if after, _ := os.ReadDir(proj); len(after) != len(before) {
		t.Errorf("the advice added to the project's root: %v, was %v", after, before)
	}
}

// TestEmbedAdviceForAWheelInAReadOnlyDirectory: a wheel in a directory
// this user may not write (as /usr/share/python-wheels is to all but
// root) is advised an embed into dist/embedded/ where the command runs;
// the advice named the wheel's own directory, and run as printed it
// failed "-o /usr/share/python-wheels/embedded/: permission denied".
func TestEmbedAdviceForAWheelInAReadOnlyDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write a directory of mode 0555; the unprivileged run of this suite (.ci/run) is the one that tells")
	}
	proj, wheels := t.TempDir(), t.TempDir()
	wheeltest.Write(t, wheels, "acme_web_fetch-1.0.0-py3-none-any.whl", map[string]string{
		"acme_web_fetch/__init__.py": "",
		"DI/METADATA":                "Metadata-Version: 2.1\nName: acme-web-fetch\nVersion: 1.0.0\n",
	})
	if err := os.Chmod(wheels, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(wheels, 0o755) })
	whl := filepath.Join(wheels, "acme_web_fetch-1.0.0-py3-none-any.whl")
	cmd := exec.Command(bin, "inspect", whl)
	cmd.Dir = proj
	cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir())
	r := runCmd(t, cmd)
	_, advice, ok := strings.Cut(r.stderr, "; to fix: ")
	want := "cruxprov package embed " + whl + " --manifest provider.toml --lock pylock.toml -o dist/embedded/"
	if r.code != exitRefused || !ok || strings.TrimSpace(advice) != want {
		t.Fatalf("inspect of a wheel in a read-only directory: %+v\nwant the advice %q", r, want)
	}
}
