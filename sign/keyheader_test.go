package sign

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/cruxible/cruxprov/refusal"
)

// vectorDigest is the digest of testdata/vector.pub, the public key of
// testdata/vector.key and vector-noheader.key (password "correct
// horse"): docs/governance.md shows it.
const vectorDigest = "sha256:5df9cc96576a0046dfe126c8d64c3e4b2b79db4be14a475b9dc5855a00ba9a35"

// TestKeyFileCarriesItsPublicKey: a private key file Generate writes
// names its public key in a PEM header, read without the password (an
// approve that key made already says so before asking for it); cosign's
// reader (sigstore's, which ignores PEM headers) still opens it; a file
// without the header (an earlier cruxprov's, cosign's) loads as before
// and carries none.
func TestKeyFileCarriesItsPublicKey(t *testing.T) {
	priv, pub := pair(t)
	want, err := ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	got, err := CarriedPublicKey(priv)
	if err != nil || got == nil || got.Digest() != want.Digest() {
		t.Fatalf("carried %v, %v; want %s", got, err, want.Digest())
	}
	if _, err := cryptoutils.UnmarshalPEMToPrivateKey(priv, cryptoutils.StaticPasswordFunc([]byte("correct horse"))); err != nil {
		t.Fatalf("cosign's reader does not open the key with its header: %v", err)
	}
	blk, _ := pem.Decode(priv)
	blk.Headers = nil
	old := pem.EncodeToMemory(blk)
	if p, err := CarriedPublicKey(old); p != nil || err != nil {
		t.Fatalf("a key file without the header carries %v, %v", p, err)
	}
	if k, err := LoadPrivateKey(old, []byte("correct horse")); err != nil || k.Public().Digest() != want.Digest() {
		t.Fatalf("a key file without the header: %v", err)
	}
	for _, b := range [][]byte{pub, []byte("nope"), nil} {
		if p, err := CarriedPublicKey(b); p != nil || err != nil {
			t.Fatalf("not a private key file: %v, %v", p, err)
		}
	}
}

// TestKeyFileSwappedPublicKeyRefused: the header is what the file says,
// until the password opens the key: one naming another key (edited, or
// copied from another key's file) is refused when the key is opened,
// signer_untrusted, however right the password; one that is not a
// public key is refused before the password is used.
func TestKeyFileSwappedPublicKeyRefused(t *testing.T) {
	priv, _ := pair(t)
	_, otherPub, err := Generate([]byte("other"))
	if err != nil {
		t.Fatal(err)
	}
	ob, _ := pem.Decode(otherPub)
	blk, _ := pem.Decode(priv)
	blk.Headers = map[string]string{PublicKeyHeader: base64.StdEncoding.EncodeToString(ob.Bytes)}
	swapped := pem.EncodeToMemory(blk)
	other, _ := ParsePublicKey(otherPub)
	if p, err := CarriedPublicKey(swapped); err != nil || p.Digest() != other.Digest() {
		t.Fatalf("carried %v, %v", p, err)
	}
	_, err = LoadPrivateKey(swapped, []byte("correct horse"))
	if !errors.Is(err, refusal.SignerUntrusted) || !strings.Contains(err.Error(), other.Digest().String()) {
		t.Fatalf("a swapped public key header: %v", err)
	}
	for name, h := range map[string]string{"not base64": "%%%", "not a key": base64.StdEncoding.EncodeToString([]byte("nope"))} {
		blk.Headers = map[string]string{PublicKeyHeader: h}
		bad := pem.EncodeToMemory(blk)
		if _, err := CarriedPublicKey(bad); !errors.Is(err, refusal.SignerUntrusted) {
			t.Errorf("%s: carried: %v", name, err)
		}
		if _, err := LoadPrivateKey(bad, []byte("correct horse")); !errors.Is(err, refusal.SignerUntrusted) {
			t.Errorf("%s: load: %v", name, err)
		}
	}
}

// TestKeyFileVectors: known-answer key files, as Generate writes them
// (vector.key) and as it wrote them before the header (the same key,
// vector-noheader.key), open with their password to the key whose
// digest docs/governance.md shows; the header is read without it.
func TestKeyFileVectors(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pub, err := ParsePublicKey(read("vector.pub"))
	if err != nil || pub.Digest().String() != vectorDigest {
		t.Fatalf("vector.pub: %v %v", pub, err)
	}
	withHeader := read("vector.key")
	if !strings.Contains(string(withHeader), "\n"+PublicKeyHeader+": ") {
		t.Fatalf("vector.key has no %s header", PublicKeyHeader)
	}
	if p, err := CarriedPublicKey(withHeader); err != nil || p.Digest().String() != vectorDigest {
		t.Fatalf("vector.key carries %v, %v", p, err)
	}
	for _, name := range []string{"vector.key", "vector-noheader.key"} {
		k, err := LoadPrivateKey(read(name), []byte("correct horse"))
		if err != nil || k.Public().Digest().String() != vectorDigest {
			t.Errorf("%s: %v", name, err)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "governance.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), vectorDigest) || !strings.Contains(string(doc), "sign/testdata/vector.key") {
		t.Errorf("docs/governance.md does not show the key file vector (sign/testdata/vector.key, %s)", vectorDigest)
	}
}

// TestWritePairSwappedHeaderNotCompleted: an interrupted pair's key
// whose header names another key is not completed: no PREFIX.pub is
// written from it, and the refusal is the header's (signer_untrusted),
// not a wrong password.
func TestWritePairSwappedHeaderNotCompleted(t *testing.T) {
	priv, _ := pair(t)
	_, otherPub, err := Generate([]byte("other"))
	if err != nil {
		t.Fatal(err)
	}
	ob, _ := pem.Decode(otherPub)
	blk, _ := pem.Decode(priv)
	blk.Headers = map[string]string{PublicKeyHeader: base64.StdEncoding.EncodeToString(ob.Bytes)}
	prefix := filepath.Join(t.TempDir(), "alice")
	if err := os.WriteFile(prefix+".key", pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls int
	_, _, err = WritePair(context.Background(), prefix, PairOptions{Password: pw("correct horse", &calls)})
	if !errors.Is(err, refusal.SignerUntrusted) || kindOf(err) != 0 {
		t.Fatalf("got %v (kind %d), want signer_untrusted", err, kindOf(err))
	}
	if _, err := os.Lstat(prefix + ".pub"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("PREFIX.pub written: %v", err)
	}
}
