package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/testdir"
)

// TestSpaceAdviceStoreWithoutEnvs: env create's free-space refusal in a
// store that holds no sealed env advises a store on another file system
// (other_home: the command again with --home DIR), not gc --envs
// --dry-run, which lists nothing there: the detail itself says the store
// holds no env, and the wheels a create fetched are fetched again. The
// advice, DIR named on a file system with room, gets past the check.
func TestSpaceAdviceStoreWithoutEnvs(t *testing.T) {
	dir := testdir.Tmpfs(t, "16m") // skips, saying why, where no tmpfs can be mounted
	home, lock := envHomeAt(t, filepath.Join(dir, "home"), 1, 400)
	fill(t, dir, 64<<10)
	r := cruxprov(t, createArgs(home, lock, "--no-compile")...)
	if r.code != exitRefused || !strings.Contains(r.stderr, "free but the env needs about") || !strings.Contains(r.stderr, "the store holds no sealed env") {
		t.Fatalf("create short of space in a store with no env: %+v", r)
	}
	if strings.Contains(r.stderr, "gc --envs") {
		t.Errorf("advises gc --envs in a store with no env: %s", r.stderr)
	}
	if !strings.Contains(r.stderr, "another file system") || !strings.Contains(r.stderr, " --no-compile --home DIR\n") {
		t.Errorf("the advice: %s", r.stderr)
	}
	var doc struct {
		Refused struct {
			Remedy struct{ Action, Command string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Refused.Remedy.Action != "other_home" {
		t.Errorf("--json remedy: %v %s", err, r.stdout)
	}
	other := t.TempDir()
	f := runFix(t, result{stderr: strings.ReplaceAll(r.stderr, "--home DIR", "--home "+filepath.Join(other, "home"))}, other)
	t.Logf("the advice run: %+v", f)
	if strings.Contains(f.stderr, "free but the env needs about") || f.code == exitUsage {
		t.Errorf("the advice, DIR on a file system with room: %+v", f)
	}
}
