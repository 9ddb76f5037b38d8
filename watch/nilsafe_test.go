package watch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cruxible/cruxprov/watch"
)

// TestNilVerifier: a nil *Verifier closes as a no-op and verifies as
// one made without a verify function, ErrNoVerify, which errors.Is
// tells apart; they panicked, and "no verify function" was an untyped
// error a caller could only compare by its words.
func TestNilVerifier(t *testing.T) {
	for name, v := range map[string]*watch.Verifier{
		"nil":                nil,
		"no verify function": watch.NewVerifier(watch.Spec{Env: t.TempDir()}, nil),
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("a %s Verifier panicked: %v", name, r)
				}
			}()
			if err := v.Verify(context.Background()); !errors.Is(err, watch.ErrNoVerify) {
				t.Errorf("Verify of a %s Verifier: %v, want ErrNoVerify", name, err)
			}
			if err := v.WatchErr(); err != nil {
				t.Errorf("WatchErr of a %s Verifier: %v", name, err)
			}
			if n := v.FullVerifies(); n != 0 {
				t.Errorf("FullVerifies of a %s Verifier: %d", name, n)
			}
			if err := v.Close(); err != nil {
				t.Errorf("Close of a %s Verifier: %v, want nil", name, err)
			}
		}()
	}
}
