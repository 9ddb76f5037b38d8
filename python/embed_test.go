package python

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

func TestRuntimeFilesAndVersion(t *testing.T) {
	var names []string
	if err := fs.WalkDir(Runtime(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cruxible_provider_runtime/__init__.py",
		"cruxible_provider_runtime/harness.py",
		"cruxible_provider_runtime/provider_api.py",
	}
	if len(names) != len(want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("files %v, want %v", names, want)
		}
	}
	init, err := fs.ReadFile(Runtime(), "cruxible_provider_runtime/__init__.py")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^__version__ = "([^"]+)"$`).FindSubmatch(init)
	if m == nil || string(m[1]) != RuntimeVersion {
		t.Fatalf("__init__.py __version__ %q, RuntimeVersion %q", m, RuntimeVersion)
	}
}

// TestBootstrapCallsTheHarness: the argv runs Bootstrap, which hands the
// protocol channel to the harness's run_bootstrapped (and falls back to
// running it as -m for a runtime without it).
func TestBootstrapCallsTheHarness(t *testing.T) {
	argv := Harness("/env/bin/python")
	if len(argv) != 5 || argv[0] != "/env/bin/python" || argv[1] != "-I" || argv[2] != "-S" || argv[3] != "-c" || argv[4] != Bootstrap {
		t.Fatalf("Harness = %q", argv)
	}
	h, err := fs.ReadFile(Runtime(), "cruxible_provider_runtime/harness.py")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^def run_bootstrapped\(`).Match(h) {
		t.Error("harness.py defines no run_bootstrapped")
	}
	for _, want := range []string{"import " + HarnessModule + " as h", "h.run_bootstrapped(fd, err)", "site.main()"} {
		if !strings.Contains(Bootstrap, want) {
			t.Errorf("Bootstrap lacks %q", want)
		}
	}
}
