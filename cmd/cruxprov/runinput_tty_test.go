package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunInputFromTerminalSaysSo: run --input - on a terminal says it
// reads the input from it and how to end it (it waited without a word);
// through a pipe it says nothing of the kind.
func TestRunInputFromTerminalSaysSo(t *testing.T) {
	const hint = "reading the input from the terminal: type one JSON document, then Ctrl-D"
	home := t.TempDir()
	t.Run("terminal", func(t *testing.T) {
		ptmx, pts := ptyPair(t)
		cmd := exec.Command(bin, "--home", home, "run", "acme-echo", "echo", "--input", "-")
		var stderr syncBuffer
		cmd.Stdin, cmd.Stderr = pts, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pts.Close()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(stderr.String(), hint) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		ptmx.Write([]byte{4}) // Ctrl-D: the end of the input, empty
		err := cmd.Wait()
		if !strings.Contains(stderr.String(), hint) {
			t.Errorf("stderr %q does not say it reads the terminal", stderr.String())
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 64 || !strings.Contains(stderr.String(), "--input - is empty") {
			t.Errorf("exit %d (%v), stderr %q: want 64, the input empty", code, err, stderr.String())
		}
	})
	t.Run("pipe", func(t *testing.T) {
		cmd := exec.Command(bin, "--home", home, "run", "acme-echo", "echo", "--input", "-")
		cmd.Stdin = strings.NewReader("")
		out, _ := cmd.CombinedOutput()
		if strings.Contains(string(out), "terminal") {
			t.Errorf("through a pipe: %q", out)
		}
	})
}
