package invoke_test

import (
	"context"
	"strings"
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

// TestNoResolverSaysSo: a call whose manifest declares a secret and that
// has no resolver (a Go caller's omission: cmd/ always passes one) is
// refused secret_unresolved saying no resolver was given, and with no
// operator remedy; it said only that the secret "has no value", as for
// a resolver that had none.
func TestNoResolverSaysSo(t *testing.T) {
	f := fixture(t)
	ex := &invoke.Subprocess{WorkdirParent: t.TempDir()}
	c := f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
	c.Resolve = nil
	_, err := ex.Run(context.Background(), c)
	if refusal.CodeOf(err) != refusal.SecretUnresolved || !strings.Contains(err.Error(), "no secret resolver") || refusal.RemedyOf(err) != nil {
		t.Errorf("Run without a resolver: %v (remedy %+v); want secret_unresolved saying no resolver was given, no remedy", err, refusal.RemedyOf(err))
	}
}
