package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/testdir"
)

// TestReplaceFetchesTheRootWheel: env create --replace ENV --index URL of
// an env whose root wheel the store no longer holds (gc took it, or a
// damaged blob was removed: gc says "fetch it again") fetched only the
// resolution's wheels and was refused materialize_failed, "… is not in the
// store; fetch it", its fix line the same command with --index URL, which
// failed the same way. operator.md §5 says --index fetches the wheels the
// store lacks: it fetches the root too. --offline is still refused,
// naming what is missing. Found walking store.md's gc after a damaged
// blob was removed.
// TestReplaceFetchesTheRootWheel: once the store has lost the root wheel
// a seal names (gc removed it, damaged), env create --replace ENV --index
// URL fetches it with the others and rebuilds the same env; it was
// refused materialize_failed "… is not in the store; fetch it", its fix
// line the same command, which failed the same way. Offline it is still
// refused, naming the wheel.
func TestReplaceFetchesTheRootWheel(t *testing.T) {
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("no %s", envPython)
	}
	fx, index := echoIndex(t)
	home := t.TempDir()
	t.Cleanup(func() { testdir.Writable(home) }) // the env is read-only
	out := createJSON(t, "--home", home, "env", "create", "--wheel", fx.Echo.Path, "--platform", "host", "--python", envPython, "--index", index, "--no-compile", "--json")
	blob := filepath.Join(home, "blobs", "sha256", fx.Echo.SHA256.Hex())
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	if r := cruxprov(t, "--home", home, "env", "create", "--replace", out.Path, "--offline"); r.code != exitRefused || !strings.Contains(r.stderr, fx.Echo.Filename) {
		t.Errorf("--replace --offline without the root wheel: %+v", r)
	}
	r := cruxprov(t, "--home", home, "env", "create", "--replace", out.Path, "--index", index, "--json")
	if r.code != 0 {
		t.Fatalf("--replace --index without the root wheel in the store: %+v", r)
	}
	if again := createdOf(t, r); again.Digest != out.Digest || again.Path != out.Path {
		t.Errorf("--replace rebuilt %s at %s, want %s at %s", again.Digest, again.Path, out.Digest, out.Path)
	}
	if _, err := os.Stat(blob); err != nil {
		t.Errorf("the root wheel was not fetched into the store: %v", err)
	}
	if r := cruxprov(t, "--home", home, "env", "verify", out.Path, "--deep"); r.code != 0 {
		t.Errorf("env verify of the rebuilt env: %+v", r)
	}
}
