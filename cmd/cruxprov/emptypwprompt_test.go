package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKeyGenerateEmptyPasswordAtThePrompt: nothing typed at key
// generate's first password prompt is refused there and then, saying
// why (the private key is always encrypted), without asking "again:"
// for a password it was going to refuse whatever was typed the second
// time. It asked again, and refused only after the second Enter.
func TestKeyGenerateEmptyPasswordAtThePrompt(t *testing.T) {
	ptmx, pts := ptyPair(t)
	out := filepath.Join(t.TempDir(), "typed")
	var e []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CRUXPROV_KEY_PASSWORD=") {
			e = append(e, kv)
		}
	}
	errFile := filepath.Join(t.TempDir(), "stderr")
	ef, err := os.Create(errFile)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	read := func() string { b, _ := os.ReadFile(errFile); return string(b) }
	cmd := exec.Command(bin, "--home", t.TempDir(), "key", "generate", "--out", out)
	cmd.Env = e
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, io.Discard, ef
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, ptmx)
	for j := 0; !strings.Contains(read(), "key password: "); j++ {
		if j > 200 {
			cmd.Process.Kill()
			t.Fatalf("no prompt: %q", read())
		}
		time.Sleep(25 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the prompt turns the echo off after it prints
	ptmx.Write([]byte("\r"))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still waiting after an empty password: %q", read())
	}
	stderr := read()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || strings.Contains(stderr, "again: ") ||
		!strings.Contains(stderr, "usage: an empty key password: the private key is always encrypted") {
		t.Errorf("an empty password at the prompt: %v: %q", err, stderr)
	}
	if m, _ := filepath.Glob(out + ".*"); len(m) != 0 {
		t.Errorf("wrote %v", m)
	}
}
