package image

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/cruxible/cruxprov/internal/schematest"
)

// attestations are the in-toto statements of the .att image of the
// platform image d in the layout out, as the build wrote them.
func attestations(t *testing.T, out string, p *PlatformImage) map[string][]byte {
	t.Helper()
	lp, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, m := range im.Manifests {
		if m.Annotations[refNameAnnotation] != AttestationTag(p.Digest) {
			continue
		}
		img, err := lp.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			rc, err := l.Compressed()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			var e Envelope
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			body, err := base64.StdEncoding.DecodeString(e.Payload)
			if err != nil {
				t.Fatal(err)
			}
			var st Statement
			if err := json.Unmarshal(body, &st); err != nil {
				t.Fatal(err)
			}
			got[st.PredicateType] = body
		}
	}
	return got
}

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
	atts := attestations(t, out, &p)
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

// TestBaseURI: the provenance names a registry's base by an RFC 3986 URI
// whose authority is lowercase (in-toto's ResourceURI), and a layout's by
// none ("oci://oci:DIR" had a port "DIR").
func TestBaseURI(t *testing.T) {
	repo, err := name.NewRepository("Registry.Example:5000/acme/base")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ref  Ref
		want string
	}{
		{Ref{Repo: &repo}, "oci://registry.example:5000/acme/base"},
		{Ref{Layout: "/tmp/oci"}, ""},
	} {
		got := baseURI(c.ref)
		if got != c.want {
			t.Errorf("baseURI(%+v) = %q, want %q", c.ref, got, c.want)
		}
		if u, err := url.Parse(got); got != "" && (err != nil || !u.IsAbs()) {
			t.Errorf("baseURI(%+v) = %q: not an absolute URI (%v)", c.ref, got, err)
		}
	}
}
