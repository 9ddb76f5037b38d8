package materialize

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/digest"
)

// FuzzVenvSource: the operator's interpreter's venv/__init__.py, and the
// version it reports, decide what a venv is written as; whatever they
// hold (a distribution's patch, a file that is not Python), readVenvShape
// and readVenvForm decide or decline without panicking.
func FuzzVenvSource(f *testing.F) {
	f.Add("3.12.3", "class EnvBuilder:\n    def replace_variables(self, text, context):\n        \"\"\"doc\"\"\"\n        return text\n    def ensure_directories(self, env_dir):\n        x = 1\n")
	f.Add("3.8.0", "    def create_configuration(self, context):\n        pass\n    def create_git_ignore_file(self, context):\n        '''\n")
	f.Add("3.13", "")
	f.Add("x.y.z", "    def create(self, env_dir):\n\"\"\"\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, version, src string) {
		if err := os.WriteFile(filepath.Join(dir, "__init__.py"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _ = readVenvShape(&Probe{Interpreter: digest.Interpreter{Path: "/usr/bin/python3"}, VenvVersion: version, VenvDir: dir})
		_, _ = readVenvForm(src)
	})
}
