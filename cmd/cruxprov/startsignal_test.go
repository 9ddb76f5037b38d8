package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSignalWhileItStarts: a SIGINT that comes while the process starts,
// before main (its ~150 package inits take 40–120 ms on a loaded host),
// is the command's interruption: one line, exit 1. main installed the
// handler, and such a signal killed the command silently, by Go's
// default (death by SIGINT). The signal is sent as the inits reach
// internal/interrupt's (GODEBUG=inittrace=1 prints each as it ends), and
// a few milliseconds after, while the others run.
func TestSignalWhileItStarts(t *testing.T) {
	for _, delay := range []time.Duration{0, 2 * time.Millisecond, 10 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(bin, "--home", filepath.Join(dir, "home"), "key", "generate", "--out", filepath.Join(dir, "keys", "alice"))
			cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "GODEBUG=inittrace=1")
			pipe, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var lines []string
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if strings.HasPrefix(sc.Text(), "init github.com/cruxible/cruxprov/internal/interrupt ") {
					time.Sleep(delay)
					cmd.Process.Signal(os.Interrupt)
					break
				}
			}
			for sc.Scan() {
				if !strings.HasPrefix(sc.Text(), "init ") {
					lines = append(lines, sc.Text())
				}
			}
			cmd.Wait()
			last := lines[len(lines)-1]
			if code := cmd.ProcessState.ExitCode(); code != exitFailure || !strings.HasPrefix(last, "error: interrupted by a signal") {
				t.Fatalf("exit %d (%s): %s", code, cmd.ProcessState, strings.Join(lines, "\n"))
			}
			if _, err := os.Stat(filepath.Join(dir, "keys", "alice.key")); err == nil {
				t.Fatal("interrupted, it wrote the key")
			}
		})
	}
}
