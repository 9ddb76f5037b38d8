package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/cruxible/cruxprov/internal/strictjson"
	"github.com/cruxible/cruxprov/refusal"
)

// An image's documents are read with each key once (internal/strictjson):
// a manifest, an index or a config with a key twice in one object, or
// two cases of one field's key ("layers" and "Layers"), is decoded by
// encoding/json (and go-containerregistry) as its last, while another
// reader of the same bytes (a reviewer's tool, a runtime keeping the
// first) may read the other; the digest pins the bytes, not what they
// say. So are the cosign documents Verify decodes: the .sig and .att
// manifests, a simple-signing payload, a DSSE envelope, its in-toto
// statement and the statement's predicate. CheckKeys scans the bytes
// before they are decoded (microseconds a KiB).

// manifestDoc is every member a manifest or an index is decoded by: the
// media-type probe's, v1.Manifest's and v1.IndexManifest's.
type manifestDoc struct {
	v1.Manifest
	Manifests []v1.Descriptor `json:"manifests"`
}

var (
	manifestDocType   = reflect.TypeFor[manifestDoc]()
	indexJSONType     = reflect.TypeFor[v1.IndexManifest]()
	configType        = reflect.TypeFor[v1.ConfigFile]()
	simpleSigningType = reflect.TypeFor[payload.SimpleContainerImage]()
	envelopeType      = reflect.TypeFor[Envelope]()
	statementType     = reflect.TypeFor[Statement]()
	provenanceType    = reflect.TypeFor[Provenance]()
	bomType           = reflect.TypeFor[BOM]()
)

// keyError is a document refused for its keys: what names it ("the
// manifest sha256:…"), err is strictjson's (a *strictjson.KeyError, or
// strictjson.ErrTooDeep), at is prepended to the place it names (a
// predicate's, "predicate", checked apart from its statement). pinned
// is a manifest, index or config of the image (imageDocKeys), which its
// digest names: no copy of it says one thing.
type keyError struct {
	what   string
	at     string
	err    error
	pinned bool
}

func (e *keyError) Error() string {
	var ke *strictjson.KeyError
	if !errors.As(e.err, &ke) {
		return e.what + " is " + e.err.Error() // strictjson.ErrTooDeep
	}
	where := ""
	if at := strings.TrimPrefix(e.at+ke.At, "."); at != "" {
		where = " in its object at " + at
	}
	if ke.Field == "" {
		return fmt.Sprintf("%s has the key %q twice%s: one reader takes the first, another the last", e.what, ke.Key, where)
	}
	return fmt.Sprintf("%s has the keys %q and %q%s, which Go's decoder reads as one field %q, the last, and another reader as two", e.what, ke.First, ke.Key, where, ke.Field)
}

func (e *keyError) Unwrap() error { return e.err }

// checkKeys is nil, or the *keyError of the document b, named what,
// decoded as t.
func checkKeys(b []byte, t reflect.Type, what string) error {
	return checkKeysAt(b, t, what, "")
}

func checkKeysAt(b []byte, t reflect.Type, what, at string) error {
	if err := strictjson.CheckKeys(b, t); err != nil {
		return &keyError{what: what, at: at, err: err}
	}
	return nil
}

// imageDocKeys is checkKeys for a manifest, an index or a config of the
// image (or a build's base): image_digest_mismatch, the digest pinning
// bytes that do not say one thing. Its detail says what is wrong alone:
// Verify's notAsBuilt and a build's notAsPinned say what to do.
func imageDocKeys(b []byte, t reflect.Type, what string) error {
	if err := strictjson.CheckKeys(b, t); err != nil {
		ke := &keyError{what: what, err: err, pinned: true}
		return refusal.Wrap(refusal.ImageDigestMismatch, ke, "%s", ke)
	}
	return nil
}

// pinnedKeys reports whether err is imageDocKeys's.
func pinnedKeys(err error) bool {
	var ke *keyError
	return errors.As(err, &ke) && ke.pinned
}

// ambiguousImage is what to do about an image whose manifest, index or
// config is refused for its keys (imageDocKeys): its digest names those
// bytes, so nothing but another image helps.
const ambiguousImage = "cruxprov writes each key once and reads no image document that two readers could read two ways: the digest names these very bytes, so this is no image a cruxprov build wrote; treat it as suspect, build it again and name the new image by its digest"

// layoutIndexError is a layout's index.json that cannot be read as one
// OCI image index: a key twice (a *keyError), or no index at all. No
// digest names it: it is damage to the layout, or a change since, which
// a read of the layout's tags (Verify) and a write that would rewrite it
// (writeLayout) refuse alike, image_digest_mismatch, each saying what
// to do about the file.
type layoutIndexError struct {
	file string
	err  error
}

func (e *layoutIndexError) Error() string {
	if errors.As(e.err, new(*keyError)) {
		return e.err.Error()
	}
	return e.file + " is not an OCI image index: " + e.err.Error()
}

func (e *layoutIndexError) Unwrap() error { return e.err }

// decodeLayoutIndex decodes b, the index.json file of a layout, into ix
// (what it does not say keeps ix's value), each key once: a
// *layoutIndexError where it cannot.
func decodeLayoutIndex(file string, b []byte, ix *v1.IndexManifest) error {
	if err := checkKeys(b, indexJSONType, file); err != nil {
		return &layoutIndexError{file: file, err: err}
	}
	if err := json.Unmarshal(b, ix); err != nil {
		return &layoutIndexError{file: file, err: err}
	}
	return nil
}

// damagedIndex is what to do about a layout's index.json that a read of
// the layout refused (layoutIndexError): a write into the layout
// refuses it too (it would rewrite it keeping one of two readings), so
// building into the layout again, as for a damaged blob, is not enough.
const damagedIndex = "the layout's index.json was changed since the image was written into it, or damaged, and a write into the layout refuses it too: restore it from a copy of the layout, or move it away and write the image into the layout again, by building it again or copying it from its registry"

// ambiguousBase is ambiguousImage for a build's base.
const ambiguousBase = "cruxprov reads no image document that two readers could read two ways: pin another base image, one whose manifests and config say each key once"

// cosignDocKeys is checkKeys for a cosign document: image_signature_invalid,
// with todo, what to do, after it.
func cosignDocKeys(b []byte, t reflect.Type, what, at, todo string) error {
	if err := checkKeysAt(b, t, what, at); err != nil {
		return refusal.Wrap(refusal.ImageSignatureInvalid, err, "%s (%s)", err, todo)
	}
	return nil
}

// What to do about a cosign document refused for its keys: one no key
// signed (a .sig or .att manifest, a DSSE envelope) is the tag's to
// replace; one a trusted key signed (a simple-signing payload, an in-toto
// statement) is its builder's doing.
const (
	unsignedKeysTodo = "cruxprov and cosign write each key once: treat it as tampered with; copy the image's .sig and .att tags again from where it was built, or build it again signed with a trusted builder key"
	signedKeysTodo   = "a trusted builder key signed a document that two readers read two ways, which neither cruxprov nor cosign writes: find out how that builder came to sign it, and build the image again signed with a trusted builder key"
)
