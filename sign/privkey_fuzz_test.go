package sign

import (
	"testing"
)

// FuzzLoadPrivateKey: whatever file the operator names as a signing key,
// LoadPrivateKey decrypts a P-256 key or fails, without panicking (a PEM
// of another type, a damaged box, KDF parameters chosen to cost hours, a
// key of another curve); a key it loads signs what its public half
// verifies.
func FuzzLoadPrivateKey(f *testing.F) {
	priv, _ := pair(f)
	f.Add(priv, []byte("correct horse"))
	f.Add(priv, []byte("wrong"))
	f.Add(priv, []byte{})
	f.Add([]byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\neyJrZGYiOnsibmFtZSI6InNjcnlwdCIsInBhcmFtcyI6eyJOIjoxMDczNzQxODI0LCJyIjo4LCJwIjoxfSwic2FsdCI6IkFBPT0ifX0=\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"), []byte("x"))
	f.Add([]byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAA==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"), []byte("x"))
	f.Fuzz(func(t *testing.T, b, password []byte) {
		k, err := LoadPrivateKey(b, password)
		if err != nil {
			return
		}
		sig, err := k.Sign([]byte("payload"))
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Public().Verify([]byte("payload"), sig); err != nil {
			t.Fatalf("a loaded key's signature does not verify: %v", err)
		}
	})
}
