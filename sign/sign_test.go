package sign

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"encoding/pem"
	"errors"
	"sync"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// scrypt makes each key generation and load cost ~0.1 s (more under the
// race detector): the tests share one pair.
var (
	pairOnce          sync.Once
	pairPriv, pairPub []byte
)

func pair(t testing.TB) (priv, pub []byte) {
	pairOnce.Do(func() {
		var err error
		if pairPriv, pairPub, err = Generate([]byte("correct horse")); err != nil {
			t.Fatal(err)
		}
	})
	return pairPriv, pairPub
}

func TestRoundTrip(t *testing.T) {
	priv, pub := pair(t)
	blk, _ := pem.Decode(priv)
	if blk == nil || blk.Type != PrivateKeyPEMType {
		t.Fatalf("private PEM type: %v", blk)
	}
	// The format go-securesystemslib's encrypted package writes, which
	// cosign reads: scrypt and NaCl secretbox named in a JSON envelope.
	var env struct {
		KDF    struct{ Name string } `json:"kdf"`
		Cipher struct{ Name string } `json:"cipher"`
	}
	if err := json.Unmarshal(blk.Bytes, &env); err != nil || env.KDF.Name != "scrypt" || env.Cipher.Name != "nacl/secretbox" {
		t.Fatalf("envelope %+v %v", env, err)
	}
	k, err := LoadPrivateKey(priv, []byte("correct horse"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := pem.Decode(pub)
	if want := sha256.Sum256(pb.Bytes); p.Digest().Hex() != string(hexOf(want[:])) || k.Public().Digest() != p.Digest() {
		t.Fatalf("digest %s", p.Digest())
	}
	if string(p.PEM()) != string(pub) {
		t.Fatalf("PEM does not round-trip")
	}
	sig, err := k.Sign([]byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify([]byte("payload"), sig); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name         string
		payload, sig []byte
	}{
		{"other payload", []byte("payloae"), sig},
		{"flipped byte", []byte("payload"), append(append([]byte(nil), sig[:len(sig)-1]...), sig[len(sig)-1]^1)},
		{"empty", []byte("payload"), nil},
		{"p1363 form", []byte("payload"), make([]byte, 64)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := p.Verify(c.payload, c.sig); !errors.Is(err, refusal.SignatureInvalid) {
				t.Fatalf("got %v", err)
			}
		})
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte("payload"))
	sig2, _ := ecdsa.SignASN1(rand.Reader, other, h[:])
	if err := p.Verify([]byte("payload"), sig2); !errors.Is(err, refusal.SignatureInvalid) {
		t.Fatalf("other key's signature: %v", err)
	}
}

func hexOf(b []byte) []byte {
	const h = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, h[c>>4], h[c&15])
	}
	return out
}

func TestLoadPrivateKeyRefuses(t *testing.T) {
	priv, pub := pair(t)
	if _, _, err := Generate(nil); err == nil {
		t.Fatal("empty password accepted")
	}
	for _, c := range []struct {
		name   string
		pem    []byte
		passwd string
	}{
		{"wrong password", priv, "correct hors"},
		{"no password", priv, ""},
		{"public key", pub, "correct horse"},
		{"garbage", []byte("nope"), "pw"},
		{"unencrypted", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), "pw"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := LoadPrivateKey(c.pem, []byte(c.passwd)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestParsePublicKeyRefuses(t *testing.T) {
	_, pub := pair(t)
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"trailing", append(append([]byte(nil), pub...), "x"...)},
		{"private type", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})},
		{"bad der", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2}})},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParsePublicKey(c.in); !errors.Is(err, refusal.SignerUntrusted) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func FuzzParsePublicKey(f *testing.F) {
	_, pub := pair(f)
	f.Add(pub)
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nAA==\n-----END PUBLIC KEY-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePublicKey(b)
		if err != nil {
			if refusal.CodeOf(err) != refusal.SignerUntrusted {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		q, err := ParsePublicKey(p.PEM())
		if err != nil || q.Digest() != p.Digest() {
			t.Fatalf("does not round-trip: %v", err)
		}
		_ = p.Verify([]byte("x"), b)
	})
}
