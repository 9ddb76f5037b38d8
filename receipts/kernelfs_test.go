package receipts

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/kernelfs"
	"github.com/cruxible/cruxprov/refusal"
)

// TestLedgerOnKernelFS: a ledger on /sys or /proc (its directory there
// or not) is refused ledger_write_failed by Open, with CreateAtBegin or
// without, and by Writable, saying the file system is the kernel's and
// to keep the ledger on another (a *kernelfs.Error under it). Root's
// access(2) grants W_OK on /sys and /proc: Open with CreateAtBegin and
// Writable took the ledger (receipts scan said all was well), and its
// run was refused at the intent with "make the nearest directory there
// writable by this user", after the verify; /proc/self was "an
// immutable attribute … stops writes", to another user too.
func TestLedgerOnKernelFS(t *testing.T) {
	if _, err := os.Stat("/sys/kernel"); err != nil {
		t.Skip("no sysfs at /sys here")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no procfs at /proc here")
	}
	ctx := context.Background()
	for _, p := range []string{"/sys/cruxprov-l.jsonl", "/sys/kernel/cruxprov/receipts/l.jsonl", "/proc/self/receipts/l.jsonl", "/proc/cruxprov/l.jsonl",
		// There, and a regular file: no ledger either (as root it was
		// opened for writing, and its lines read as corrupt).
		"/proc/self/status"} {
		for _, c := range []struct {
			name string
			call func() error
		}{
			{"Open", func() error { _, err := Open(ctx, p, Options{}); return err }},
			{"Open CreateAtBegin", func() error { _, err := Open(ctx, p, Options{CreateAtBegin: true}); return err }},
			{"Writable", func() error { return Writable(p) }},
		} {
			err := c.call()
			var (
				r  *refusal.Error
				ke *kernelfs.Error
			)
			if !errors.As(err, &r) || r.Code != refusal.LedgerWriteFailed || !errors.As(err, &ke) {
				t.Errorf("%s %s: %v (%T), want ledger_write_failed of a *kernelfs.Error", c.name, p, err, err)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, "a file system of the kernel's") || !strings.HasSuffix(msg, "; keep the ledger on another file system") ||
				strings.Contains(msg, "writable") || strings.Contains(msg, "immutable") {
				t.Errorf("%s %s: %v\nwant it to say the file system is the kernel's and to keep the ledger on another", c.name, p, msg)
			}
		}
	}
}
