package receipts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestNotRegularSaysWhatItIs: a ledger path that is a directory, a FIFO,
// a unix socket or a device is, to Open and to Scan, a *NotRegularError
// whose Kind says which. A socket was no NotRegularError at all (open
// fails with ENXIO: "cannot open receipts ledger S: … no such device or
// address" to Open, "receipts: open S: …" to Scan), and every kind but a
// directory was "not a regular file".
func TestNotRegularSaysWhatItIs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	short, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(short)
	sock := filepath.Join(short, "s.jsonl")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, kind string }{{dir, "a directory"}, {fifo, "a FIFO (named pipe)"}, {sock, "a socket"}, {os.DevNull, "a device"}} {
		t.Run(c.kind, func(t *testing.T) {
			var nr *NotRegularError
			_, err := Scan(context.Background(), []string{c.path}, ScanOptions{})
			if !errors.As(err, &nr) || nr.Kind() != c.kind || nr.Path != c.path || err.Error() != "receipts: "+c.path+" is "+c.kind+", not a regular file" {
				t.Errorf("Scan: %v, want a NotRegularError of %s", err, c.kind)
			}
			l, err := Open(context.Background(), c.path, Options{})
			if err == nil {
				l.Close()
			}
			nr = nil
			if !errors.Is(err, refusal.LedgerWriteFailed) || !errors.As(err, &nr) || nr.Kind() != c.kind {
				t.Errorf("Open: %v, want ledger_write_failed, a NotRegularError of %s", err, c.kind)
			}
		})
	}
}

// TestRepairSidecarsSayWhatTheyAre: what stands at a torn tail's repair
// lock (<path>.lock), at its repair journal (<path>.repair) or at the
// key locks (<path>.inflight) instead of a regular file is named by its
// kind, to the writer that would repair the tail and to the scan that
// reports it. Each was "is not a regular file" (the journal's with the
// mode's letters, "(d---------)"), and a symbolic link at the lock was
// "too many levels of symbolic links".
func TestRepairSidecarsSayWhatTheyAre(t *testing.T) {
	for _, sc := range []struct {
		side, kind string
		make       func(p string) error
	}{
		{".lock", "a directory", func(p string) error { return os.Mkdir(p, 0o700) }},
		{".lock", "a FIFO (named pipe)", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{".lock", "a symbolic link", func(p string) error { return os.Symlink(p+".elsewhere", p) }},
		{".repair", "a directory", func(p string) error { return os.Mkdir(p, 0o700) }},
		{".repair", "a FIFO (named pipe)", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{".inflight", "a directory", func(p string) error { return os.Mkdir(p, 0o700) }},
		{".inflight", "a FIFO (named pipe)", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{".inflight", "a symbolic link", func(p string) error { return os.Symlink(p+".elsewhere", p) }},
	} {
		t.Run(sc.side+" "+sc.kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l.jsonl")
			tail := "{frag"
			if sc.side == ".inflight" {
				tail = "" // the key locks are taken by a keyed Begin, tail or none
			}
			if err := os.WriteFile(path, []byte(rows(t, "a")+tail), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := sc.make(path + sc.side); err != nil {
				t.Fatal(err)
			}
			want := path + sc.side + " is " + sc.kind + ", not a regular file"
			if sc.side == ".inflight" {
				want = path + sc.side + " of receipts ledger " + path + " is " + sc.kind + ", not a regular file"
			}
			l, err := Open(context.Background(), path, Options{})
			if err == nil {
				_, err = l.Begin(context.Background(), testIntent("", "key", "second"))
				l.Close()
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("the writer: %v, want %q in it", err, want)
			}
			if sc.side == ".inflight" {
				return // the scan takes no key locks
			}
			_, err = Scan(context.Background(), []string{path}, ScanOptions{})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("the scan: %v, want %q in it", err, want)
			}
		})
	}
}
