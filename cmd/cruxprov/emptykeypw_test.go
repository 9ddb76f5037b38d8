package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/sign"
)

// TestImageBuildEmptyKeyPassword: CRUXPROV_KEY_PASSWORD defined with no
// value, as a CI variable is when its secret does not reach the job (a
// fork's pull request), is a usage error naming the key and saying where
// the password goes, before anything is built, as no variable at all is
// (docs/ci.md). It failed "error: the private key is encrypted and no
// password was given", exit 1, naming neither (found walking ci.md).
func TestImageBuildEmptyKeyPassword(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755)
	whl := filepath.Join(dir, "acme_echo-1.0.0-py3-none-any.whl")
	os.WriteFile(whl, []byte("not read before the key"), 0o644)
	priv, _, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "builder.key")
	os.WriteFile(keyPath, priv, 0o600)
	for _, json := range []bool{false, true} {
		args := []string{"--home", filepath.Join(dir, "home"), "image", "build", "--wheel", whl,
			"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
			"--base", "oci:" + dir + "@sha256:" + strings.Repeat("0", 64), "--shim", shim, "--output", "oci:" + filepath.Join(dir, "out"),
			"--sign-key", keyPath}
		if json {
			args = append(args, "--json")
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=")
		r := runCmd(t, cmd)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: --sign-key "+keyPath+": the key password is empty") ||
			!strings.Contains(r.stderr, "give the password it was made with in CRUXPROV_KEY_PASSWORD") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("json %v: %+v", json, r)
		}
		if json {
			v := jsonDoc(t, r)
			e, _ := v["error"].(map[string]any)
			if v["schema"] != "cruxprov.image.build/v1" || e["kind"] != "usage" {
				t.Errorf("--json: %s", r.stdout)
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "out")); err == nil {
		t.Error("the layout was made before the key was read")
	}
}
