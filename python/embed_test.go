package python

import (
	"io/fs"
	"regexp"
	"slices"
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

// TestHarnessArgv: the harness is started as DESIGN §10 has it, python -I
// -m, whatever the runtime; the runtime's version says only whether it
// takes the channel from ProtocolFDVar (Handoff): from HandoffVersion on,
// not before it nor when the version is not known.
func TestHarnessArgv(t *testing.T) {
	want := []string{"/env/bin/python", "-I", "-m", HarnessModule}
	if got := Harness("/env/bin/python"); !slices.Equal(got, want) {
		t.Errorf("Harness = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		runtime string
		want    bool
	}{
		{RuntimeVersion, true},
		{HandoffVersion, true},
		{"0.2.1", true},
		{"1.0", true},
		{"0.1.0", false},
		{"0.2.0rc1", false},
		{"", false},
		{"not a version", false},
	} {
		t.Run("Handoff "+tc.runtime, func(t *testing.T) {
			if got := Handoff(tc.runtime); got != tc.want {
				t.Errorf("Handoff(%q) = %v, want %v", tc.runtime, got, tc.want)
			}
		})
	}
	h, err := fs.ReadFile(Runtime(), "cruxible_provider_runtime/harness.py")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(h), `PROTOCOL_FD_VAR = "`+ProtocolFDVar+`"`) {
		t.Errorf("harness.py does not read %s", ProtocolFDVar)
	}
	if !IsRuntime("Cruxible.Provider_Runtime") || IsRuntime("cruxible-provider") {
		t.Error("IsRuntime")
	}
}
