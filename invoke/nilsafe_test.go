package invoke_test

import (
	"context"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/refusal"
)

// TestNilExecutorNoPanic: a nil *Subprocess refuses invoke_failed with
// nothing run, and a zero RecordedRefusal has an error text; both
// panicked, which ends an executor that stays up.
func TestNilExecutorNoPanic(t *testing.T) {
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Run of a nil *Subprocess panicked: %v", r)
			}
		}()
		var s *invoke.Subprocess
		res, err := s.Run(context.Background(), &invoke.Call{Provider: "p", Entrypoint: "e"})
		if res != nil || refusal.CodeOf(err) != refusal.InvokeFailed {
			t.Errorf("Run of a nil *Subprocess: %+v, %v; want invoke_failed", res, err)
		}
	}()
	for name, e := range map[string]*invoke.RecordedRefusal{"zero": {}, "nil": nil} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Error of a %s RecordedRefusal panicked: %v", name, r)
				}
			}()
			if e.Error() == "" || e.Unwrap() != nil {
				t.Errorf("a %s RecordedRefusal: %q, %v", name, e.Error(), e.Unwrap())
			}
		}()
	}
}
