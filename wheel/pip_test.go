package wheel

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// python returns a python3 that has pip, or skips.
func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	if out, err := exec.Command(p, "-m", "pip", "--version").CombinedOutput(); err != nil {
		t.Skipf("python3 has no pip: %v: %s", err, out)
	}
	return p
}

// TestPipInstallsWrittenWheel uses pip as the oracle for Write and
// Rewrite: a wheel with a console script, a gui script and .data scheme
// directories installs into a throwaway venv, its files land where the
// wheel spec says, and the console script runs.
func TestPipInstallsWrittenWheel(t *testing.T) {
	py := python(t)
	dir := t.TempDir()
	whl := filepath.Join(dir, demoName)
	if err := os.WriteFile(whl, writeWheel(t, demoName, demoEntries()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same wheel with a provider manifest embedded, as package embed does.
	src, err := Open(whl)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var emb bytes.Buffer
	if err := Rewrite(context.Background(), &emb, src, map[string][]byte{src.DistInfo() + "/cruxible/provider.toml": []byte("schema = 1\n")}); err != nil {
		t.Fatal(err)
	}
	embDir := filepath.Join(dir, "embedded")
	os.Mkdir(embDir, 0o755)
	embWhl := filepath.Join(embDir, demoName)
	if err := os.WriteFile(embWhl, emb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	for name, w := range map[string]string{"written": whl, "embedded": embWhl} {
		t.Run(name, func(t *testing.T) {
			venv := filepath.Join(t.TempDir(), "venv")
			run(t, py, "-m", "venv", "--without-pip", venv)
			vpy := filepath.Join(venv, "bin", "python")
			run(t, py, "-m", "pip", "--disable-pip-version-check", "--python", vpy,
				"install", "--no-index", "--no-deps", "--no-compile", w)
			site := strings.TrimSpace(run(t, vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
			for _, p := range []string{
				filepath.Join(site, "demo_pkg", "__init__.py"),
				filepath.Join(site, "demo_pkg-1.0.dist-info", "METADATA"),
				filepath.Join(site, "demo_pkg-1.0.dist-info", "entry_points.txt"),
				filepath.Join(venv, "bin", "demo"),
				filepath.Join(venv, "bin", "demo-gui"),
				filepath.Join(venv, "bin", "demo-raw"),
				filepath.Join(venv, "share", "demo", "readme.txt"),
			} {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("pip did not install %s", p)
				}
			}
			if w == embWhl {
				if _, err := os.Stat(filepath.Join(site, "demo_pkg-1.0.dist-info", "cruxible", "provider.toml")); err != nil {
					t.Errorf("embedded manifest not installed: %v", err)
				}
			}
			if out := run(t, filepath.Join(venv, "bin", "demo")); !strings.Contains(out, "demo says 42") {
				t.Errorf("console script printed %q", out)
			}
			if out := run(t, py, "-m", "pip", "--disable-pip-version-check", "--python", vpy, "show", "-f", "demo-pkg"); !strings.Contains(out, "Version: 1.0") {
				t.Errorf("pip show: %s", out)
			}
		})
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "PIP_NO_INPUT=1", "PIP_DISABLE_PIP_VERSION_CHECK=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
