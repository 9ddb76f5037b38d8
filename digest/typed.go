package digest

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/canonical"
)

// The type fields of the typed digests (DESIGN §5), their domain separation.
const (
	TypeImplementation       = "cruxible.implementation/v1"
	TypeResolution           = "cruxible.resolution/v1"
	TypeLocalMaterialization = "cruxible.materialization.local/v2"
	// TypeLocalMaterializationV1 is the superseded local digest (no
	// bytecode field), still recomputed to verify seals written before v2.
	TypeLocalMaterializationV1 = "cruxible.materialization.local/v1"
)

// BytecodeUncheckedHash is the one bytecode mode of a local env compiled
// before sealing (DESIGN §5, §7): py_compile's unchecked-hash pycs.
const BytecodeUncheckedHash = "unchecked-hash"

// FieldError says why an input of a typed digest is unusable: which digest
// and field, and why. Nothing is hashed when one is returned.
type FieldError struct {
	Digest string // the type, e.g. "cruxible.resolution/v1"
	Field  string // e.g. "packages[2].sha256"
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Digest, e.Field, e.Reason)
}

// ResolvedWheel is one package of a resolution (DESIGN §4), the one model
// of a resolved wheel that the lock, the fetcher, the seal and the digests
// share: the PEP 503 normalized name, the PEP 440 normalized version, the
// wheel's file name (percent-decoded), where the lock says it was (URL, a
// hint: the pinned index decides), its size (0 when unknown) and its
// sha256. The resolution digest hashes name, version, filename and sha256
// only: URLs and sizes are deliberately not identity.
type ResolvedWheel struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Filename string `json:"filename"`
	URL      string `json:"url,omitempty"`
	Size     int64  `json:"size,omitempty"`
	SHA256   Digest `json:"sha256"`
}

// Interpreter is the identity of a Python interpreter, the one model of it
// that the local digest hashes and every other record of an interpreter
// builds on: the real path of its executable and its full version (e.g.
// "3.11.7"). What else is known of one is another concept with its own
// type: what running it reports (materialize.Probe, which embeds this),
// and the identity of its files a seal records (seal.InterpreterIdentity,
// whose Interpreter method gives this back).
type Interpreter struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// Root is the provider's root distribution in a local materialization
// (the one model: the seal records it as is).
type Root struct {
	Name    string `json:"name"` // PEP 503 normalized
	Version string `json:"version"`
	SHA256  Digest `json:"sha256"` // of the root wheel
}

type implementationDoc struct {
	Type      string `json:"type"`
	Interface struct {
		ID     string `json:"id"`
		Digest Digest `json:"digest"`
	} `json:"interface"`
	Entrypoint struct {
		Name   string `json:"name"`
		Object string `json:"object"`
	} `json:"entrypoint"`
	Distribution Digest `json:"distribution"`
}

type resolutionPackage struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Filename string `json:"filename"`
	SHA256   Digest `json:"sha256"`
}

type resolutionDoc struct {
	Type     string              `json:"type"`
	Packages []resolutionPackage `json:"packages"`
}

type localRoot struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	SHA256  Digest `json:"sha256"`
}

type localMaterializationDoc struct {
	Type        string      `json:"type"`
	Platform    string      `json:"platform"`
	Interpreter Interpreter `json:"interpreter"`
	Resolution  Digest      `json:"resolution"`
	Root        *localRoot  `json:"root"`
}

// localMaterializationV2Doc is localMaterializationDoc with bytecode
// always written, null included.
type localMaterializationV2Doc struct {
	localMaterializationDoc
	Bytecode *string `json:"bytecode"`
}

// ImplementationDigest is the track-record key of one entrypoint (DESIGN §5),
// the sha256 of the canonical JSON of
//
//	{"type":"cruxible.implementation/v1",
//	 "interface":{"id":interfaceID,"digest":interfaceDigest},
//	 "entrypoint":{"name":entrypoint,"object":object},
//	 "distribution":distribution}
//
// where object is the "module:attr" reference and distribution the root
// wheel's sha256. Every argument must be non-empty and valid UTF-8
// (a *FieldError otherwise); a string I-JSON cannot carry (a noncharacter)
// is a *canonical.Error.
func ImplementationDigest(interfaceID string, interfaceDigest Digest, entrypoint, object string, distribution Digest) (Digest, error) {
	b, err := implementationJSON(interfaceID, interfaceDigest, entrypoint, object, distribution)
	if err != nil {
		return Digest{}, err
	}
	return Sum(b), nil
}

func implementationJSON(interfaceID string, interfaceDigest Digest, entrypoint, object string, distribution Digest) ([]byte, error) {
	v := fieldCheck{typ: TypeImplementation}
	v.text("interface.id", interfaceID)
	v.digest("interface.digest", interfaceDigest)
	v.text("entrypoint.name", entrypoint)
	v.text("entrypoint.object", object)
	v.digest("distribution", distribution)
	if v.err != nil {
		return nil, v.err
	}
	var d implementationDoc
	d.Type = TypeImplementation
	d.Interface.ID = interfaceID
	d.Interface.Digest = interfaceDigest
	d.Entrypoint.Name = entrypoint
	d.Entrypoint.Object = object
	d.Distribution = distribution
	return canonical.Marshal(d)
}

// ResolutionDigest identifies a Resolution (DESIGN §5), the sha256 of the
// canonical JSON of
//
//	{"type":"cruxible.resolution/v1","packages":[
//	  {"name":N,"version":V,"filename":F,"sha256":"sha256:…"}, …]}
//
// with the packages sorted by name (byte order; ResolutionDigest sorts a
// copy itself). Every field must be non-empty, names PEP 503 normalized and
// unique; an empty resolution is allowed ("packages":[]).
func ResolutionDigest(pkgs []ResolvedWheel) (Digest, error) {
	b, err := resolutionJSON(pkgs)
	if err != nil {
		return Digest{}, err
	}
	return Sum(b), nil
}

func resolutionJSON(pkgs []ResolvedWheel) ([]byte, error) {
	v := fieldCheck{typ: TypeResolution}
	for i, p := range pkgs {
		f := fmt.Sprintf("packages[%d].", i)
		v.name(f+"name", p.Name)
		v.text(f+"version", p.Version)
		v.text(f+"filename", p.Filename)
		v.digest(f+"sha256", p.SHA256)
	}
	if v.err != nil {
		return nil, v.err
	}
	sorted := slices.Clone(pkgs)
	slices.SortFunc(sorted, func(a, b ResolvedWheel) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Filename, b.Filename)
	})
	d := resolutionDoc{Type: TypeResolution, Packages: make([]resolutionPackage, 0, len(sorted))}
	for i, p := range sorted {
		if i > 0 && sorted[i-1].Name == p.Name {
			return nil, &FieldError{TypeResolution, "packages", fmt.Sprintf("package %q appears twice; a resolution has one wheel per package", p.Name)}
		}
		d.Packages = append(d.Packages, resolutionPackage{Name: p.Name, Version: p.Version, Filename: p.Filename, SHA256: p.SHA256})
	}
	return canonical.Marshal(d)
}

// LocalMaterializationDigest is the environment pin of the local backend
// (DESIGN §5), the sha256 of the canonical JSON of
//
//	{"type":"cruxible.materialization.local/v2","platform":platformID,
//	 "interpreter":{"path":interp.Path,"version":interp.Version},
//	 "resolution":resolution,
//	 "root":{"name":N,"version":V,"sha256":"sha256:…"},
//	 "bytecode":"unchecked-hash"}
//
// with "root":null when root is nil (an env made from a bare lock) and
// "bytecode":null when bytecode is "" (an env without bytecode, so that an
// env with and one without bytecode are two envs). bytecode is "" or
// BytecodeUncheckedHash. interp.Path must be an absolute, clean path (the
// caller resolves it to the real path); every other field must be
// non-empty.
func LocalMaterializationDigest(platformID string, interp Interpreter, resolution Digest, root *Root, bytecode string) (Digest, error) {
	b, err := localMaterializationJSON(platformID, interp, resolution, root, &bytecode)
	if err != nil {
		return Digest{}, err
	}
	return Sum(b), nil
}

// LocalMaterializationDigestV1 is the superseded v1 local digest: the v2
// document without "bytecode", typed "cruxible.materialization.local/v1".
// New envs never use it; verify recomputes it for seals written before v2
// (DESIGN §14: a seal from an older tool stays valid while its format is
// known).
func LocalMaterializationDigestV1(platformID string, interp Interpreter, resolution Digest, root *Root) (Digest, error) {
	b, err := localMaterializationJSON(platformID, interp, resolution, root, nil)
	if err != nil {
		return Digest{}, err
	}
	return Sum(b), nil
}

// localMaterializationJSON is the v2 document, or the v1 one when
// bytecode is nil.
func localMaterializationJSON(platformID string, interp Interpreter, resolution Digest, root *Root, bytecode *string) ([]byte, error) {
	typ := TypeLocalMaterialization
	if bytecode == nil {
		typ = TypeLocalMaterializationV1
	}
	v := fieldCheck{typ: typ}
	v.text("platform", platformID)
	v.text("interpreter.path", interp.Path)
	if v.err == nil && (!path.IsAbs(interp.Path) || path.Clean(interp.Path) != interp.Path) {
		v.err = &FieldError{v.typ, "interpreter.path", fmt.Sprintf("%q is not an absolute clean path", interp.Path)}
	}
	v.text("interpreter.version", interp.Version)
	v.digest("resolution", resolution)
	if root != nil {
		v.name("root.name", root.Name)
		v.text("root.version", root.Version)
		v.digest("root.sha256", root.SHA256)
	}
	if v.err == nil && bytecode != nil && *bytecode != "" && *bytecode != BytecodeUncheckedHash {
		v.err = &FieldError{v.typ, "bytecode", fmt.Sprintf("%q is not %q or empty (no bytecode)", *bytecode, BytecodeUncheckedHash)}
	}
	if v.err != nil {
		return nil, v.err
	}
	d := localMaterializationDoc{Type: typ, Platform: platformID, Interpreter: interp, Resolution: resolution}
	if root != nil {
		d.Root = &localRoot{Name: root.Name, Version: root.Version, SHA256: root.SHA256}
	}
	if bytecode == nil {
		return canonical.Marshal(d)
	}
	v2 := localMaterializationV2Doc{localMaterializationDoc: d}
	if *bytecode != "" {
		v2.Bytecode = bytecode
	}
	return canonical.Marshal(v2)
}

// InterfaceDigest is the sha256 of the RFC 8785 form of an interface's
// schema document itself (no type wrapper). A document without a canonical
// form is refused with a *canonical.Error.
func InterfaceDigest(schema []byte) (Digest, error) {
	b, err := canonical.Transform(schema)
	if err != nil {
		return Digest{}, err
	}
	return Sum(b), nil
}

// fieldCheck records the first unusable field of a typed digest's input.
type fieldCheck struct {
	typ string
	err *FieldError
}

func (c *fieldCheck) set(field, reason string) {
	if c.err == nil {
		c.err = &FieldError{c.typ, field, reason}
	}
}

// text checks a non-empty string that is valid UTF-8 (encoding/json would
// silently replace invalid bytes with U+FFFD, so two inputs could share a
// digest).
func (c *fieldCheck) text(field, s string) {
	switch {
	case s == "":
		c.set(field, "empty")
	case !utf8.ValidString(s):
		c.set(field, "not valid UTF-8")
	}
}

func (c *fieldCheck) digest(field string, d Digest) {
	if d.IsZero() {
		c.set(field, "zero digest")
	}
}

// name checks a PEP 503 normalized project name: lowercase ASCII letters
// and digits, runs separated by single '-'.
func (c *fieldCheck) name(field, s string) {
	if s == "" {
		c.set(field, "empty")
		return
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case 'a' <= ch && ch <= 'z', '0' <= ch && ch <= '9':
		case ch == '-' && i > 0 && i < len(s)-1 && s[i-1] != '-':
		default:
			c.set(field, fmt.Sprintf("%q is not a PEP 503 normalized name", s))
			return
		}
	}
}
