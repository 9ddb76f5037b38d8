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

// TestWriteMismatchSaysWhatToDo: a hash or size the bytes do not match
// says the mismatch once and what to do, for a lock that is wrong as for
// an index that serves other bytes. The mismatch was said twice ("got X,
// the lock says Y; the index serves other bytes than were locked: got X,
// want Y") and the line ended with no next step: a provider author whose
// lock's hash was wrong, behind an index that lists no hashes, was not
// told to lock again.
func TestWriteMismatchSaysWhatToDo(t *testing.T) {
	body := "the wheel's bytes"
	d := digest.Sum([]byte(body))
	for _, c := range []struct {
		name string
		size int64
		data string
		said string
	}{
		{"other bytes", int64(len(body)), strings.ToUpper(body), digest.Sum([]byte(strings.ToUpper(body))).String()},
		{"short", int64(len(body)), body[:3], "got 3 bytes"},
		{"long", int64(len(body)), body + "!", "got more than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			err = s.Put(context.Background(), d, c.size, strings.NewReader(c.data))
			var r *refusal.Error
			if !errors.As(err, &r) {
				t.Fatalf("got %v, want a refusal", err)
			}
			msg := r.Message()
			if strings.Count(msg, c.said) != 1 || !strings.Contains(msg, "lock it again") {
				t.Fatalf("%q: want %q said once, and what to do", msg, c.said)
			}
		})
	}
}
