package verifying

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// TestReader: one table for every way the bytes can differ; each case is
// read whole and a byte at a time, and Check gives the same verdict on the
// same bytes.
func TestReader(t *testing.T) {
	body := []byte("hello, verified world")
	sum := digest.Sum(body)
	n := int64(len(body))
	cases := []struct {
		name string
		data []byte
		want Want
		code refusal.Code // "" for io.EOF
		over bool
	}{
		{"exact", body, Want{SHA256: sum, Size: n}, "", false},
		{"size unknown", body, Want{SHA256: sum, Size: SizeUnknown}, "", false},
		{"size unknown within max", body, Want{SHA256: sum, Size: SizeUnknown, Max: n}, "", false},
		{"empty", nil, Want{SHA256: digest.Sum(nil), Size: 0}, "", false},
		{"short", body[:5], Want{SHA256: sum, Size: n}, refusal.SizeMismatch, false},
		{"long", append(append([]byte{}, body...), '!'), Want{SHA256: sum, Size: n}, refusal.SizeMismatch, true},
		{"over max", body, Want{SHA256: sum, Size: SizeUnknown, Max: n - 1}, refusal.SizeMismatch, true},
		{"other bytes", bytes.ToUpper(body), Want{SHA256: sum, Size: n}, refusal.HashMismatch, false},
		{"other bytes, size unknown", bytes.ToUpper(body), Want{SHA256: sum, Size: SizeUnknown}, refusal.HashMismatch, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, how := range []string{"whole", "one byte"} {
				var src io.Reader = bytes.NewReader(c.data)
				if how == "one byte" {
					src = iotest.OneByteReader(src)
				}
				r, err := NewReader(src, c.want)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(r)
				checkVerdict(t, how, err, c.code, c.over)
				if limit := c.want.limit(); limit >= 0 && int64(len(got)) > limit {
					t.Errorf("%s: yielded %d bytes past the bound %d", how, len(got), limit)
				}
				if c.code == "" && (!bytes.Equal(got, c.data) || !r.Verified() || r.N() != int64(len(c.data))) {
					t.Errorf("%s: got %q (verified %v, n %d)", how, got, r.Verified(), r.N())
				}
				if err == nil {
					err = io.EOF // ReadAll's nil
				}
				if _, again := r.Read(make([]byte, 8)); again != err {
					t.Errorf("%s: not sticky: %v then %v", how, err, again)
				}
			}
			if !c.over {
				checkVerdict(t, "Check", Check(c.data, c.want), c.code, false)
			}
		})
	}
}

func checkVerdict(t *testing.T, how string, err error, code refusal.Code, over bool) {
	t.Helper()
	if code == "" {
		if err != nil && err != io.EOF {
			t.Fatalf("%s: %v", how, err)
		}
		return
	}
	var e *Error
	if !errors.Is(err, code) || !errors.As(err, &e) || e.Code() != code || e.Over() != over {
		t.Fatalf("%s: got %v, want %s (over %v)", how, err, code, over)
	}
	if code == refusal.HashMismatch && e.Got.IsZero() {
		t.Errorf("%s: a hash mismatch without the hash got", how)
	}
}

// TestHashMissing: bytes without a sha256 are refused before any is read;
// only NewUnhashed reads them, by size alone.
func TestHashMissing(t *testing.T) {
	if r, err := NewReader(strings.NewReader("x"), Want{Size: 1}); r != nil || !errors.Is(err, refusal.HashMissing) || !errors.Is(err, ErrHashMissing) {
		t.Fatalf("NewReader without a hash: %v %v", r, err)
	}
	if err := Check([]byte("x"), Want{Size: 1}); !errors.Is(err, refusal.HashMissing) {
		t.Fatalf("Check without a hash: %v", err)
	}
	if _, err := io.ReadAll(NewUnhashed(strings.NewReader("abc"), 3)); err != nil {
		t.Fatalf("unhashed, right size: %v", err)
	}
	if _, err := io.ReadAll(NewUnhashed(strings.NewReader("abcd"), 3)); !errors.Is(err, refusal.SizeMismatch) {
		t.Fatalf("unhashed, too long: %v", err)
	}
	if _, err := io.ReadAll(NewUnhashed(strings.NewReader("ab"), 3)); !errors.Is(err, refusal.SizeMismatch) {
		t.Fatalf("unhashed, too short: %v", err)
	}
	if _, err := io.ReadAll(NewUnhashed(strings.NewReader("ab"), SizeUnknown)); !errors.Is(err, refusal.HashMissing) {
		t.Fatalf("neither hash nor size: %v", err)
	}
}

// TestSourceError: an error of the source is returned as it is, not as a
// mismatch.
func TestSourceError(t *testing.T) {
	boom := errors.New("connection reset")
	r, err := NewReader(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), Want{SHA256: digest.Sum([]byte("abc")), Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); err != boom {
		t.Fatalf("got %v, want the source's error", err)
	}
}

// TestIOReader: a right stream passes testing/iotest's reader checks.
func TestIOReader(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 1000)
	r, err := NewReader(bytes.NewReader(body), Want{SHA256: digest.Sum(body), Size: int64(len(body))})
	if err != nil {
		t.Fatal(err)
	}
	if err := iotest.TestReader(r, body); err != nil {
		t.Fatal(err)
	}
}
