// Package digest owns cruxprov's identities (DESIGN §5): the sha256 Digest
// value type and the typed digests (implementation, resolution, local
// materialization, interface), each the sha256 of the canonical JSON of a
// typed object.
//
// It does not own RFC 8785 itself (package canonical) or the tree digest
// of a directory (package treehash), decide what is hashed where (callers
// build the typed objects), read configuration, or print.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Digest is a validated "sha256:<64 lowercase hex>" value. The zero value is
// the empty digest; IsZero reports it. Digests round-trip through text and
// JSON and are comparable with ==.
type Digest struct{ hex string }

// Prefix is the algorithm prefix of every Digest.
const Prefix = "sha256:"

// ParseError says why a string is not a Digest.
type ParseError struct {
	Input  string
	Reason string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("invalid digest %q: %s", e.Input, e.Reason)
}

// Parse validates s as "sha256:<64 lowercase hex>".
func Parse(s string) (Digest, error) {
	if !strings.HasPrefix(s, Prefix) {
		return Digest{}, &ParseError{s, "want prefix sha256:"}
	}
	return ParseHex(s[len(Prefix):])
}

// ParseHex validates h as 64 lowercase hex digits.
func ParseHex(h string) (Digest, error) {
	if len(h) != 64 {
		return Digest{}, &ParseError{h, "want 64 hex digits"}
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return Digest{}, &ParseError{h, "want lowercase hex"}
		}
	}
	return Digest{hex: h}, nil
}

// Sum returns the Digest of b.
func Sum(b []byte) Digest {
	s := sha256.Sum256(b)
	return FromBytes(s[:])
}

// FromBytes makes a Digest from a 32-byte sha256 sum (as hash.Hash.Sum returns).
func FromBytes(sum []byte) Digest {
	if len(sum) != sha256.Size {
		panic("digest.FromBytes: not a sha256 sum")
	}
	return Digest{hex: hex.EncodeToString(sum)}
}

// Hex returns the 64 hex digits, or "" for the zero Digest.
func (d Digest) Hex() string { return d.hex }

// IsZero reports whether d is the zero Digest.
func (d Digest) IsZero() bool { return d.hex == "" }

// String returns "sha256:<hex>", or "" for the zero Digest.
func (d Digest) String() string {
	if d.hex == "" {
		return ""
	}
	return Prefix + d.hex
}

// MarshalText implements encoding.TextMarshaler.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; it validates.
func (d *Digest) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

var _ json.Marshaler = Digest{}

// MarshalJSON encodes the zero Digest as null and others as a string.
func (d Digest) MarshalJSON() ([]byte, error) {
	if d.hex == "" {
		return []byte("null"), nil
	}
	return []byte(`"` + d.String() + `"`), nil
}

// UnmarshalJSON accepts null (the zero Digest) or a valid digest string.
func (d *Digest) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = Digest{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &ParseError{string(b), "not a JSON string"}
	}
	return d.UnmarshalText([]byte(s))
}
