package refusal

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestErrorsIsAs(t *testing.T) {
	err := fmt.Errorf("installing: %w", Wrap(HashMismatch, io.ErrUnexpectedEOF, "wheel %s", "a.whl"))
	if !errors.Is(err, HashMismatch) {
		t.Fatal("errors.Is(code) failed")
	}
	if errors.Is(err, SizeMismatch) {
		t.Fatal("matched another code")
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal("cause not unwrapped")
	}
	var r *Error
	if !errors.As(err, &r) || r.Code != HashMismatch || r.Detail != "wheel a.whl" {
		t.Fatalf("errors.As: %#v", r)
	}
	if CodeOf(err) != HashMismatch || CodeOf(io.EOF) != "" {
		t.Fatal("CodeOf")
	}
	if !errors.Is(err, &Error{}) {
		t.Fatal("any-refusal target")
	}
}

func TestCodesClosed(t *testing.T) {
	seen := map[Code]bool{}
	for _, c := range Codes() {
		if seen[c] || !Known(c) {
			t.Fatalf("code %q duplicated or unknown", c)
		}
		seen[c] = true
	}
	if Known("made_up") {
		t.Fatal("unknown code reported known")
	}
}
