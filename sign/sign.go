// Package sign owns cruxprov's signing keys and signatures (DESIGN §8):
// ECDSA P-256 key pairs whose private half is PEM-encoded as cosign writes
// it ("ENCRYPTED SIGSTORE PRIVATE KEY": PKCS#8 DER sealed with scrypt and
// NaCl secretbox, as github.com/secure-systems-lab/go-securesystemslib's
// encrypted package does), public keys as PEM "PUBLIC KEY" (PKIX), and
// signatures made and checked with github.com/sigstore/sigstore.
//
// A signature is the ASN.1 DER ECDSA signature over the SHA-256 of the
// payload, the form cosign writes; callers store it base64-encoded. A
// public key's Digest is the sha256 of its DER SubjectPublicKeyInfo, the
// identity governance counts signers by.
//
// A private key file Generate writes carries its public key too, in the
// PEM header PublicKeyHeader of its block (base64 of the DER
// SubjectPublicKeyInfo): CarriedPublicKey reads it without the password,
// so that a caller can tell which key a file is before asking for it.
// NaCl secretbox takes no additional data, and cosign reads the box as
// it is (it ignores PEM headers), so the header is bound to the key by a
// check, not by the box: LoadPrivateKey refuses a file whose header is
// not the public key of the key sealed in it. Files written without the
// header (by an earlier cruxprov, or cosign) load as before.
//
// WritePair writes a key pair at a prefix the caller names, crash-safe:
// each file whole or missing, never over a key, an interrupted pair
// finished by the same call run again.
//
// This package does not know what is signed (package registry builds the
// approval payload), where keys are kept, or how a password is obtained: the
// password is a []byte the caller reads (cmd/ reads CRUXPROV_KEY_PASSWORD
// or prompts on a TTY). It never prints and never reads the environment.
package sign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// PrivateKeyPEMType is the PEM block type of a generated private key, the
// one cosign writes and reads.
const PrivateKeyPEMType = "ENCRYPTED SIGSTORE PRIVATE KEY"

// PublicKeyHeader is the PEM header of a private key file in which
// Generate writes the key's public half: the base64 (standard, padded)
// of its DER SubjectPublicKeyInfo, the bytes its Digest is the sha256 of.
const PublicKeyHeader = "Cruxprov-Public-Key"

// maxPEM bounds a key file's size: a P-256 key is a few hundred bytes.
const maxPEM = 64 << 10

// Generate makes a new ECDSA P-256 key pair and returns its private key as
// PEM "ENCRYPTED SIGSTORE PRIVATE KEY" sealed with password, and its
// public key as PEM "PUBLIC KEY". The private key's PEM block carries the
// public key too, in its header PublicKeyHeader. An empty password is
// refused: an unencrypted private key is not written.
func Generate(password []byte) (privPEM, pubPEM []byte, err error) {
	if len(password) == 0 {
		return nil, nil, errors.New("an empty password is not allowed: the private key is always encrypted")
	}
	pf := cryptoutils.StaticPasswordFunc(password)
	privPEM, pubPEM, err = cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), pf)
	if err != nil {
		return nil, nil, err
	}
	blk, _ := pem.Decode(privPEM)
	pb, _ := pem.Decode(pubPEM)
	if blk == nil || pb == nil {
		return nil, nil, errors.New("the key pair generated does not decode as PEM")
	}
	blk.Headers = map[string]string{PublicKeyHeader: base64.StdEncoding.EncodeToString(pb.Bytes)}
	return pem.EncodeToMemory(blk), pubPEM, nil
}

// CarriedPublicKey returns the public key the private key file pemBytes
// carries in its header PublicKeyHeader (Generate writes it), read
// without the password; nil, and no error, for a file without that
// header (an earlier cruxprov's, cosign's) or one that is not a PEM
// private key. It is what the file says, checked against the key sealed
// in it only when LoadPrivateKey opens it. A header that is not an ECDSA
// P-256 public key is refused (signer_untrusted).
func CarriedPublicKey(pemBytes []byte) (*PublicKey, error) {
	if len(pemBytes) > maxPEM {
		return nil, nil
	}
	blk, _ := pem.Decode(pemBytes)
	if blk == nil || !strings.HasSuffix(blk.Type, "PRIVATE KEY") {
		return nil, nil
	}
	return carriedPublicKey(blk)
}

func carriedPublicKey(blk *pem.Block) (*PublicKey, error) {
	h, ok := blk.Headers[PublicKeyHeader]
	if !ok {
		return nil, nil
	}
	der, err := base64.StdEncoding.Strict().DecodeString(h)
	if err != nil {
		return nil, refusal.Wrap(refusal.SignerUntrusted, err, "the private key file's %s header is not base64", PublicKeyHeader)
	}
	p, err := parsePKIX(der)
	if err != nil {
		return nil, refusal.Wrap(refusal.SignerUntrusted, err, "the private key file's %s header is not an ECDSA P-256 public key", PublicKeyHeader)
	}
	return p, nil
}

// PublicKey is a parsed ECDSA P-256 public key.
type PublicKey struct {
	key    *ecdsa.PublicKey
	der    []byte
	digest digest.Digest
	v      signature.Verifier
}

// ParsePublicKey reads one PEM "PUBLIC KEY" block holding an ECDSA P-256
// key. Anything else (another curve, RSA, trailing data, a private key)
// is refused with signer_untrusted: it cannot be a cruxprov signer.
func ParsePublicKey(pemBytes []byte) (*PublicKey, error) {
	if len(pemBytes) > maxPEM {
		return nil, refusal.New(refusal.SignerUntrusted, "public key file larger than %d bytes", maxPEM)
	}
	blk, rest := pem.Decode(pemBytes)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, refusal.New(refusal.SignerUntrusted, "not a PEM \"PUBLIC KEY\" block")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, refusal.New(refusal.SignerUntrusted, "data after the PEM \"PUBLIC KEY\" block")
	}
	return parsePKIX(blk.Bytes)
}

// parsePKIX parses a DER SubjectPublicKeyInfo holding an ECDSA P-256 key.
func parsePKIX(der []byte) (*PublicKey, error) {
	pk, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, refusal.Wrap(refusal.SignerUntrusted, err, "public key does not parse")
	}
	ek, ok := pk.(*ecdsa.PublicKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, refusal.New(refusal.SignerUntrusted, "public key is not ECDSA P-256")
	}
	return newPublicKey(ek)
}

func newPublicKey(ek *ecdsa.PublicKey) (*PublicKey, error) {
	der, err := x509.MarshalPKIXPublicKey(ek)
	if err != nil {
		return nil, refusal.Wrap(refusal.SignerUntrusted, err, "public key does not marshal")
	}
	v, err := signature.LoadVerifier(ek, crypto.SHA256)
	if err != nil {
		return nil, refusal.Wrap(refusal.SignerUntrusted, err, "public key unusable")
	}
	return &PublicKey{key: ek, der: der, digest: digest.Sum(der), v: v}, nil
}

// Digest is the sha256 of the key's DER SubjectPublicKeyInfo.
func (p *PublicKey) Digest() digest.Digest { return p.digest }

// PEM returns the key as one PEM "PUBLIC KEY" block.
func (p *PublicKey) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: p.der})
}

// Verify checks sig (ASN.1 DER ECDSA over SHA-256) over payload. A
// signature that does not verify is refused with signature_invalid.
func (p *PublicKey) Verify(payload, sig []byte) error {
	if len(sig) == 0 || len(sig) > 80 || sig[0] != 0x30 {
		// P-256 DER signatures are at most 72 bytes; sigstore would also
		// accept the IEEE P1363 form, which cruxprov never writes.
		return refusal.New(refusal.SignatureInvalid, "signature is not an ASN.1 DER ECDSA signature")
	}
	if err := p.v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(payload)); err != nil {
		return refusal.Wrap(refusal.SignatureInvalid, err, "signature by key %s does not verify", p.digest)
	}
	return nil
}

// PrivateKey is a loaded ECDSA P-256 private key that signs.
type PrivateKey struct {
	sv  *signature.ECDSASignerVerifier
	pub *PublicKey
}

// ErrWrongPassword is in the chain of LoadPrivateKey's error when the
// password does not decrypt the key.
var ErrWrongPassword = errors.New("cannot decrypt the private key (wrong password?)")

// LoadPrivateKey decrypts a PEM private key written by Generate (or by
// `cosign generate-key-pair`) with password. A wrong password or a key
// that is not ECDSA P-256 is an error; an unencrypted key is refused. A
// file whose PublicKeyHeader is not the public key of the key sealed in
// it (the header edited, or copied from another key's file) is refused
// signer_untrusted: a caller that took the header for the key's identity
// before the password (CarriedPublicKey) was told another key's.
func LoadPrivateKey(pemBytes, password []byte) (*PrivateKey, error) {
	if len(pemBytes) > maxPEM {
		return nil, fmt.Errorf("private key file larger than %d bytes", maxPEM)
	}
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		return nil, errors.New("not a PEM private key")
	}
	if blk.Type != PrivateKeyPEMType && blk.Type != "ENCRYPTED COSIGN PRIVATE KEY" {
		return nil, fmt.Errorf("private key PEM type %q: want %q (a key pair cruxprov or cosign generates)", blk.Type, PrivateKeyPEMType)
	}
	carried, err := carriedPublicKey(blk)
	if err != nil {
		return nil, err
	}
	if len(password) == 0 {
		return nil, errors.New("the private key is encrypted and no password was given")
	}
	k, err := cryptoutils.UnmarshalPEMToPrivateKey(pemBytes, cryptoutils.StaticPasswordFunc(password))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWrongPassword, err)
	}
	ek, _ := k.(*ecdsa.PrivateKey)
	pk, err := FromECDSA(ek)
	if err != nil {
		return nil, err
	}
	if carried != nil && carried.Digest() != pk.Public().Digest() {
		return nil, refusal.New(refusal.SignerUntrusted, "the private key file names public key %s in its %s header, but the key sealed in it is %s: the file was altered; restore it from a copy (or delete that header line, and the key is read as one written without it)", carried.Digest(), PublicKeyHeader, pk.Public().Digest())
	}
	return pk, nil
}

// Public returns the key's public half.
func (k *PrivateKey) Public() *PublicKey { return k.pub }

// Sign returns the ASN.1 DER ECDSA signature over the SHA-256 of payload.
func (k *PrivateKey) Sign(payload []byte) ([]byte, error) {
	return k.sv.SignMessage(bytes.NewReader(payload))
}

// FromECDSA wraps an in-memory ECDSA P-256 key (one held by a test, or
// decrypted by other means) as a PrivateKey.
func FromECDSA(ek *ecdsa.PrivateKey) (*PrivateKey, error) {
	if ek == nil || ek.Curve != elliptic.P256() {
		return nil, errors.New("private key is not ECDSA P-256")
	}
	sv, err := signature.LoadECDSASignerVerifier(ek, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	pub, err := newPublicKey(&ek.PublicKey)
	if err != nil {
		return nil, err
	}
	return &PrivateKey{sv: sv, pub: pub}, nil
}
