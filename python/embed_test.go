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

// TestHarnessArgv: a runtime that takes the channel from Bootstrap is
// started through it, which execs DESIGN §10's argv; an earlier runtime
// (an env installed with an older runtime wheel), or one whose version is
// not known, is started with that argv alone: its harness would take fd 1,
// stderr by then, for the channel.
func TestHarnessArgv(t *testing.T) {
	direct := []string{"/env/bin/python", "-I", "-m", HarnessModule}
	for _, tc := range []struct {
		runtime string
		want    []string
	}{
		{RuntimeVersion, append([]string{"/env/bin/python", "-I", "-S", "-c", Bootstrap}, direct...)},
		{HandoffVersion, append([]string{"/env/bin/python", "-I", "-S", "-c", Bootstrap}, direct...)},
		{"0.2.1", append([]string{"/env/bin/python", "-I", "-S", "-c", Bootstrap}, direct...)},
		{"1.0", append([]string{"/env/bin/python", "-I", "-S", "-c", Bootstrap}, direct...)},
		{"0.1.0", direct},
		{"0.2.0rc1", direct},
		{"", direct},
		{"not a version", direct},
	} {
		if got := Harness("/env/bin/python", tc.runtime); !slices.Equal(got, tc.want) {
			t.Errorf("Harness(%q) = %q, want %q", tc.runtime, got, tc.want)
		}
	}
	h, err := fs.ReadFile(Runtime(), "cruxible_provider_runtime/harness.py")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(h), `PROTOCOL_FD_VAR = "`+ProtocolFDVar+`"`) {
		t.Errorf("harness.py does not read %s", ProtocolFDVar)
	}
	for _, want := range []string{`"` + ProtocolFDVar + `"`, "os.execve(a[0], a, e)", "os.set_inheritable(fd, True)"} {
		if !strings.Contains(Bootstrap, want) {
			t.Errorf("Bootstrap lacks %q", want)
		}
	}
	if strings.Contains(Bootstrap, "site") {
		t.Errorf("Bootstrap runs site itself: the exec'd interpreter's start does")
	}
	if !IsRuntime("Cruxible.Provider_Runtime") || IsRuntime("cruxible-provider") {
		t.Error("IsRuntime")
	}
}
