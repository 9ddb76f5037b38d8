package image

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/sign"
)

// The media types, annotation keys and predicate types cosign reads.
const (
	// SimpleSigningMediaType is the layer media type of a signature.
	SimpleSigningMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// DSSEMediaType is the layer media type of an attestation.
	DSSEMediaType types.MediaType = "application/vnd.dsse.envelope.v1+json"
	// SignatureAnnotation holds a signature, base64 ("" on an attestation).
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
	// PredicateTypeAnnotation names an attestation layer's predicate type.
	PredicateTypeAnnotation = "predicateType"
	// InTotoPayloadType is the DSSE payload type of an in-toto statement.
	InTotoPayloadType = "application/vnd.in-toto+json"
	// StatementType is the in-toto Statement v1 type.
	StatementType = "https://in-toto.io/Statement/v1"
	// SLSAProvenanceType is the SLSA v1 provenance predicate type
	// (cosign's --type slsaprovenance1).
	SLSAProvenanceType = "https://slsa.dev/provenance/v1"
	// CycloneDXType is the CycloneDX predicate type (cosign's --type cyclonedx).
	CycloneDXType = "https://cyclonedx.org/bom"
	// BuildType is the buildType of cruxprov's provenance.
	BuildType = "https://cruxible.dev/cruxprov/image-build/v1"
)

// SignatureTag is the tag cosign stores the signature of the manifest d
// under: sha256-<hex>.sig.
func SignatureTag(d v1.Hash) string { return d.Algorithm + "-" + d.Hex + ".sig" }

// AttestationTag is the tag cosign stores the attestations of the
// manifest d under: sha256-<hex>.att.
func AttestationTag(d v1.Hash) string { return d.Algorithm + "-" + d.Hex + ".att" }

// simpleSigning is cosign's payload for the image d of repository ref.
func simpleSigning(ref string, d v1.Hash) ([]byte, error) {
	nd, err := name.NewDigest(ref+"@"+d.String(), name.WeakValidation)
	if err != nil {
		// A layout's name is no registry reference: claim it as given.
		nd, _ = name.NewDigest("cruxprov.invalid/layout@" + d.String())
	}
	return payload.Cosign{Image: nd, ClaimedIdentity: ref}.MarshalJSON()
}

// Envelope is a DSSE envelope.
type Envelope struct {
	PayloadType string        `json:"payloadType"`
	Payload     string        `json:"payload"`
	Signatures  []EnvelopeSig `json:"signatures"`
}

// EnvelopeSig is one signature of an Envelope.
type EnvelopeSig struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// pae is DSSE's pre-authentication encoding, what is actually signed.
func pae(payloadType string, body []byte) []byte {
	return []byte("DSSEv1 " + strconv.Itoa(len(payloadType)) + " " + payloadType + " " + strconv.Itoa(len(body)) + " " + string(body))
}

func envelope(k *sign.PrivateKey, body []byte) ([]byte, error) {
	sig, err := k.Sign(pae(InTotoPayloadType, body))
	if err != nil {
		return nil, err
	}
	return json.Marshal(Envelope{
		PayloadType: InTotoPayloadType,
		Payload:     base64.StdEncoding.EncodeToString(body),
		Signatures:  []EnvelopeSig{{Sig: base64.StdEncoding.EncodeToString(sig)}},
	})
}

// openEnvelope checks env's signature under any of keys and returns its
// payload and the key that signed it.
func openEnvelope(b []byte, keys []*sign.PublicKey) ([]byte, *sign.PublicKey, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, nil, fmt.Errorf("not a DSSE envelope: %w", err)
	}
	if e.PayloadType != InTotoPayloadType {
		return nil, nil, fmt.Errorf("DSSE payload type %q", e.PayloadType)
	}
	body, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		return nil, nil, fmt.Errorf("DSSE payload: %w", err)
	}
	for _, s := range e.Signatures {
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err != nil {
			continue
		}
		for _, k := range keys {
			if k.Verify(pae(e.PayloadType, body), sig) == nil {
				return body, k, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("no signature of the envelope verifies under a trusted key")
}

// Statement is an in-toto Statement v1.
type Statement struct {
	Type          string          `json:"_type"`
	Subject       []Subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// Subject is what a statement is about.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// ResourceDescriptor is SLSA v1's name for an artifact.
type ResourceDescriptor struct {
	Name        string            `json:"name,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Digest      map[string]string `json:"digest,omitempty"`
	Annotations map[string]any    `json:"annotations,omitempty"`
}

// Provenance is the SLSA v1 provenance predicate cruxprov writes.
type Provenance struct {
	BuildDefinition struct {
		BuildType            string               `json:"buildType"`
		ExternalParameters   ExternalParameters   `json:"externalParameters"`
		InternalParameters   InternalParameters   `json:"internalParameters"`
		ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies"`
	} `json:"buildDefinition"`
	RunDetails struct {
		Builder struct {
			ID      string            `json:"id"`
			Version map[string]string `json:"version,omitempty"`
		} `json:"builder"`
	} `json:"runDetails"`
}

// ExternalParameters are the build's inputs as the caller named them.
type ExternalParameters struct {
	Package         seal.Package `json:"package"`
	Platform        string       `json:"platform"`
	Base            string       `json:"base"`
	Python          string       `json:"python"`
	NoCompile       bool         `json:"noCompile"`
	SourceDateEpoch int64        `json:"sourceDateEpoch"`
}

// InternalParameters are what the build derived from its inputs.
type InternalParameters struct {
	Resolution      string `json:"resolution"`
	Materialization string `json:"materialization"`
	Tree            string `json:"tree"`
	EnvPath         string `json:"envPath"`
	// BaseDigest is the base's platform manifest digest.
	BaseDigest string `json:"baseDigest"`
	// Interpreter is the image's; Compiler the host CPython that laid out
	// the venv and compiled its bytecode.
	Interpreter Interpreter              `json:"interpreter"`
	Compiler    seal.InterpreterIdentity `json:"compiler"`
}

func statement(subject string, d v1.Hash, predicateType string, predicate any) ([]byte, error) {
	p, err := json.Marshal(predicate)
	if err != nil {
		return nil, err
	}
	return json.Marshal(Statement{
		Type:          StatementType,
		Subject:       []Subject{{Name: subject, Digest: map[string]string{d.Algorithm: d.Hex}}},
		PredicateType: predicateType,
		Predicate:     p,
	})
}

// sigImage is cosign's signature image: one simple-signing layer whose
// annotation holds the signature.
func sigImage(body, sig []byte) (v1.Image, error) {
	return cosignImage(mutate.Addendum{
		Layer:       static.NewLayer(body, SimpleSigningMediaType),
		Annotations: map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
}

// attImage is cosign's attestation image: one DSSE layer per attestation.
func attImage(envs [][]byte, predicateTypes []string) (v1.Image, error) {
	var adds []mutate.Addendum
	for i, e := range envs {
		adds = append(adds, mutate.Addendum{
			Layer:       static.NewLayer(e, DSSEMediaType),
			Annotations: map[string]string{SignatureAnnotation: "", PredicateTypeAnnotation: predicateTypes[i]},
		})
	}
	return cosignImage(adds...)
}

func cosignImage(adds ...mutate.Addendum) (v1.Image, error) {
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	return mutate.Append(base, adds...)
}

// BOM is the CycloneDX 1.5 document cruxprov writes for an env.
type BOM struct {
	BOMFormat   string         `json:"bomFormat"`
	SpecVersion string         `json:"specVersion"`
	Version     int            `json:"version"`
	Metadata    BOMMetadata    `json:"metadata"`
	Components  []BOMComponent `json:"components"`
}

// BOMMetadata says what the BOM describes and which tool wrote it.
type BOMMetadata struct {
	Tools struct {
		Components []BOMComponent `json:"components"`
	} `json:"tools"`
	Component  *BOMComponent `json:"component,omitempty"`
	Properties []BOMProperty `json:"properties,omitempty"`
}

// BOMComponent is one package (or the tool).
type BOMComponent struct {
	Type       string        `json:"type"`
	BOMRef     string        `json:"bom-ref,omitempty"`
	Name       string        `json:"name"`
	Version    string        `json:"version,omitempty"`
	PURL       string        `json:"purl,omitempty"`
	Hashes     []BOMHash     `json:"hashes,omitempty"`
	Properties []BOMProperty `json:"properties,omitempty"`
}

// BOMHash is a component's hash.
type BOMHash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

// BOMProperty is a name/value pair.
type BOMProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// pypiPURL is p's purl without qualifiers, "pkg:pypi/NAME@VERSION", as
// the SBOM and the provenance's resolved dependencies name a wheel. The
// purl specification's pypi type wants the name lowercase with '-' for
// '_' (PyPI does not tell them apart); a resolution's names are PEP 503
// normal already, which is that and '.' as '-' too.
func pypiPURL(p seal.Package) string {
	n := strings.ReplaceAll(strings.ToLower(p.Name), "_", "-")
	return "pkg:pypi/" + purlEscape(n) + "@" + purlEscape(p.Version)
}

// Runtime is the version of the runtime (cruxible-provider-runtime) among
// the provenance's resolved dependencies (pypiPURL's
// "pkg:pypi/NAME@VERSION"), "" when it names none.
func (p *Provenance) Runtime() string {
	for _, d := range p.BuildDefinition.ResolvedDependencies {
		rest, ok := strings.CutPrefix(d.URI, "pkg:pypi/")
		if !ok {
			continue
		}
		name, version, ok := strings.Cut(rest, "@")
		if !ok {
			continue
		}
		n, err1 := url.PathUnescape(name)
		v, err2 := url.PathUnescape(version)
		if err1 == nil && err2 == nil && python.IsRuntime(n) {
			return v
		}
	}
	return ""
}

// purlEscape percent-encodes a purl component as the purl specification
// says: every byte but ASCII letters, digits, ".-_~" and ":". A local
// version's "+" left bare reads back as a space in a qualifier and is
// ambiguous in the version ("2.0.0+cpu" is "2.0.0%2Bcpu").
func purlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-_~:", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// SBOM is the CycloneDX 1.5 JSON SBOM of the env s seals: every package
// of its resolution with its version, wheel file name and sha256 (as
// hashes and a pypi purl with a file_name qualifier), the root package as
// the BOM's subject, the platform, interpreter, resolution and
// materialization digests as properties, and tool (cruxprov's
// version, metadata.tools). It depends on the seal and tool alone (no time, no random serial
// number), so `env sbom` and an image's attestation of the same env are the same bytes when
// the same cruxprov version made both (the attestation's in-toto statement carries them
// compacted, as its predicate: TestAttestationsMeetTheirSpecifications); another tool
// differs in metadata.tools only (TestSBOMDependsOnTheSealAndTheTool).
func SBOM(s *seal.Seal, tool string) ([]byte, error) {
	comp := func(p seal.Package) BOMComponent {
		purl := pypiPURL(p) + "?file_name=" + purlEscape(p.Filename)
		return BOMComponent{
			Type: "library", BOMRef: purl, Name: p.Name, Version: p.Version, PURL: purl,
			Hashes:     []BOMHash{{Alg: "SHA-256", Content: strings.TrimPrefix(p.SHA256.String(), "sha256:")}},
			Properties: []BOMProperty{{Name: "cruxprov:wheel", Value: p.Filename}},
		}
	}
	b := BOM{BOMFormat: "CycloneDX", SpecVersion: "1.5", Version: 1, Components: []BOMComponent{}}
	b.Metadata.Tools.Components = []BOMComponent{{Type: "application", Name: "cruxprov", Version: tool}}
	pkgs := append([]seal.Package(nil), s.Resolution.Packages...)
	if r := s.Resolution.Root; r != nil {
		c := comp(*r)
		c.Type = "application"
		c.BOMRef = "" // the root's component below has it; a bom-ref is unique within a BOM
		b.Metadata.Component = &c
		pkgs = append(pkgs, *r)
	}
	sort.Slice(pkgs, func(i, j int) bool {
		return pkgs[i].Name < pkgs[j].Name || (pkgs[i].Name == pkgs[j].Name && pkgs[i].Filename < pkgs[j].Filename)
	})
	for i, p := range pkgs {
		if i > 0 && p.Filename == pkgs[i-1].Filename {
			continue
		}
		b.Components = append(b.Components, comp(p))
	}
	b.Metadata.Properties = []BOMProperty{
		{Name: "cruxprov:platform", Value: s.Materialization.Platform},
		{Name: "cruxprov:interpreter", Value: s.Interpreter.Path + " " + s.Interpreter.Version},
		{Name: "cruxprov:resolution", Value: s.Resolution.Digest.String()},
		{Name: "cruxprov:materialization", Value: s.Materialization.Digest.String()},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CheckTypeURI says why s is not what in-toto calls a TypeURI, as SLSA
// provenance v1 wants runDetails.builder.id and buildType: an absolute RFC
// 3986 URI, case normalized (scheme and authority lowercase). nil when it
// is one.
func CheckTypeURI(s string) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return errors.New("empty: give a URI, such as https://ci.example/builder")
	case err != nil:
		return fmt.Errorf("not a URI: %w", err)
	case !u.IsAbs():
		return fmt.Errorf("%q is not an absolute URI (no scheme), such as https://ci.example/builder", s)
	case strings.ContainsAny(s, " \t\r\n"):
		return fmt.Errorf("%q has white space, which no URI has", s)
	case s[:len(u.Scheme)] != u.Scheme || u.Host != strings.ToLower(u.Host): // url.Parse lowercases the scheme it returns
		return fmt.Errorf("%q: a URI's scheme and host are lowercase here (%s)", s, strings.ToLower(u.Scheme)+"://"+strings.ToLower(u.Host))
	}
	return nil
}
