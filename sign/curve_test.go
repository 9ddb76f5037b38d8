package sign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/cruxible/cruxprov/refusal"
)

// TestParsePublicKeyOnlyP256: DESIGN §8 keys are ECDSA P-256. A public
// key of another curve, RSA or Ed25519 — a well-formed PEM "PUBLIC KEY"
// that key trust would otherwise take — is refused signer_untrusted,
// saying it is not ECDSA P-256; a P-256 key is taken.
func TestParsePublicKeyOnlyP256(t *testing.T) {
	pemOf := func(pub crypto.PublicKey) []byte {
		t.Helper()
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p521, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, pub := range map[string]crypto.PublicKey{"ECDSA P-384": &p384.PublicKey, "ECDSA P-521": &p521.PublicKey, "RSA 2048": &rk.PublicKey, "Ed25519": edPub} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePublicKey(pemOf(pub))
			if !errors.Is(err, refusal.SignerUntrusted) || refusal.CodeOf(err) != refusal.SignerUntrusted {
				t.Fatalf("got %v, want signer_untrusted", err)
			}
		})
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePublicKey(pemOf(&p256.PublicKey)); err != nil {
		t.Fatalf("a P-256 key: %v", err)
	}
}

// TestLoadPrivateKeyOnlyP256: a cosign-format encrypted private key of
// another curve or RSA (cosign generates both) opens with its password
// and is then refused, saying it is not ECDSA P-256: no signer is made
// of it.
func TestLoadPrivateKeyOnlyP256(t *testing.T) {
	pw := cryptoutils.StaticPasswordFunc([]byte("pw"))
	for name, gen := range map[string]func() ([]byte, []byte, error){
		"ECDSA P-384": func() ([]byte, []byte, error) { return cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P384(), pw) },
		"RSA 2048":    func() ([]byte, []byte, error) { return cryptoutils.GeneratePEMEncodedRSAKeyPair(2048, pw) },
	} {
		t.Run(name, func(t *testing.T) {
			priv, _, err := gen()
			if err != nil {
				t.Fatal(err)
			}
			k, err := LoadPrivateKey(priv, []byte("pw"))
			if err == nil || k != nil || !strings.Contains(err.Error(), "not ECDSA P-256") {
				t.Fatalf("LoadPrivateKey = %v, %v; want refused: not ECDSA P-256", k, err)
			}
		})
	}
}
