package receipts

import (
	"context"
	"errors"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestNilAndZeroLedger: a nil *Ledger closes as a no-op and has no path,
// and a zero Ledger (not made by Open) refuses Begin and Finish
// ledger_write_failed; they panicked (the zero one's Begin locked fd 0
// first), which ends an executor that stays up.
func TestNilAndZeroLedger(t *testing.T) {
	try := func(what string, f func()) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v", what, r)
			}
		}()
		f()
	}
	var nl *Ledger
	try("Close of a nil Ledger", func() {
		if err := nl.Close(); err != nil {
			t.Errorf("Close of a nil Ledger: %v, want nil", err)
		}
	})
	try("Path of a nil Ledger", func() {
		if p := nl.Path(); p != "" {
			t.Errorf("Path of a nil Ledger: %q", p)
		}
	})
	in := testIntent("a1", "", "in")
	for name, l := range map[string]*Ledger{"nil": nil, "zero": {}} {
		try("Begin of a "+name+" Ledger", func() {
			_, err := l.Begin(context.Background(), in)
			var moved *MovedError
			if refusal.CodeOf(err) != refusal.LedgerWriteFailed || errors.As(err, &moved) {
				t.Errorf("Begin of a %s Ledger: %v, want ledger_write_failed saying it was not opened", name, err)
			}
		})
		try("Finish of a "+name+" Ledger", func() {
			err := l.Finish(context.Background(), Outcome{AttemptID: in.AttemptID, Status: StatusOK})
			var moved *MovedError
			if refusal.CodeOf(err) != refusal.LedgerWriteFailed || errors.As(err, &moved) {
				t.Errorf("Finish of a %s Ledger: %v, want ledger_write_failed", name, err)
			}
		})
		try("Close of a "+name+" Ledger", func() {
			if err := l.Close(); err != nil {
				t.Errorf("Close of a %s Ledger: %v", name, err)
			}
		})
	}
}
