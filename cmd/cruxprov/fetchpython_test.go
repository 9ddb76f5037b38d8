package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFetchPythonWithAPreset: fetch --python with a preset --platform is
// a usage error, as lock resolve and platform show make it: a preset
// fixes the Python version, no interpreter changes it, and the fetch ran
// for the preset as if --python had not been given. --python is still
// taken where it is probed: for host, and for an id that is no preset
// (the host platform of --python); and config.yaml's python, a default
// for host, is no error beside a preset.
func TestFetchPythonWithAPreset(t *testing.T) {
	idx, lock, _ := fetchFixture(t)
	const python = "/nonexistent/python3.11"
	r := cruxprov(t, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--python", python, "--index", idx)
	if r.code != exitUsage || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 ||
		!strings.Contains(r.stderr, "--python names the interpreter the host platform is probed from, and no platform here is host (a preset or a platform file fixes its Python, which no interpreter changes): drop --python, or give --platform host") {
		t.Errorf("fetch --platform PRESET --python: %+v", r)
	}
	// The same words as lock resolve's.
	r = cruxprov(t, "lock", "resolve", "--lock", lock, "--platform", fetchTestPlatform, "--python", python)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--python names the interpreter the host platform is probed from, and no platform here is host (a preset or a platform file fixes its Python, which no interpreter changes): drop --python, or add --platform host") {
		t.Errorf("lock resolve --platform PRESET --python: %+v", r)
	}
	// Probed: host, and an id that is no preset.
	for _, plat := range []string{"host", "cp311-manylinux_2_99_x86_64"} {
		r := cruxprov(t, "fetch", "--lock", lock, "--platform", plat, "--python", python, "--index", idx)
		if r.code != exitRefused || !strings.Contains(r.stderr, "platform_unsupported") && !strings.Contains(r.stderr, python) {
			t.Errorf("fetch --platform %s --python: %+v", plat, r)
		}
	}
	// config.yaml's python is not the command line's.
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("format: cruxprov.config/v1\npython: "+python+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cruxprov(t, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx, "--home", home); r.code != 0 {
		t.Errorf("config.yaml's python beside a preset: %+v", r)
	}
}
