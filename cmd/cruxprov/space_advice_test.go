package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/store"
)

// TestSpaceAdviceFreesSpace: on a store whose disk a sealed env no pin
// names fills, env create's free-space refusal advises what frees it:
// plain gc (the advice was "cruxprov gc") removed only the wheel the
// create had fetched and the retry was refused again; the advised
// gc --envs --dry-run lists the env, and gc --envs frees the room (the
// retry gets past the space check, to fetch the wheel gc took again).
func TestSpaceAdviceFreesSpace(t *testing.T) {
	dir := testdir.Tmpfs(t, "16m")
	home, lock := envHomeAt(t, filepath.Join(dir, "home"), 1, 400)
	first := createJSON(t, createArgs(home, lock)...) // with bytecode
	free := func() int64 {
		var sfs unix.Statfs_t
		if err := unix.Statfs(dir, &sfs); err != nil {
			t.Fatal(err)
		}
		return int64(sfs.Bavail) * sfs.Bsize
	}
	envBytes := store.TreeBytes(first.Path)
	// Leave a third of that env free: the create without bytecode needs
	// about two thirds of it.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filler, 0); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(filler, os.O_WRONLY, 0)
	chunk := make([]byte, 64<<10)
	for free() > envBytes/3+int64(len(chunk)) {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()

	again := createArgs(home, lock, "--no-compile")
	r := cruxprov(t, again...)
	advice := "; to fix: cruxprov gc --envs --dry-run --home " + home
	if r.code != exitRefused || !strings.Contains(r.stderr, "free but the env needs about") || !strings.Contains(r.stderr, advice) {
		t.Fatalf("create short of space: %+v", r)
	}
	if r := cruxprov(t, "--home", home, "gc"); r.code != 0 {
		t.Fatalf("gc: %+v", r)
	}
	if r := cruxprov(t, again...); r.code != exitRefused || !strings.Contains(r.stderr, "free but the env needs about") {
		t.Fatalf("plain gc freed the room (the test does not show what it should): %+v", r)
	}
	r = cruxprov(t, strings.Fields(strings.SplitN(r.stderr, "; to fix: ", 2)[1])[1:]...)
	if r.code != 0 || !strings.Contains(r.stdout, "would remove envs/"+filepath.Base(first.Path)+"\n") {
		t.Fatalf("the advised command: %+v", r)
	}
	if r := cruxprov(t, "--home", home, "gc", "--envs"); r.code != 0 {
		t.Fatalf("gc --envs: %+v", r)
	}
	if r := cruxprov(t, again...); strings.Contains(r.stderr, "free but the env needs about") || !strings.Contains(r.stderr, "offline_miss") {
		t.Errorf("after gc --envs: %+v", r)
	}
}
