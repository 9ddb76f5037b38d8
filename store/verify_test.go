package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/verifying"
	"github.com/cruxible/cruxprov/refusal"
)

// TestWriteVerifies: Write reads through the one verifying reader, so its
// refusals carry the typed mismatch, with the store's codes; a blob
// without a sha256 is refused before anything is written.
func TestWriteVerifies(t *testing.T) {
	body := "the wheel's bytes"
	d := digest.Sum([]byte(body))
	cases := []struct {
		name string
		d    digest.Digest
		size int64
		data string
		code refusal.Code
		over bool
	}{
		{"no sha256", digest.Digest{}, int64(len(body)), body, refusal.HashMissing, false},
		{"other bytes", d, int64(len(body)), strings.ToUpper(body), refusal.HashMismatch, false},
		{"other bytes, no size", d, 0, strings.ToUpper(body), refusal.HashMismatch, false},
		{"short", d, int64(len(body)), body[:3], refusal.SizeMismatch, false},
		{"long", d, int64(len(body)), body + "!", refusal.SizeMismatch, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			err = s.Put(context.Background(), c.d, c.size, strings.NewReader(c.data))
			if refusal.CodeOf(err) != c.code {
				t.Fatalf("got %v, want %s", err, c.code)
			}
			var e *verifying.Error
			if c.code != refusal.HashMissing && (!errors.As(err, &e) || e.Over() != c.over) {
				t.Errorf("%v carries no mismatch (over %v)", err, c.over)
			}
			if ok, _, _ := s.Check(d); ok {
				t.Error("stored")
			}
		})
	}
}
