package materialize

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRawScriptShebangRuns: a wheel's "#!python" script, rewritten for an
// env whose path has a space (a --home with one), runs. Before, its first
// line became "#!/…/a b/…/bin/python", which the kernel splits at the
// space: the script failed with exit 127 (so did one under a path past
// the kernel's 256 bytes). Where the path has no space the line is pip's,
// as before.
func TestRawScriptShebangRuns(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	py, _ = filepath.EvalSymlinks(py)
	long := strings.Repeat("l", 150) + "/" + strings.Repeat("m", 150) // past the kernel's 256 bytes
	for _, dir := range []string{"plain", "a b", long} {
		t.Run(dir[:min(len(dir), 8)], func(t *testing.T) {
			env := filepath.Join(t.TempDir(), dir, "env")
			if err := os.MkdirAll(filepath.Join(env, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(py, filepath.Join(env, "bin", "python")); err != nil {
				t.Fatal(err)
			}
			ins := newInstaller(t.TempDir(), env, Layout{})
			b := ins.fixShebang([]byte("#!python\nimport sys\nprint('raw', sys.argv[1:])\n"))
			if dir == "plain" && !strings.HasPrefix(string(b), "#!"+env+"/bin/python\nimport sys") {
				t.Errorf("plain path: %q, want pip's shebang", b)
			}
			script := filepath.Join(env, "bin", "raw")
			if err := os.WriteFile(script, b, 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(script, "x y").CombinedOutput()
			if err != nil || string(out) != "raw ['x y']\n" {
				t.Errorf("%s: %v, %q\n%s", script, err, out, b)
			}
		})
	}
}
