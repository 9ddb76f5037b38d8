package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
)

// TestRootWheelMemory: a root wheel that ships a model (a 128 MiB stored
// member) costs the commands that take it no memory of its size: the
// peak resident set of fetch and env create (--wheel), and of install
// from the index (NAME==VERSION), stays under half of it. The root wheel
// was read whole into memory before (a --wheel file, or the index's body
// in chunks joined into one slice): peaks of 305 MB (fetch), 305 MB (env
// create) and 293 MB (install) for that 134 MB wheel; now 21, 23 and 24.
func TestRootWheelMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads 128 MiB wheels")
	}
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("no %s", envPython)
	}
	const size = 128 << 20
	base := testdir.New(t)
	fx, err := fixtures.Build(filepath.Join(base, "fx"), fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The large wheel replaces the echo's, under its name, in the index too.
	big, err := fixtures.WithLargeMember(t.TempDir(), fx.Echo, size)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(big.Path, fx.Echo.Path); err != nil {
		t.Fatal(err)
	}
	big.Path = fx.Echo.Path
	idx := fixtureindex.ServeSet(t, fx, filepath.Join(base, "index"))
	home := filepath.Join(base, "home")
	for _, i := range fx.Interfaces {
		if r := cruxprov(t, "--home", home, "interface", "register", i.ID, "--schema", i.Path); r.code != 0 {
			t.Fatalf("interface register %s: %+v", i.ID, r)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"fetch", []string{"fetch", "--wheel", big.Path, "--platform", fetchTestPlatform, "--index", idx}},
		{"env create", []string{"env", "create", "--wheel", big.Path, "--platform", "host", "--python", envPython, "--no-compile", "--index", idx}},
		{"install NAME==VERSION", []string{"install", big.Name + "==" + big.Version, "--sha256", big.SHA256.Hex(), "--platform", "host", "--python", envPython, "--no-compile", "--index", idx}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peak := peakRSS(t, append([]string{bin, "--home", home, "--quiet"}, tc.args...))
			t.Logf("peak resident set %d MB for a root wheel of %d MB", peak/1e6, big.Size/1e6)
			if peak > size/2 {
				t.Errorf("peak resident set %d bytes for a root wheel of %d: it holds the wheel in memory", peak, big.Size)
			}
		})
	}
}

// peakEnv, set to a file, makes the test binary run its arguments as a
// command and write that command's peak resident set there (runForPeak).
const peakEnv = "CRUXPROV_TEST_PEAK_RSS"

// peakRSS runs argv (which must exit 0) and returns its peak resident
// set in bytes. Linux keeps a process's peak across execve, and Go starts
// a command with vfork, so a command this test process starts directly
// would report this process's own peak (the 128 MiB it wrote a wheel
// with) if that is higher: the command is started by a fresh copy of the
// test binary instead (runForPeak), whose peak is a few MB.
func peakRSS(t *testing.T, argv []string) int64 {
	t.Helper()
	out := filepath.Join(t.TempDir(), "peak")
	cmd := exec.Command(os.Args[0], argv...)
	cmd.Env = append(os.Environ(), peakEnv+"="+out)
	if r := runCmd(t, cmd); r.code != 0 {
		t.Fatalf("%v: %+v", argv, r)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// runForPeak runs argv with this process's stdio, writes its peak
// resident set in bytes to out, and returns its exit code.
func runForPeak(out string, argv []string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, peakEnv+"=") {
			env = append(env, e)
		}
	}
	cmd.Env = env
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	if err := os.WriteFile(out, []byte(strconv.FormatInt(peak, 10)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return cmd.ProcessState.ExitCode()
}

// TestRootWheelInAStoreNotOurs: a user who may only read the store (an
// executor, DESIGN §14) still runs fetch --wheel and env create --wheel
// when the store holds everything they need (the env is reused): the root
// wheel's private copy goes outside the store, which is left as it was.
func TestRootWheelInAStoreNotOurs(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-root-nonowner-", debian)
	fx, err := fixtures.Build(filepath.Join(base, "fx"), fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	idx := fixtureindex.ServeSet(t, fx, filepath.Join(base, "index"))
	home := filepath.Join(base, "home")
	create := []string{"--home", home, "env", "create", "--wheel", fx.Echo.Path, "--platform", "host", "--python", debian, "--no-compile", "--json"}
	if r := cruxprov(t, append(create, "--index", idx)...); r.code != 0 {
		t.Fatalf("env create as the owner: %+v", r)
	}
	list := func() []string {
		var names []string
		filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
			if err == nil && !strings.HasSuffix(p, ".lock") {
				names = append(names, strings.TrimPrefix(p, home))
			}
			return nil
		})
		return names
	}
	before := list()
	nobody := func(args ...string) result {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		return runCmd(t, cmd)
	}
	if r := nobody("--home", home, "fetch", "--wheel", fx.Echo.Path, "--platform", fetchTestPlatform, "--offline"); r.code != 0 {
		t.Errorf("fetch --wheel as a reader of the store: %+v", r)
	}
	r := nobody(append(create, "--offline")...)
	var out envCreated
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || !out.Reused {
		t.Errorf("env create --wheel as a reader of the store: %+v", r)
	}
	// Nor does it need a temp directory it can write: an executor's
	// TMPDIR may be missing or read-only, and reading the store never
	// needed one before the root wheel was copied.
	for _, tmp := range []string{"/nonexistent", "/proc"} {
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home, "fetch", "--wheel", fx.Echo.Path, "--platform", fetchTestPlatform, "--offline")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "TMPDIR=" + tmp}
		if r := runCmd(t, cmd); r.code != 0 {
			t.Errorf("fetch --wheel as a reader of the store, TMPDIR=%s: %+v", tmp, r)
		}
	}
	if after := list(); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("the store changed:\n%v\nwas\n%v", after, before)
	}
}
