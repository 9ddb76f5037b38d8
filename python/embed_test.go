package python

import (
	"io/fs"
	"regexp"
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
