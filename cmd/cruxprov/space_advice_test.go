package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
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
	// Every wheel was in the store: the create fetched none.
	if strings.Contains(r.stderr, "this create fetched") {
		t.Errorf("a create that fetched nothing says it fetched wheels: %s", r.stderr)
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

// TestGCEnvsRelativeHome: gc --envs with a relative --home removes the
// envs no pin names (it refused each, materialize_failed "is not an env of
// the store", comparing the relative path with the store's absolute home).
func TestGCEnvsRelativeHome(t *testing.T) {
	home, lock := envHome(t, 1, 2)
	env := createJSON(t, createArgs(home, lock, "--no-compile")...).Path
	cmd := exec.Command(bin, "--home", filepath.Base(home), "gc", "--envs")
	cmd.Dir = filepath.Dir(home)
	if r := runCmd(t, cmd); r.code != 0 || !strings.Contains(r.stdout, "removed ") {
		t.Fatalf("gc --envs --home %s: %+v", filepath.Base(home), r)
	}
	if _, err := os.Stat(env); err == nil {
		t.Errorf("%s is still there", env)
	}
}

// TestGCEnvsReadOnlyStore: gc --envs on a store whose file system is
// mounted read-only fails as gc does (exit 1), not with env remove's
// materialize_failed refusal (exit 78).
func TestGCEnvsReadOnlyStore(t *testing.T) {
	dir := testdir.Tmpfs(t, "16m")
	home, lock := envHomeAt(t, filepath.Join(dir, "home"), 1, 2)
	createJSON(t, createArgs(home, lock, "--no-compile")...)
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount read-only: %v", err)
	}
	defer unix.Mount("", dir, "", unix.MS_REMOUNT, "")
	if r := cruxprov(t, "--home", home, "gc", "--envs"); r.code != exitFailure || !strings.Contains(r.stderr, "error: cannot remove the env ") || !strings.Contains(r.stderr, "read-only file system; the store's file system is mounted read-only: remount it read-write to gc it") {
		t.Errorf("gc --envs on a read-only store: %+v", r)
	}
}

// TestEnvCreateFullStoreRootWheelStored: env create --wheel on a store
// whose disk is full, with the root wheel (and every wheel) stored
// already, as after an env create refused for free space, is refused as
// that one was (materialize_failed, the free-space check) and its advice.
// It failed "no space left for the store …: writing a blob", exit 1,
// before reaching the check: the root wheel was copied into the store
// again first.
func TestEnvCreateFullStoreRootWheelStored(t *testing.T) {
	dir, fx, idx := tmpfsWithIndex(t, "64m")
	home := filepath.Join(dir, "home")
	create := []string{"--home", home, "env", "create", "--wheel", fx.Echo.Path, "--platform", "host", "--python", envPython, "--no-compile", "--index", idx}
	first := createJSON(t, append(create, "--json")...)
	if r := cruxprov(t, "--home", home, "env", "remove", first.Path); r.code != 0 {
		t.Fatalf("env remove: %+v", r)
	}
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for len(chunk) > 0 {
		if _, err := f.Write(chunk); err != nil {
			chunk = chunk[:len(chunk)/2]
		}
	}
	f.Close()
	r := cruxprov(t, create...)
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: materialize_failed:") || !strings.Contains(r.stderr, "free but the env needs about") {
		t.Fatalf("env create on a full store, its wheels stored: %+v", r)
	}
	if strings.Contains(r.stderr, "this create fetched") {
		t.Errorf("a create that fetched nothing says it fetched wheels: %s", r.stderr)
	}
}

// TestSpaceAdviceNoCache: env create on a store with room for the env but
// not for the unpacked-wheel cache's new entries as well is refused with
// the advice to create it without the caches (its remedy no_cache, freeing
// space the other: it advised gc only, which had nothing to free), and the
// advice, run as printed, creates the env.
func TestSpaceAdviceNoCache(t *testing.T) {
	dir := testdir.Tmpfs(t, "16m")
	const files, lines = 8, 50000
	home, lock := envHomeWith(t, filepath.Join(dir, "home"), 1, files, lines)
	var members int64 // what the modules take, in the env and again in the cache
	for j := 0; j < files; j++ {
		members += int64(len(fmt.Sprintf("x%d = %d\n", j, j)) * lines)
	}
	// Leave the env and half the cache's entry free.
	fill(t, dir, members*3/2)

	r := cruxprov(t, createArgs(home, lock, "--no-compile")...)
	// The store holds no sealed env: the other advice is another store.
	want := "; or: cruxprov env create --lock " + lock + " --platform host --python " + envPython + " --offline --no-compile --home DIR"
	if r.code != exitRefused || !strings.Contains(r.stderr, "without the store's caches") || !strings.Contains(r.stderr, " --no-cache"+want) {
		t.Fatalf("create with room for the env, not its cache: %+v", r)
	}
	var doc struct {
		Refused struct {
			Remedy struct {
				Action, Command string
				Or              *struct{ Action, Command string }
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if rem := doc.Refused.Remedy; rem.Action != "no_cache" || rem.Or == nil || rem.Or.Action != "other_home" || !strings.HasSuffix(rem.Command, " --no-cache") {
		t.Fatalf("--json remedy: %+v", doc.Refused.Remedy)
	}
	f := runFix(t, r, dir)
	if f.code != 0 || !strings.Contains(f.stdout, "created ") {
		t.Fatalf("the advice as printed: %+v", f)
	}
	if ents, _ := os.ReadDir(filepath.Join(home, "cache/unpacked-v1")); len(ents) != 0 {
		t.Errorf("the create without the caches wrote %v", ents)
	}
}

// fill writes a file into dir until its file system has about free bytes
// free.
func fill(t *testing.T, dir string, free int64) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 16<<10)
	for {
		var sfs unix.Statfs_t
		if err := unix.Statfs(dir, &sfs); err != nil {
			t.Fatal(err)
		}
		if int64(sfs.Bavail)*sfs.Bsize <= free+int64(len(chunk)) {
			return
		}
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNoCacheRemedyFallsBack: a remedy no_cache whose command has no
// --no-cache is not rendered (it rendered the command again with it, a
// usage error); the other remedy (Or) is advised alone.
func TestNoCacheRemedyFallsBack(t *testing.T) {
	rem := &refusal.Remedy{Action: refusal.ActionNoCache, Or: &refusal.Remedy{Action: refusal.ActionGC}}
	for _, tc := range []struct{ args, want string }{
		{"cruxprov --home H env create --lock L", "cruxprov --home H env create --lock L --no-cache; or: cruxprov gc --envs --dry-run --home H"},
		{"cruxprov --home H install W", "cruxprov --home H install W --no-cache; or: cruxprov gc --envs --dry-run --home H"},
		{"cruxprov --home H env create --lock L --no-cache", "cruxprov gc --envs --dry-run --home H"},
		{"cruxprov --home H verify acme-echo", "cruxprov gc --envs --dry-run --home H"},
	} {
		_, cmdline, or := renderRemedies(rem, strings.Fields(tc.args))
		if cmdline+or != tc.want {
			t.Errorf("%s: %q, want %q", tc.args, cmdline+or, tc.want)
		}
	}
}

// TestShortDiskCountsTheFetchedRoot: env create NAME==VERSION --sha256
// HEX on a store short of space for the env, on a real small disk,
// fetches the root wheel from the index and the lock's wheel; the
// free-space refusal counts both among the wheels the create fetched,
// as the blobs the store gained: it said "the wheel this create fetched",
// leaving the root wheel out.
func TestShortDiskCountsTheFetchedRoot(t *testing.T) {
	dir := testdir.Tmpfs(t, "16m")
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("no %s", envPython)
	}
	base := testdir.New(t)
	fx, err := fixtures.Build(filepath.Join(base, "fx"), fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	idx := fixtureindex.ServeSet(t, fx, filepath.Join(base, "index"))
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	fill(t, dir, 160<<10) // the wheels fit (a few KiB), the env does not
	r := cruxprov(t, "--home", home, "env", "create", fx.Echo.Name+"=="+fx.Echo.Version, "--sha256", fx.Echo.SHA256.Hex(),
		"--platform", "host", "--python", envPython, "--index", idx)
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: materialize_failed:") || !strings.Contains(r.stderr, "free but the env needs about") {
		t.Fatalf("env create NAME==VERSION on a short store: %+v", r)
	}
	blobs, err := os.ReadDir(filepath.Join(home, store.BlobsDir))
	if err != nil {
		t.Fatal(err)
	}
	var fetched int
	for _, b := range blobs {
		if b.Type().IsRegular() && len(b.Name()) == 64 {
			fetched++
		}
	}
	if fetched != 2 {
		t.Fatalf("the store holds %d blobs, want the root wheel's and its lock's one: %v", fetched, blobs)
	}
	if want := "(the 2 wheels this create fetched, which nothing names yet, are too few to free and are fetched again)"; !strings.Contains(r.stderr, want) {
		t.Errorf("the refusal does not count the root wheel it fetched: %s\nwant %q", r.stderr, want)
	}
}

// TestNoBytecodeRemedyAfterTheOthers: a store that ran out of space while
// the create wrote bytecode has the create without it as one more remedy
// (no_bytecode, after gc and, writing the caches, no_cache): each is
// advised after "; or: ", the ones the command cannot carry out left
// out: no --no-compile for a command given it already, or for an env
// rebuilt from its seal (env create --replace ENV keeps the seal's
// bytecode: --no-compile is a usage error there), nor --no-cache for one
// given it. The --json remedy carries the chain as its "or" objects.
func TestNoBytecodeRemedyAfterTheOthers(t *testing.T) {
	gcOr := &refusal.Remedy{Action: refusal.ActionGC, Or: &refusal.Remedy{Action: refusal.ActionNoBytecode}}
	cache := &refusal.Remedy{Action: refusal.ActionNoCache, Or: gcOr}
	gc := "cruxprov gc --envs --dry-run --home H"
	for _, tc := range []struct {
		rem        *refusal.Remedy
		args, want string
	}{
		{gcOr, "cruxprov --home H env create --lock L --no-cache", gc + "; or: cruxprov --home H env create --lock L --no-cache --no-compile"},
		{cache, "cruxprov --home H env create --lock L", "cruxprov --home H env create --lock L --no-cache; or: " + gc + "; or: cruxprov --home H env create --lock L --no-compile"},
		{cache, "cruxprov --home H install W --platform host", "cruxprov --home H install W --platform host --no-cache; or: " + gc + "; or: cruxprov --home H install W --platform host --no-compile"},
		{cache, "cruxprov --home H env create --lock L --no-cache", gc + "; or: cruxprov --home H env create --lock L --no-cache --no-compile"},
		{gcOr, "cruxprov --home H env create --lock L --no-compile", gc},
		{gcOr, "cruxprov --home H env create --replace /s/envs/abc", gc},
		{gcOr, "cruxprov --home H env create --replace acme-echo==1.0.0 --sha256 ab", gc + "; or: cruxprov --home H env create --replace acme-echo==1.0.0 --sha256 ab --no-compile"},
	} {
		_, cmdline, or := renderRemedies(tc.rem, strings.Fields(tc.args))
		if got := cmdline + or; got != tc.want {
			t.Errorf("%s\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
	args := strings.Fields("cruxprov --home H env create --lock L")
	rem, cmdline, _ := renderRemedies(cache, args)
	j := remedyJSON(rem, cmdline, args)
	or, _ := j["or"].(map[string]any)
	oror, _ := or["or"].(map[string]any)
	if j["action"] != "no_cache" || or["action"] != "gc" || oror["action"] != "no_bytecode" || oror["command"] != "cruxprov --home H env create --lock L --no-compile" {
		t.Errorf("--json remedy: %#v", j)
	}
}

// TestEnvCreateFullStoreAtFetch: env create and install whose wheels do
// not fit in the store (a real tmpfs, filled) fail with one line naming
// the store and what frees space (exit 1, a failure of the host, not a
// refusal: issue 11, docs/store.md), and leave no env, no staging and no
// temp blob.
func TestEnvCreateFullStoreAtFetch(t *testing.T) {
	dir, fx, idx := tmpfsWithIndex(t, "4m")
	home := filepath.Join(dir, "home")
	if _, err := store.Open(home); err != nil {
		t.Fatal(err)
	}
	fill, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 4096); err == nil; {
		_, err = fill.Write(chunk)
	}
	fill.Close()
	for _, args := range [][]string{
		{"env", "create", "--wheel", fx.Echo.Path, "--platform", "host", "--python", envPython, "--no-compile", "--index", idx},
		{"install", fx.Echo.Path, "--platform", "host", "--python", envPython, "--no-compile", "--index", idx},
	} {
		r := cruxprov(t, append([]string{"--home", home}, args...)...)
		if r.code != exitFailure || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "error: no space left for the store "+home) ||
			!strings.Contains(r.stderr, "cruxprov gc") {
			t.Errorf("%s on a full store: want one line naming the store and gc, exit 1: %+v", args[0], r)
		}
		for _, glob := range []string{"envs/*", "tmp/*", "blobs/sha256/.tmp-*"} {
			if left, _ := filepath.Glob(filepath.Join(home, glob)); len(left) > 0 {
				t.Errorf("%s on a full store left %v", args[0], left)
			}
		}
	}
}

// TestEnvCreateFullStoreAtFetchRootless is TestEnvCreateFullStoreAtFetch
// as an unprivileged user, in a user namespace of its own where it mounts
// its tmpfs (skipped where the machine allows none).
func TestEnvCreateFullStoreAtFetchRootless(t *testing.T) {
	if os.Getenv(usernsEnv) != "" {
		t.Skip("the child runs TestEnvCreateFullStoreAtFetch")
	}
	inUserNS(t, "TestEnvCreateFullStoreAtFetch")
}

// tmpfsWithIndex is a real tmpfs of size (root only: skipped otherwise)
// and the fixture providers built and served by a loopback index, for
// the tests of a store that fills up; skipped without envPython.
func tmpfsWithIndex(t *testing.T, size string) (dir string, fx *fixtures.Set, idx string) {
	t.Helper()
	dir = testdir.Tmpfs(t, size)
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("no %s", envPython)
	}
	base := testdir.New(t)
	fx, err := fixtures.Build(filepath.Join(base, "fx"), fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dir, fx, fixtureindex.ServeSet(t, fx, filepath.Join(base, "index"))
}
