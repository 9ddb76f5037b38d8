package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
)

// smallTmpfs mounts a tmpfs of the given options at a new directory, or
// skips the test where this process may not mount one (not root).
func smallTmpfs(t *testing.T, opts string) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, opts); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (%v): this test needs root (CAP_SYS_ADMIN); run it as root", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	return mnt
}

// writeReceipt writes one receipt (an intent and its ok outcome) to the
// ledger at path.
func writeReceipt(t *testing.T, path, id string) {
	t.Helper()
	l, err := receipts.Open(context.Background(), path, receipts.Options{NoCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := digest.Sum([]byte("x")).String()
	in := receipts.Intent{AttemptID: id, Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
		Backend: "local", Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test",
		InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}
	if _, err := l.Begin(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(context.Background(), receipts.Outcome{AttemptID: id, Status: receipts.StatusOK, ResultDigest: d, EndedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// TestReceiptsScanWarnsOfAFullFileSystem: receipts scan of a sound ledger
// on a full file system exited 0 without a word while every run was
// refused ledger_write_failed at its intent. It warns (stderr, and --json
// "warnings"), naming the ledger, when its file system has less room than
// a run's intent and outcome may take, or fewer free inodes than the
// files a run makes there, or when the ledger is not writable by this
// user; the ledger itself being sound, it still exits 0. On real small
// tmpfs mounts (root only: skipped otherwise).
func TestReceiptsScanWarnsOfAFullFileSystem(t *testing.T) {
	mnt := smallTmpfs(t, "size=4m,nr_inodes=4096,mode=0700")
	ledger := filepath.Join(mnt, "r.jsonl")
	writeReceipt(t, ledger, "att_one")
	if r := cruxprov(t, "receipts", "scan", "--ledger", ledger); r.code != 0 || r.stderr != "" {
		t.Fatalf("a ledger with room: %+v", r)
	}
	// Fill the file system.
	fill, err := os.Create(filepath.Join(mnt, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 64<<10); err == nil; {
		_, err = fill.Write(chunk)
	}
	fill.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v", err)
	}
	// What runs meet there: once the ledger's last page is full (a
	// receipt or two fit in what is left of it), each is refused
	// ledger_write_failed.
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{NoCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	for i := 0; err == nil && i < 100; i++ {
		id := "att_fill" + strconv.Itoa(i)
		if _, err = l.Begin(context.Background(), receipts.Intent{AttemptID: id, Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
			Backend: "local", Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test",
			InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}); err == nil {
			err = l.Finish(context.Background(), receipts.Outcome{AttemptID: id, Status: receipts.StatusOK, ResultDigest: d, EndedAt: time.Now()})
		}
	}
	l.Close()
	if refusal.CodeOf(err) != refusal.LedgerWriteFailed || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("runs on the full file system: %v, want ledger_write_failed (no space left)", err)
	}
	// What to do is in the refusal's words, which a Go executor logs
	// (only the command line said it), and the cause said once.
	if msg := err.Error(); !strings.HasSuffix(msg, "no space left on device; free space on the ledger's file system (or raise its quota)") || strings.Count(msg, "no space left on device") != 1 {
		t.Errorf("runs on the full file system: %q, want what to do", msg)
	}
	warning := "the file system of receipts ledger " + ledger + " has 0 B free, less than the 2 MiB a run's intent and outcome may take: a run whose receipt does not fit is refused ledger_write_failed; free space on it"
	r := cruxprov(t, "receipts", "scan", "--ledger", ledger)
	if r.code != 0 || !strings.HasPrefix(r.stderr, "warning: "+warning) || !strings.Contains(r.stdout, "att_one") {
		t.Errorf("scan of a sound ledger on a full file system: want exit 0 and %q: %+v", warning, r)
	}
	r = cruxprov(t, "receipts", "scan", "--ledger", ledger, "--json")
	var doc struct{ Warnings []string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || len(doc.Warnings) != 1 || !strings.HasPrefix(doc.Warnings[0], warning) {
		t.Errorf("--json: want warnings [%q]: %+v", warning, r)
	}
	// The executor's own ledger, no run having made it yet, in a state
	// directory on it.
	host, _ := os.Hostname()
	own := filepath.Join(mnt, "receipts", filepath.Base(receipts.DefaultPath(mnt, host, os.Getuid())))
	if r := cruxprov(t, "receipts", "scan", "--state-dir", mnt); r.code != 0 || !strings.HasPrefix(r.stderr, "warning: the file system of receipts ledger "+own+" has 0 B free") {
		t.Errorf("scan --state-dir on a full file system: %+v", r)
	}
	// Room again: no warning.
	os.Remove(fill.Name())
	if r := cruxprov(t, "receipts", "scan", "--ledger", ledger); r.code != 0 || r.stderr != "" {
		t.Errorf("after freeing the space: %+v", r)
	}
	// Mounted read-only: the ledger named is not writable by this user
	// (root included), which the scan says, exiting 0 (an archive may be
	// read-only on purpose).
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	r = cruxprov(t, "receipts", "scan", "--ledger", ledger)
	if want := "warning: receipts ledger " + ledger + " is not writable by this user: a run given --ledger " + ledger + " is refused ledger_write_failed ("; r.code != 0 || !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "read-only") {
		t.Errorf("scan of a read-only ledger: want exit 0 and %q: %+v", want, r)
	}

	// Inodes: room for bytes, none for the files a run makes (the ledger
	// no run has made yet, its key locks).
	t.Run("inodes", func(t *testing.T) {
		mnt := smallTmpfs(t, "size=4m,nr_inodes=16,mode=0700")
		for i := 0; ; i++ {
			f, err := os.Create(filepath.Join(mnt, "f"+strconv.Itoa(i)))
			if err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
			f.Close()
		}
		own := filepath.Join(mnt, "receipts", filepath.Base(receipts.DefaultPath(mnt, host, os.Getuid())))
		r := cruxprov(t, "receipts", "scan", "--state-dir", mnt)
		if want := "warning: the file system of receipts ledger " + own + " has 0 inodes free, fewer than the 3 a run makes there"; r.code != 0 || !strings.HasPrefix(r.stderr, want) {
			t.Errorf("want exit 0 and %q: %+v", want, r)
		}
	})
}
