package seal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

// copyEnv copies the env at dir, its seal and its stat index into the
// directory to with cp -a, as an operator would copy an env into another
// home, and returns the copy's path.
func copyEnv(t *testing.T, dir, to string) string {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("cp", "-a", dir, SealPath(dir), StatIndexPath(dir), to).CombinedOutput()
	if err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	return filepath.Join(to, filepath.Base(dir))
}

// TestSealRecordsLocation: the seal records the env's final path (the
// directory Commit renamed staging to), not the staging one.
func TestSealRecordsLocation(t *testing.T) {
	e := sealTree(t, func(testing.TB, string) {})
	s, err := Load(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Format != Format || s.Env.Location != e.dir {
		t.Fatalf("format %s, env.location %q, want %s and %q", s.Format, s.Env.Location, Format, e.dir)
	}
}

// TestCopiedEnvIsRefused: an env copied into another home with
// `cp -a ENV ENV.seal.json ENV.index DEST/` is intact, byte for byte, but
// its files name the path it was sealed at: fast and deep verify refuse
// it env_drift, naming the sealed location and what to do.
func TestCopiedEnvIsRefused(t *testing.T) {
	e := sealTree(t, func(t testing.TB, root string) {
		os.MkdirAll(root+"/bin", 0o755)
		if err := os.WriteFile(root+"/bin/acme-gui", []byte("#!"+root+"/bin/python\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	})
	dest := filepath.Join(testdir.New(t), "other-home", "envs")
	cp := copyEnv(t, e.dir, dest)
	for _, explain := range []bool{false, true} {
		for _, deep := range []bool{false, true} {
			t.Run(fmt.Sprintf("deep=%v,explain=%v", deep, explain), func(t *testing.T) {
				rep, err := Verify(context.Background(), cp, Options{Deep: deep, Explain: explain})
				if !errors.Is(err, refusal.EnvDrift) {
					t.Fatalf("a copy at %s: %v, want env_drift", cp, err)
				}
				if len(rep.Differences) != 1 {
					t.Fatalf("differences %v, want the location alone (the tree is intact)", rep.Differences)
				}
				d := rep.Differences[0]
				if d.Change != Location || d.Want != e.dir || d.Got != cp {
					t.Fatalf("difference %+v, want location sealed %s, now %s", d, e.dir, cp)
				}
				var re *refusal.Error
				if !errors.As(err, &re) || re.Remedy == nil || re.Remedy.Action != refusal.ActionReplaceEnv || re.Remedy.Target != cp {
					t.Fatalf("remedy of %v: want %s of %s", err, refusal.ActionReplaceEnv, cp)
				}
				// The detail names where it was sealed and what to do (the
				// operator reads it; the test holds that it is said).
				if msg := err.Error(); !strings.Contains(msg, e.dir) || !strings.Contains(msg, "create it here (replace the env at this path") {
					t.Fatalf("detail %q does not name the sealed location and creating it here", msg)
				}
			})
		}
	}
	// The original, at its sealed path, still verifies.
	if _, err := Verify(context.Background(), e.dir, Options{Deep: true}); err != nil {
		t.Fatal(err)
	}
}

// TestEnvThroughSymlinksVerifies: the sealed directory reached through a
// symlink — to the env itself, to its envs/ directory, or a home sealed
// through a link and verified by its real path — is where it was sealed.
func TestEnvThroughSymlinksVerifies(t *testing.T) {
	e := sealTree(t, func(testing.TB, string) {})
	links := testdir.New(t)
	toEnv := filepath.Join(links, "env")
	toEnvs := filepath.Join(links, "envs")
	if err := os.Symlink(e.dir, toEnv); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(e.dir), toEnvs); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{toEnv, filepath.Join(toEnvs, filepath.Base(e.dir))} {
		for _, deep := range []bool{false, true} {
			if _, err := Verify(context.Background(), p, Options{Deep: deep}); err != nil {
				t.Errorf("%s (deep=%v): %v", p, deep, err)
			}
		}
	}

	// Sealed through a link (a --home that is one): its real path is the
	// same directory.
	real := testdir.New(t)
	home := filepath.Join(links, "home")
	if err := os.Symlink(real, home); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", filepath.Dir(e.dir), real).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	// Rebuilt at home/envs/<hex> (the copy's tree and index; only the
	// seal's location is rewritten, as a Commit there would write it).
	at := filepath.Join(home, "envs", filepath.Base(e.dir))
	s, err := Load(at)
	if err != nil {
		t.Fatal(err)
	}
	s.Env.Location = at
	b, _ := s.Marshal()
	writeSeal(t, at, b)
	byReal := filepath.Join(real, "envs", filepath.Base(e.dir))
	for _, p := range []string{at, byReal} {
		for _, deep := range []bool{false, true} {
			if _, err := Verify(context.Background(), p, Options{Deep: deep}); err != nil {
				t.Errorf("%s sealed as %s (deep=%v): %v", p, at, deep, err)
			}
		}
	}
}

// TestV2SealWithoutLocation: a seal written before v2.1 (format v2, no
// env.location) still verifies, with no location check: at its path and
// copied elsewhere alike, as before. Its seal content digest is the one
// the same env sealed as v2.1 has (the field and the minor are not in
// it), so an env pinned then and rebuilt now needs no new approval.
func TestV2SealWithoutLocation(t *testing.T) {
	e := sealTree(t, func(t testing.TB, root string) {
		if err := os.WriteFile(root+"/a.py", []byte("print(1)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	now, err := Verify(context.Background(), e.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := now.Seal
	s.Format, s.Env.Location = FormatV2, ""
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "location") {
		t.Fatalf("a v2 seal writes env.location:\n%s", b)
	}
	writeSeal(t, e.dir, b)
	cp := copyEnv(t, e.dir, filepath.Join(testdir.New(t), "envs"))
	for _, p := range []string{e.dir, cp} {
		for _, deep := range []bool{false, true} {
			rep, err := Verify(context.Background(), p, Options{Deep: deep})
			if err != nil {
				t.Fatalf("%s (v2 seal, deep=%v): %v", p, deep, err)
			}
			if rep.ContentDigest != now.ContentDigest {
				t.Fatalf("v2 seal content digest %s, the v2.1 seal's %s", rep.ContentDigest, now.ContentDigest)
			}
		}
	}
}
