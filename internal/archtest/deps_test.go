package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies holds the architecture (STYLE #13): what an executor
// imports alone stays free of the build side, and the image entrypoint
// shim stays on the standard library and x/sys.
func TestDependencies(t *testing.T) {
	const mod = "github.com/cruxible/cruxprov/"
	cases := []struct {
		pkg      string
		banned   []string // module packages it must not reach
		onlyStd  bool     // only the standard library, x/sys and the module's refusal
		allowMod []string
	}{
		{pkg: "seal", banned: []string{"materialize", "index", "store", "fetch", "pipeline", "install", "lockfile", "wheel", "image"}},
		{pkg: "verify", banned: []string{"materialize", "index", "store", "fetch", "pipeline", "install", "lockfile", "image"}},
		{pkg: "receipts", banned: []string{"materialize", "index", "store", "fetch", "pipeline", "install", "seal", "registry", "image"}},
		// A run on a pin, for an executor of local envs: the verify, the
		// store's lock and the subprocess executor, not the image code
		// or podman (pinned/container has those).
		{pkg: "pinned", banned: []string{"materialize", "index", "fetch", "pipeline", "install", "lockfile", "image", "podman", "verify/container", "pinned/container"}},
		{pkg: "shim", onlyStd: true},
	}
	for _, c := range cases {
		t.Run(c.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", mod+c.pkg).Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			for _, dep := range strings.Fields(string(out)) {
				if c.onlyStd {
					if strings.Contains(strings.Split(dep, "/")[0], ".") && !strings.HasPrefix(dep, "golang.org/x/sys/") && dep != mod+c.pkg {
						t.Errorf("%s imports %s: only the standard library and x/sys", c.pkg, dep)
					}
					continue
				}
				rel, ok := strings.CutPrefix(dep, mod)
				if !ok {
					continue
				}
				for _, b := range c.banned {
					if rel == b || strings.HasPrefix(rel, b+"/") {
						t.Errorf("%s imports %s, which it must not reach", c.pkg, dep)
					}
				}
			}
		})
	}
}

// TestCommandsLinkNoTestPackage: the binaries link none of the module's
// test helpers (registrytest, imagetest, wheeltest, invoketest, the
// fixtures): pipelinetest (and imagetest through it) turns off the
// runtime check of install and image build (pipeline/internal/runtimehook),
// which only a test may do.
func TestCommandsLinkNoTestPackage(t *testing.T) {
	const mod = "github.com/cruxible/cruxprov/"
	for _, cmd := range []string{"cmd/cruxprov", "cmd/cruxshim"} {
		out, err := exec.Command("go", "list", "-deps", mod+cmd).Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			rel, ok := strings.CutPrefix(dep, mod)
			if ok && (strings.HasSuffix(rel, "test") || rel == "internal/fixtures" || strings.HasPrefix(rel, "internal/fixtures/")) {
				t.Errorf("%s links the test helper %s", cmd, dep)
			}
		}
	}
}
