package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

// orRE finds the other command a refusal advises (Remedy.Or).
var orRE = regexp.MustCompile(`; or: (cruxprov .*)$`)

// TestOfflineRootWordsForTheCommand: a root wheel named NAME==VERSION
// --sha256 HEX with --offline is refused offline_miss in words that fit
// the command that ran: env create's said "an offline install has none"
// and "give the root wheel as its file instead of NAME==VERSION", which is
// install's argument, not env create's --wheel. The detail names no
// command; each command renders both remedies its own way, fetch online
// and the wheel's file (install WHEEL --sha256 HEX, env create --wheel
// WHEEL), and each runs as printed.
func TestOfflineRootWordsForTheCommand(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	run, _, _ := approvingStore(t, w, base, debian)
	b, err := os.ReadFile(w.echo)
	if err != nil {
		t.Fatal(err)
	}
	sum := digest.Sum(b).Hex()
	env := []string{"CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME=" + filepath.Join(base, "state")}
	runLine := func(line string) result {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = base
		cmd.Env = append(append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH")), env...)
		return runCmd(t, cmd)
	}
	for _, tc := range []struct {
		cmd  []string
		file string // the other remedy: the root wheel as its file
	}{
		{[]string{"install"}, "install WHEEL --sha256 " + sum + " --offline"},
		{[]string{"env", "create"}, "env create --wheel WHEEL --offline"},
	} {
		name := strings.Join(tc.cmd, " ")
		args := append(append([]string{}, tc.cmd...), "acme-echo==1.0.0", "--sha256", sum, "--offline", "--platform", "host", "--python", debian, "--no-compile")
		r := run(args...)
		detail, _, _ := strings.Cut(r.stderr, "; to fix: ")
		if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: "+string(refusal.OfflineMiss)+": acme-echo==1.0.0 ") ||
			!strings.Contains(detail, "acme_echo-1.0.0-….whl, sha256 "+sum) ||
			strings.Contains(detail, "install") || strings.Contains(detail, "NAME==VERSION") || strings.Contains(detail, "--") {
			t.Errorf("%s: the refusal's words: %+v", name, r)
		}
		home := "cruxprov --home " + filepath.Join(base, "home") + " "
		fetchOnline := home + name + " acme-echo==1.0.0 --sha256 " + sum + " --platform host --python " + debian + " --no-compile --index URL"
		m := fixRE.FindStringSubmatch(strings.TrimSpace(r.stderr))
		o := orRE.FindStringSubmatch(strings.TrimSpace(r.stderr))
		wantOr := home + tc.file + " --platform host --python " + debian + " --no-compile"
		if m == nil || o == nil || m[1] != fetchOnline || o[1] != wantOr {
			t.Fatalf("%s: the advice: %+v\nwant: %s\n  or: %s", name, r, fetchOnline, wantOr)
		}
		if f := runLine(strings.Replace(m[1], "--index URL", "--index "+w.url, 1)); f.code != 0 {
			t.Fatalf("%s: fetch online, as advised: %+v", name, f)
		}
		// Offline again (the other wheels are in the store now): the
		// root wheel by name and version is refused the same, and its
		// file, as advised, is taken.
		if r := run(args...); r.code != exitRefused || !strings.HasSuffix(strings.TrimSpace(r.stderr), "; or: "+wantOr) {
			t.Fatalf("%s: offline again: %+v", name, r)
		}
		if f := runLine(strings.Replace(o[1], "WHEEL", w.echo, 1)); f.code != 0 {
			t.Fatalf("%s: the wheel's file, as advised: %+v", name, f)
		}
	}
}
