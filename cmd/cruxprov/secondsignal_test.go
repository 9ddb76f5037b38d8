package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/fixtures"
)

// TestSecondSignalStopsAtOnce: a second SIGINT or SIGTERM ends a command
// that is still stopping after the first, at once, exit 1, with one line
// saying so (after the first's notice, which a stop that takes longer
// than noticeAfter prints once); with --json stdout holds one document,
// the interrupted error. The second signal was swallowed (main's
// signal.NotifyContext went on catching them) and the command went on
// stopping for as long as that took. Here env create's interpreter probe
// is a script that leaves a process holding its stdout: the first signal
// kills the probe, and the command waits for the pipe's end, 60 s. The
// store is then as a killed command leaves it: env list and gc work.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	fx := fixtures.ForTest(t, fixtures.Options{})
	for _, tc := range []struct {
		name          string
		first, second syscall.Signal
		json          bool
	}{
		{"SIGINT twice", syscall.SIGINT, syscall.SIGINT, false},
		{"SIGTERM twice --json", syscall.SIGTERM, syscall.SIGTERM, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			bg := filepath.Join(dir, "bg.pid")
			py := filepath.Join(dir, "python3")
			if err := os.WriteFile(py, []byte("#!/bin/sh\nsleep 60 &\necho $! > '"+bg+"'\nexec sleep 60\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if b, err := os.ReadFile(bg); err == nil {
					if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			args := []string{"--home", home, "env", "create", "--wheel", fx.Echo.Path,
				"--platform", "cp311-manylinux_2_36_x86_64", "--python", py, "--offline"}
			if tc.json {
				args = append(args, "--json")
			}
			cmd := exec.Command(bin, args...)
			var stdout bytes.Buffer
			stderr := &syncBuffer{}
			cmd.Stdout, cmd.Stderr = &stdout, stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			defer cmd.Process.Kill()
			waitFor(t, exited, stderr, func() bool { b, _ := os.ReadFile(bg); return len(b) > 0 }, "the probe's start")
			cmd.Process.Signal(tc.first)
			// The notice comes noticeAfter after the first signal; the
			// second is sent once it has, or after 2 s without it.
			for end := time.Now().Add(2 * time.Second); !strings.Contains(stderr.String(), stoppingNotice) && time.Now().Before(end); {
				select {
				case <-exited:
					t.Fatalf("the first signal ended it (does the probe still stall?): %s", stderr.String())
				case <-time.After(2 * time.Millisecond):
				}
			}
			sent := time.Now()
			cmd.Process.Signal(tc.second)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				t.Fatalf("still running 10 s after the second signal: %s", stderr.String())
			}
			took := time.Since(sent)
			t.Logf("ended %s after the second signal", took)
			want := stoppingNotice + "\nerror: " + forcedMessage + "\n"
			if code := cmd.ProcessState.ExitCode(); code != exitFailure || stderr.String() != want || took > 2*time.Second {
				t.Fatalf("exit %d after %s: %q", code, took, stderr.String())
			}
			if tc.json {
				var doc struct {
					Schema string
					Error  struct{ Kind, Message string }
				}
				dec := json.NewDecoder(&stdout)
				if err := dec.Decode(&doc); err != nil || doc.Schema != "cruxprov.env.create/v1" || doc.Error.Kind != "interrupted" || dec.More() {
					t.Fatalf("stdout is not the one interrupted document (%v): %q", err, stdout.String())
				}
			} else if stdout.Len() != 0 {
				t.Fatalf("stdout: %q", stdout.String())
			}
			for _, a := range [][]string{{"env", "list"}, {"gc", "--dry-run"}} {
				if r := cruxprov(t, append([]string{"--home", home}, a...)...); r.code != 0 {
					t.Fatalf("%v after the forced exit: %+v", a, r)
				}
			}
		})
	}
}

// waitFor polls cond every 2 ms for up to 30 s, failing if the command
// ends first.
func waitFor(t *testing.T, exited <-chan struct{}, stderr *syncBuffer, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		select {
		case <-exited:
			t.Fatalf("ended before %s: %s", what, stderr.String())
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 30 s: %s", what, stderr.String())
		}
	}
}

// syncBuffer is a bytes.Buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBarsThroughMain: the binary draws its progress bars on a terminal
// on stderr. main's signal handling holds stdout, which a forced exit
// takes; the stderr it gives the command is the file itself: a wrapper
// is no terminal, and the command drew no bar (the terminal tests call
// the bars in-process, and did not see it).
func TestBarsThroughMain(t *testing.T) {
	ptmx, pts := ptyPair(t)
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: 100, Row: 30}); err != nil {
		t.Skipf("TIOCSWINSZ: %v", err)
	}
	base := t.TempDir()
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	read := readPtyUntil(ptmx, "total (")
	cmd := exec.Command(bin, "--home", filepath.Join(base, "home"), "fetch", "--wheel", w.echo,
		"--platform", "cp311-manylinux_2_36_x86_64", "--index", w.url)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, pts
	if err := cmd.Run(); err != nil {
		t.Fatalf("fetch: %v: %s", err, stdout.String())
	}
	select {
	case out := <-read:
		if !strings.Contains(out, "total (") {
			t.Fatalf("the terminal shows %q", out)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no bar on the terminal")
	}
}
