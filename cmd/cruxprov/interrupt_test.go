package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/store"
)

// TestInterruptKillsTheProbe: Ctrl-C signals the whole process group, so
// the interpreter probe dies of it too, and its failure can come back
// before the signal has cancelled the command's context (a goroutine does
// that). Such a command is interrupted (exit 1), not refused
// materialize_failed with "name a working CPython interpreter" (exit 78),
// which it was when the probe's exit won the race (seen with
// `timeout -s INT 0.04 cruxprov env create …`, about one run in ten). Here
// the interpreter dies of a SIGINT at once (as CPython does at an uncaught
// KeyboardInterrupt), and the signal comes to cruxprov 20 ms after it
// died. An interpreter that fails on its own (exit 1) is refused at once:
// only a child a terminal's signal killed makes the command wait for one.
func TestInterruptKillsTheProbe(t *testing.T) {
	fx := fixtures.ForTest(t, fixtures.Options{})
	dir := t.TempDir()
	died := filepath.Join(dir, "died")
	py := filepath.Join(dir, "python3")
	if err := os.WriteFile(py, []byte("#!/bin/sh\ntouch '"+died+"'\nkill -INT $$\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--home", t.TempDir(), "env", "create", "--wheel", fx.Echo.Path,
		"--platform", "cp311-manylinux_2_36_x86_64", "--python", py, "--offline")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := os.Stat(died); err == nil {
			break
		}
	}
	time.Sleep(20 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt) // gone already (the old behaviour): the exit code says so
	cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if code != exitFailure || !strings.HasPrefix(stderr.String(), "error: interrupted by a signal") ||
		!strings.Contains(stderr.String(), "the wheels fetched before it stay in the store") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// TestInterruptedWhileWaitingMessage: a command stopped while it waited
// for the store's lock says so; gc says it removed nothing. gc --wait
// interrupted while it waited said "what gc removed before it stays
// removed", having removed nothing (the walk of store.md as
// cruxprov-rootless: gc --wait beside a run, Ctrl-C).
func TestInterruptedWhileWaitingMessage(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &store.WaitError{Home: "/h", Err: context.Canceled})
	m := interruptedMessage([]string{"gc"}, err)
	if !strings.HasPrefix(m, "interrupted by a signal while gc waited for the store") || !strings.Contains(m, "gc removed nothing") || strings.Contains(m, "stays removed") {
		t.Errorf("gc: %q", m)
	}
	m = interruptedMessage([]string{"run"}, err)
	if !strings.HasPrefix(m, "interrupted by a signal while it waited for the store (other processes held it); nothing partial was kept") {
		t.Errorf("run: %q", m)
	}
	if m := interruptedMessage([]string{"gc"}, context.Canceled); !strings.Contains(m, "what gc removed before it stays removed") {
		t.Errorf("gc interrupted while removing: %q", m)
	}
}

// TestInterruptedImageBuildMessage: an image build stopped while it
// pushed says what it pushed stays in the registry, the image's tag not
// moved (it said "it moved no tag" and "untagged", and the registry
// listed the sha256-<hex>.sig tag the push had written); one
// stopped before its push (or without one) says nothing of blobs it never
// pushed. Walking docs/images.md, a build into a layout alone, Ctrl-C'd,
// said "blobs pushed before it stay in the registry, untagged".
func TestInterruptedImageBuildMessage(t *testing.T) {
	pushed := fmt.Errorf("%w to r/x (no tag was moved): %w", image.ErrPushInterrupted, context.Canceled)
	// Those blobs are what it leaves, partial: it said "nothing partial
	// was kept" before naming them.
	if m := interruptedMessage([]string{"image", "build"}, pushed); m != "interrupted by a signal while it pushed (it did not move the image's tag); what it pushed before it stays in the registry: blobs, and the .sig and .att tags where it had written them, which name the image's signature and attestations, not the image: run the command again to complete it" {
		t.Errorf("stopped while pushing: %q", m)
	}
	// With --output too, the layout was written before the push: said
	// so (it said nothing partial was kept, and nothing of the layout).
	both := &image.PushInterruptedError{Repo: "r/x", Layout: "out", Signed: true, Err: context.Canceled}
	if m := interruptedMessage([]string{"image", "build"}, both); m != "interrupted by a signal while it pushed (it did not move the image's tag); what it pushed before it stays in the registry: blobs, and the .sig and .att tags where it had written them, which name the image's signature and attestations, not the image; the image is in the layout oci:out, written whole and signed before the push began: run the command again to complete it" {
		t.Errorf("stopped while pushing after the layout: %q", m)
	}
	// Unsigned (no --sign-key), it does not say signed.
	both.Signed = false
	if m := interruptedMessage([]string{"image", "build"}, both); !strings.Contains(m, "; the image is in the layout oci:out, written whole (unsigned) before the push began: run the command again") {
		t.Errorf("stopped while pushing after the layout, unsigned: %q", m)
	}
	if m := interruptedMessage([]string{"image", "build"}, &image.PushInterruptedError{Repo: "r/x", Err: context.Canceled}); strings.Contains(m, "layout") || strings.Contains(m, "nothing partial") || !strings.Contains(m, "what it pushed before it stays in the registry") {
		t.Errorf("stopped while pushing, no layout: %q", m)
	}
	for _, err := range []error{context.Canceled, fmt.Errorf("interrupted; no image was written: %w", context.Canceled)} {
		if m := interruptedMessage([]string{"image", "build"}, err); strings.Contains(m, "pushed") {
			t.Errorf("stopped before any push (%v): %q", err, m)
		}
	}
}

// TestInterruptedMessage: each command says what of its work stays done
// after a signal, and no other command's (a key generate said that gc's
// removals stay removed).
func TestInterruptedMessage(t *testing.T) {
	for _, c := range []struct {
		path     []string
		want     string
		wantNone bool
	}{
		{path: []string{"gc"}, want: "what gc removed before it stays removed"},
		{path: []string{"image", "build"}, wantNone: true},
		{path: []string{"index", "build"}, want: "the previous index, if there was one, is unchanged"},
		{path: []string{"key", "generate"}, wantNone: true},
		{path: []string{"verify"}, wantNone: true},
	} {
		t.Run(strings.Join(c.path, " "), func(t *testing.T) {
			m := interruptedMessage(c.path, context.Canceled)
			if !strings.HasPrefix(m, "interrupted by a signal; nothing partial was kept") || !strings.HasSuffix(m, ": run the command again to complete it") {
				t.Fatalf("%q", m)
			}
			if c.wantNone && strings.Count(m, ";") != 1 || !c.wantNone && !strings.Contains(m, c.want) {
				t.Fatalf("%q", m)
			}
		})
	}
}
