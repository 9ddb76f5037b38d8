package receipts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
