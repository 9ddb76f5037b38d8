package sign

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// pw is a Password that gives p and counts its calls.
func pw(p string, calls *int) func(bool) ([]byte, error) {
	return func(bool) ([]byte, error) { *calls++; return []byte(p), nil }
}

func kindOf(err error) PairErrorKind {
	var pe *PairError
	if errors.As(err, &pe) {
		return pe.Kind
	}
	return 0
}

func TestWritePair(t *testing.T) {
	ctx := context.Background()
	prefix := filepath.Join(t.TempDir(), "keys", "alice")
	var calls int
	pub, completed, err := WritePair(ctx, prefix, PairOptions{Password: pw("pw", &calls)})
	if err != nil || completed || pub == nil {
		t.Fatalf("new pair: %v %v %v", pub, completed, err)
	}
	for p, m := range map[string]fs.FileMode{prefix + ".key": 0o600, prefix + ".pub": 0o644, filepath.Dir(prefix): 0o700 | fs.ModeDir} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != m {
			t.Errorf("%s: %v, %v; want mode %v", p, fi.Mode(), err, m)
		}
	}
	kb, _ := os.ReadFile(prefix + ".key")
	if k, err := LoadPrivateKey(kb, []byte("pw")); err != nil || k.Public().Digest() != pub.Digest() {
		t.Fatalf("the key written does not open to the public key returned: %v", err)
	}

	t.Run("a whole pair is never overwritten, and no password is asked", func(t *testing.T) {
		calls = 0
		_, _, err := WritePair(ctx, prefix, PairOptions{Password: pw("pw", &calls)})
		if kindOf(err) != PairExists || calls != 0 {
			t.Fatalf("got %v (%d password calls), want PairExists and none", err, calls)
		}
	})
	t.Run("the key alone is completed with its password only", func(t *testing.T) {
		pubBytes, _ := os.ReadFile(prefix + ".pub")
		if err := os.Remove(prefix + ".pub"); err != nil {
			t.Fatal(err)
		}
		_, _, err := WritePair(ctx, prefix, PairOptions{Password: pw("wrong", &calls)})
		if kindOf(err) != PairWrongPassword {
			t.Fatalf("wrong password: got %v, want PairWrongPassword", err)
		}
		if _, err := os.Lstat(prefix + ".pub"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a wrong password wrote %s.pub", prefix)
		}
		if _, _, err := WritePair(ctx, prefix, PairOptions{Password: pw("", &calls)}); kindOf(err) != PairEmptyPassword {
			t.Fatalf("empty password: got %v, want PairEmptyPassword", err)
		}
		got, completed, err := WritePair(ctx, prefix, PairOptions{Password: pw("pw", &calls)})
		if err != nil || !completed || got.Digest() != pub.Digest() {
			t.Fatalf("completion: %v %v %v", got, completed, err)
		}
		if b, _ := os.ReadFile(prefix + ".pub"); string(b) != string(pubBytes) {
			t.Fatalf("the completed public key differs:\n%s\nwant\n%s", b, pubBytes)
		}
	})
	t.Run("a key that is not 0600 was not left by an interrupted run", func(t *testing.T) {
		if err := os.Remove(prefix + ".pub"); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(prefix+".key", 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := WritePair(ctx, prefix, PairOptions{Password: pw("pw", &calls)})
		if kindOf(err) != PairForeign {
			t.Fatalf("got %v, want PairForeign", err)
		}
	})
	t.Run("a damaged key alone is refused", func(t *testing.T) {
		p := filepath.Join(filepath.Dir(prefix), "bob")
		if err := os.WriteFile(p+".key", []byte("not a key"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := WritePair(ctx, p, PairOptions{Password: pw("pw", &calls)}); kindOf(err) != PairDamaged {
			t.Fatalf("got %v, want PairDamaged", err)
		}
	})
	t.Run("no key written leaves no directory made", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "b")
		_, _, err := WritePair(ctx, filepath.Join(dir, "k"), PairOptions{Password: pw("", &calls)})
		if kindOf(err) != PairEmptyPassword {
			t.Fatalf("got %v, want PairEmptyPassword", err)
		}
		if _, err := os.Lstat(filepath.Dir(dir)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s was left: %v", filepath.Dir(dir), err)
		}
	})
}
