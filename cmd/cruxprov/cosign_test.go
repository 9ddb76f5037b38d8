package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCosignIsOptional: cruxprov image verify is the verifier, and cosign
// an optional second one. docs/images.md, docs/ci.md and image build's
// help said only that `cosign verify` accepts the images, and cosign is
// not installed on this machine (make interop says so): every
// paragraph that shows `cosign verify` now names `image verify` and says
// cosign is optional. And without cosign, make interop's script stops at
// once, saying so and how to install it, as images.md says: run with a
// PATH of only the tools it needs up to that check and an empty GOPATH.
func TestCosignIsOptional(t *testing.T) {
	texts := map[string]string{"image build's help": imageBuildCmd().Description}
	for _, d := range []string{"images.md", "ci.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", d))
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range strings.Split(string(b), "\n\n") {
			texts[fmt.Sprintf("%s paragraph %d", d, i+1)] = p
		}
	}
	shown := 0
	for where, p := range texts {
		flat := strings.Join(strings.Fields(p), " ")
		if !strings.Contains(flat, "`cosign verify") {
			continue
		}
		shown++
		if !strings.Contains(flat, "image verify") || !strings.Contains(flat, "cosign is optional") {
			t.Errorf("%s shows `cosign verify` without naming `cruxprov image verify` as the verifier and cosign optional:\n%s", where, p)
		}
	}
	if shown < 3 {
		t.Errorf("`cosign verify` shown in %d places; want images.md, ci.md and image build's help", shown)
	}

	bin := t.TempDir()
	for _, tool := range []string{"bash", "dirname", "mktemp", "chmod", "rm", "go"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s is not installed", tool)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(bin, "bash"), filepath.Join("..", "..", "scripts", "interop.sh"))
	// No HOME: the go command (the script's `go env GOPATH`) leaves a
	// telemetry child that writes HOME/.config/go/telemetry after it has
	// exited, and with HOME in t.TempDir() it made that directory again
	// after the test had removed it (a TestCosignIsOptional* directory
	// left in the temp directory on every run). Without a HOME, go has
	// no config directory and records no telemetry.
	cmd.Env = []string{"PATH=" + bin, "GOPATH=" + t.TempDir(), "GOCACHE=" + t.TempDir(), "GOTOOLCHAIN=local"}
	r := runCmd(t, cmd)
	if r.code != 1 || r.stdout != "" || r.stderr != "interop: cosign is missing (go install github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5)\n" {
		t.Errorf("make interop without cosign: %+v", r)
	}
}
