package archtest

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestModulePins holds go.mod to DESIGN §1: Go 1.26, and the dependencies
// it names at the minor versions it names, exact (no pseudo or range):
// sigstore v1.11 needs Go 1.27, and a `go get -u` that took it would raise
// the go directive, which a toolchain set to auto follows by downloading
// another Go rather than failing.
func TestModulePins(t *testing.T) {
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mod := string(b)
	if m := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(mod); m == nil || !strings.HasPrefix(m[1]+".", "1.26.") {
		t.Errorf("go.mod's go directive %v, want 1.26", m)
	}
	if regexp.MustCompile(`(?m)^toolchain `).MatchString(mod) {
		t.Errorf("go.mod names a toolchain: Go 1.26 builds the module")
	}
	for path, minor := range map[string]string{
		"github.com/google/go-containerregistry": "v0.22.",
		"github.com/sigstore/sigstore":           "v1.10.",
		"github.com/opencontainers/image-spec":   "v1.1.",
		"github.com/urfave/cli/v2":               "v2.",
		"gopkg.in/yaml.v3":                       "v3.",
		"github.com/BurntSushi/toml":             "v1.",
		"golang.org/x/sys":                       "v0.",
	} {
		m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(path) + `\s+(v\S+)`).FindStringSubmatch(mod)
		if m == nil {
			t.Errorf("go.mod does not require %s", path)
			continue
		}
		if !strings.HasPrefix(m[1], minor) || !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(m[1]) {
			t.Errorf("go.mod requires %s %s, want an exact %sx", path, m[1], minor)
		}
	}
}
