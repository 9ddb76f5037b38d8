package lockfile

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

// resolutionCodes are the refusals resolution may give a real lock.
var resolutionCodes = map[refusal.Code]bool{
	refusal.LockInvalid: true, refusal.PlatformUnsupported: true, refusal.NoCompatibleWheel: true,
	refusal.SdistNotAllowed: true, refusal.SourceNotAllowed: true, refusal.HashMissing: true,
	refusal.DuplicatePackage: true,
}

// uvExpect is what cruxprov must do with the uv inputs that uv refuses
// for a reason cruxprov checks too (size and hash mismatches are the
// fetcher's; an exact-revision mismatch is moot since VCS is refused).
var uvExpect = map[string]refusal.Code{
	"pep_751_rejects_duplicate_active_packages":             refusal.DuplicatePackage,
	"pep_751_requires_packages":                             refusal.LockInvalid,
	"pep_751_multiple_sources":                              refusal.LockInvalid,
	"pep_751_package_requires_python#L13737":                refusal.PlatformUnsupported,
	"pep_751_lock_version#L13663":                           refusal.LockVersionUnsupported,
	"pep_751_require_hashes_directory":                      refusal.SourceNotAllowed,
	"pep_751_install_require_hashes_directory":              refusal.SourceNotAllowed,
	"pep_751_install_git_rejects_mismatched_exact_revision": refusal.SourceNotAllowed,
	"pep_751_install_invalid_artifact_urls":                 refusal.LockInvalid,
}

// TestConformancePylock parses every real lock in
// $CRUXPROV_CONFORMANCE_DIR/pylock and resolves those that parse for a
// few platforms: each parses or is refused with a lock code, resolution
// succeeds or refuses with a resolution code and a detail, and the uv
// inputs uv refuses are refused here with the matching code.
func TestConformancePylock(t *testing.T) {
	dir := os.Getenv("CRUXPROV_CONFORMANCE_DIR")
	if dir == "" {
		t.Skip("CRUXPROV_CONFORMANCE_DIR unset")
	}
	dir = filepath.Join(dir, "pylock")
	index := map[string]string{} // file → test_fn#Lline
	if b, err := os.ReadFile(filepath.Join(dir, "uv_index.json")); err == nil {
		var entries []struct {
			File   string `json:"file"`
			TestFn string `json:"test_fn"`
			Line   int    `json:"line"`
		}
		if err := json.Unmarshal(b, &entries); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			index[e.File] = e.TestFn + "#L" + itoa(e.Line)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.toml"))
	if len(files) < 50 {
		t.Fatalf("only %d locks in %s", len(files), dir)
	}
	plats := []*platform.Platform{preset(t, "cp312-manylinux_2_28_x86_64"), preset(t, "cp312-macosx_14_0_arm64"), preset(t, "cp312-win_amd64"), preset(t, "cp39-manylinux_2_17_aarch64")}
	var parsed, resolved int
	for _, f := range files {
		base := filepath.Base(f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var codes []refusal.Code
		l, _, err := Parse(data)
		if err != nil {
			c := refusal.CodeOf(err)
			if !strings.HasPrefix(string(c), "lock_") {
				t.Errorf("%s: parse error without a lock code: %v", base, err)
			}
			codes = append(codes, c)
			t.Logf("%s: %v", base, err)
		} else {
			parsed++
			reps, err := ResolveAll(l, plats, Options{})
			if reps == nil && err != nil {
				t.Errorf("%s: %v", base, err)
			}
			ok := true
			for _, r := range reps {
				if _, err := r.Resolution(); err != nil {
					ok = false
					c := refusal.CodeOf(err)
					if !resolutionCodes[c] || strings.TrimSpace(err.Error()) == string(c)+":" {
						t.Errorf("%s on %s: %v", base, r.Platform, err)
					}
					codes = append(codes, c)
				}
			}
			if ok {
				resolved++
			}
		}
		fn := index[base]
		for key, want := range uvExpect {
			if fn == "" || !(fn == key || strings.HasPrefix(fn, key+"#") && !strings.Contains(key, "#")) {
				continue
			}
			found := false
			for _, c := range codes {
				found = found || c == want
			}
			if !found {
				t.Errorf("%s (%s): want %s, got %v", base, fn, want, codes)
			}
		}
	}
	t.Logf("%d locks: %d parse, %d resolve on every test platform", len(files), parsed, resolved)
}

// TestConformanceBenchLock resolves the lock the shared benchmark corpus
// generator writes (../shared/bench/make-corpus.py).
func TestConformanceBenchLock(t *testing.T) {
	d := os.Getenv("CRUXPROV_CONFORMANCE_DIR")
	if d == "" {
		t.Skip("CRUXPROV_CONFORMANCE_DIR unset")
	}
	script := filepath.Join(d, "..", "bench", "make-corpus.py")
	if _, err := os.Stat(script); err != nil {
		t.Skip("../shared/bench absent")
	}
	out := t.TempDir()
	if b, err := exec.Command("python3", script, "--out", out, "--size", "small").CombinedOutput(); err != nil {
		t.Fatalf("make-corpus: %v\n%s", err, b)
	}
	data, err := os.ReadFile(filepath.Join(out, "pylock.toml"))
	if err != nil {
		t.Fatal(err)
	}
	l, warns, err := Parse(data)
	if err != nil || len(warns) > 0 {
		t.Fatalf("Parse: %v %v", err, warns)
	}
	host, err := platform.Host(t.Context(), "python3")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*platform.Platform{host, preset(t, "cp311-manylinux_2_28_x86_64")} {
		t.Run(p.ID(), func(t *testing.T) {
			res, err := Resolve(l, p, Options{})
			if err != nil {
				t.Fatalf("%s: %v", p.ID(), err)
			}
			files, _ := os.ReadDir(filepath.Join(out, "files"))
			for _, w := range res.Packages {
				found := false
				for _, f := range files {
					found = found || f.Name() == w.Filename
				}
				if !found {
					t.Errorf("%s: %s not in the corpus", p.ID(), w.Filename)
				}
			}
			if len(res.Packages) != len(l.Packages) {
				t.Errorf("%s: %d of %d packages", p.ID(), len(res.Packages), len(l.Packages))
			}
		})
	}
	// The corpus packs wheels built for this interpreter: another Python
	// finds the compiled one missing, by name.
	_, err = Resolve(l, preset(t, "cp313-manylinux_2_28_x86_64"), Options{})
	if err != nil && !errors.Is(err, refusal.NoCompatibleWheel) {
		t.Errorf("cp313: %v", err)
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
