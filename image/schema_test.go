package image

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/schematest"
	"github.com/cruxible/cruxprov/seal"
)

// TestAttestationsMeetTheirSpecifications validates what a signed image
// build writes against the official definitions, with real validators
// (internal/schematest): the SBOM, as `env sbom` prints it and as the
// image's CycloneDX attestation carries it, against the CycloneDX 1.5
// JSON schema; both attestations as in-toto Statements v1, and the
// provenance as SLSA provenance v1 (the in-toto project's bindings read
// with unknown fields refused; every URI an RFC 3986 one). The
// provenance named a layout base's resolved dependency by
// "oci://oci:oci", no URI at all (a port "oci"). The attestation carries
// the SBOM's bytes, compacted as a statement's predicate. CI runs it
// (.ci/run installs python3-jsonschema and fetches the validator's
// modules); elsewhere it skips, saying what to install.
func TestAttestationsMeetTheirSpecifications(t *testing.T) {
	res, out, _ := signedBuild(t)
	p := res.Platforms[0]
	atts := imagetest.Attestations(t, out, AttestationTag(p.Digest))
	prov, sbom := atts[SLSAProvenanceType], atts[CycloneDXType]
	if prov == nil || sbom == nil {
		t.Fatalf("the .att image holds %d attestations, want the provenance and the SBOM", len(atts))
	}
	schematest.InToto(t, prov, sbom)
	var st struct{ Predicate json.RawMessage }
	if err := json.Unmarshal(sbom, &st); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, p.sbom); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(st.Predicate, compact.Bytes()) {
		t.Errorf("the attestation's SBOM is not env sbom's document:\n%s\n%s", st.Predicate, p.sbom)
	}
	schematest.CycloneDX(t, p.sbom, st.Predicate)
}

// TestSBOMEdgeCasesMeetTheSchema validates SBOMs of seals a real env
// seldom has against the CycloneDX 1.5 JSON schema, and each purl
// against the purl specification's pypi type (name lowercase, '_' as
// '-'; every component percent-encoded; qualifiers with lowercase keys,
// sorted): local versions ("2.0.0+cpu"), epochs, a name that is not PEP
// 503 normal, a seal without a root, and a thousand packages. The name
// "Typing_Extensions" was written "typing_extensions" in its purl (only
// lowercased). CI runs it (see TestAttestationsMeetTheirSpecifications).
func TestSBOMEdgeCasesMeetTheSchema(t *testing.T) {
	pkg := func(name, version, filename string) seal.Package {
		return seal.Package{Name: name, Version: version, Filename: filename, SHA256: digest.Sum([]byte(filename)), Size: 1}
	}
	root := pkg("acme-echo", "1.0.0", "acme_echo-1.0.0-py3-none-any.whl")
	edge := []seal.Package{
		pkg("torch", "2.0.0+cpu", "torch-2.0.0+cpu-cp311-cp311-linux_x86_64.whl"),
		pkg("zope-interface", "1!6.0", "zope_interface-1!6.0-py3-none-any.whl"),
		pkg("Typing_Extensions", "4.12.2", "typing_extensions-4.12.2-py3-none-any.whl"),
		pkg("local-thing", "1.0+ubuntu.1~x", "local_thing-1.0+ubuntu.1~x-py3-none-any.whl"),
	}
	var many []seal.Package
	for i := range 1000 {
		n := fmt.Sprintf("pkg-%04d", i)
		many = append(many, pkg(n, "1.0."+fmt.Sprint(i), strings.ReplaceAll(n, "-", "_")+"-1.0."+fmt.Sprint(i)+"-py3-none-any.whl"))
	}
	mk := func(root *seal.Package, pkgs []seal.Package) *seal.Seal {
		s := &seal.Seal{}
		s.Resolution.Packages = pkgs
		s.Resolution.Root = root
		s.Resolution.Digest = digest.Sum([]byte("resolution"))
		s.Materialization.Digest = digest.Sum([]byte("materialization"))
		s.Materialization.Platform = "cp311-manylinux_2_36_x86_64"
		s.Interpreter.Path, s.Interpreter.Version = "/usr/bin/python3.11", "3.11.2"
		return s
	}
	var docs [][]byte
	for _, s := range []*seal.Seal{mk(&root, edge), mk(nil, edge), mk(&root, many), mk(nil, nil)} {
		b, err := SBOM(s, "cruxprov v1.2.3+dirty go1.26.0")
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
		var bom BOM
		if err := json.Unmarshal(b, &bom); err != nil {
			t.Fatal(err)
		}
		for _, c := range bom.Components {
			checkPypiPURL(t, c.PURL)
		}
	}
	schematest.CycloneDX(t, docs...)
}

// checkPypiPURL holds purl to the purl specification: pkg:TYPE/NAME@VERSION?QUALIFIERS,
// the pypi type's name lowercase with '-' for '_', each component
// percent-encoded (no byte outside the unreserved set and ':' left bare),
// qualifier keys lowercase and sorted.
func checkPypiPURL(t *testing.T, purl string) {
	t.Helper()
	rest, ok := strings.CutPrefix(purl, "pkg:pypi/")
	if !ok {
		t.Errorf("purl %q: not pkg:pypi/", purl)
		return
	}
	nameVer, quals, _ := strings.Cut(rest, "?")
	name, ver, ok := strings.Cut(nameVer, "@")
	if !ok || name == "" || ver == "" {
		t.Errorf("purl %q: no NAME@VERSION", purl)
	}
	bare := func(s string) bool {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-_~:%", c) >= 0) {
				return false
			}
		}
		return true
	}
	if n, err := url.PathUnescape(name); err != nil || n != strings.ToLower(n) || strings.Contains(n, "_") || !bare(name) {
		t.Errorf("purl %q: the pypi name %q is not lowercase with '-' for '_', percent-encoded", purl, name)
	}
	if _, err := url.PathUnescape(ver); err != nil || !bare(ver) {
		t.Errorf("purl %q: the version %q is not percent-encoded", purl, ver)
	}
	var keys []string
	for _, kv := range strings.Split(quals, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if k != strings.ToLower(k) || !bare(v) {
			t.Errorf("purl %q: qualifier %q", purl, kv)
		}
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		if keys[i] < keys[i-1] {
			t.Errorf("purl %q: qualifiers not sorted", purl)
		}
	}
}

// TestBaseURI: the provenance names a registry's base by an RFC 3986 URI
// whose authority is lowercase (in-toto's ResourceURI), and a layout's by
// none ("oci://oci:DIR" had a port "DIR").
func TestBaseURI(t *testing.T) {
	repo, err := name.NewRepository("Registry.Example:5000/acme/base")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ref  Ref
		want string
	}{
		{"registry", Ref{Repo: &repo}, "oci://registry.example:5000/acme/base"},
		{"layout", Ref{Layout: "/tmp/oci"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := baseURI(c.ref)
			if got != c.want {
				t.Errorf("baseURI(%+v) = %q, want %q", c.ref, got, c.want)
			}
			if u, err := url.Parse(got); got != "" && (err != nil || !u.IsAbs()) {
				t.Errorf("baseURI(%+v) = %q: not an absolute URI (%v)", c.ref, got, err)
			}
		})
	}
}
