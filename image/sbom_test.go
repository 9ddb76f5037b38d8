package image

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/seal"
)

// TestSBOMIsValidCycloneDX holds env sbom's document to what CycloneDX
// 1.5 and the purl specification ask of it: purls whose components are
// percent-encoded (a local version's "+" read back as a space in the
// file_name qualifier), every bom-ref unique within the BOM (the root's
// was on metadata.component and on its components entry), every installed
// distribution listed once, and the same bytes whatever order the seal
// lists its packages in.
func TestSBOMIsValidCycloneDX(t *testing.T) {
	pkg := func(name, version, filename string) seal.Package {
		return seal.Package{Name: name, Version: version, Filename: filename, SHA256: digest.Sum([]byte(filename))}
	}
	torch := pkg("torch", "2.0.0+cpu", "torch-2.0.0+cpu-cp311-cp311-linux_x86_64.whl")
	epoch := pkg("zope-interface", "1!6.0", "zope_interface-1!6.0-py3-none-any.whl")
	plain := pkg("idna", "3.7", "idna-3.7-py3-none-any.whl")
	root := pkg("acme-echo", "1.0.0", "acme_echo-1.0.0-py3-none-any.whl")
	mk := func(pkgs ...seal.Package) *seal.Seal {
		s := &seal.Seal{}
		s.Resolution.Packages = pkgs
		s.Resolution.Root = &root
		s.Materialization.Platform = "linux-x86_64-cp311"
		return s
	}
	a, err := SBOM(mk(torch, epoch, plain), "test")
	if err != nil {
		t.Fatal(err)
	}
	b, err := SBOM(mk(plain, epoch, torch), "test")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("the SBOM depends on the seal's package order:\n%s\n%s", a, b)
	}
	var bom BOM
	if err := json.Unmarshal(a, &bom); err != nil {
		t.Fatal(err)
	}
	refs := map[string]bool{}
	all := append([]BOMComponent{*bom.Metadata.Component}, bom.Components...)
	for _, c := range all {
		if c.BOMRef == "" {
			continue
		}
		if refs[c.BOMRef] {
			t.Errorf("bom-ref %q appears twice", c.BOMRef)
		}
		refs[c.BOMRef] = true
	}
	want := map[string]seal.Package{}
	for _, p := range []seal.Package{torch, epoch, plain, root} {
		want[p.Filename] = p
	}
	if len(bom.Components) != len(want) {
		t.Errorf("%d components, want %d (every installed distribution once)", len(bom.Components), len(want))
	}
	for _, c := range bom.Components {
		rest, ok := strings.CutPrefix(c.PURL, "pkg:pypi/")
		nameVer, q, _ := strings.Cut(rest, "?")
		name, ver, _ := strings.Cut(nameVer, "@")
		if strings.ContainsAny(nameVer, "+!") {
			t.Errorf("purl %q: %q is not percent-encoded", c.PURL, nameVer)
		}
		ver, verr := url.PathUnescape(ver)
		qs, qerr := url.ParseQuery(q)
		p := want[qs.Get("file_name")]
		if !ok || verr != nil || qerr != nil || name != p.Name || ver != p.Version || c.Version != p.Version {
			t.Errorf("purl %q reads back as %s@%s file_name=%q; want %s@%s file_name of a wheel installed", c.PURL, name, ver, qs.Get("file_name"), p.Name, p.Version)
		}
		if len(c.Hashes) != 1 || c.Hashes[0].Alg != "SHA-256" || "sha256:"+c.Hashes[0].Content != p.SHA256.String() {
			t.Errorf("%s: hashes %+v", c.Name, c.Hashes)
		}
	}
	// The provenance's resolved dependencies name wheels by the same purl.
	if got := pypiPURL(torch); got != "pkg:pypi/torch@2.0.0%2Bcpu" {
		t.Errorf("pypiPURL = %q", got)
	}
	if m := bom.Metadata.Component; m == nil || m.Name != "acme-echo" || m.Type != "application" {
		t.Errorf("metadata.component = %+v, want the root", m)
	}
}

// TestSBOMDependsOnTheSealAndTheTool: images.md said the SBOM depends on
// the seal alone, so that an image's and env sbom's agree; it also names
// the cruxprov that wrote it (metadata.tools), so an env sbom on a host
// whose cruxprov is not CI's differed. The doc says so now; this holds
// that the tool's version is the only other input, in that field only.
func TestSBOMDependsOnTheSealAndTheTool(t *testing.T) {
	root := seal.Package{Name: "acme-echo", Version: "1.0.0", Filename: "acme_echo-1.0.0-py3-none-any.whl", SHA256: digest.Sum([]byte("w"))}
	s := &seal.Seal{}
	s.Resolution.Root = &root
	s.Materialization.Platform = "linux-x86_64-cp311"
	read := func(tool string) map[string]any {
		t.Helper()
		b, err := SBOM(s, tool)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := SBOM(s, tool)
		if !bytes.Equal(b, again) {
			t.Fatal("two SBOMs of one seal and tool differ")
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b := read("v1 go1.26.0"), read("v2 go1.26.8")
	version := func(v map[string]any) any {
		return v["metadata"].(map[string]any)["tools"].(map[string]any)["components"].([]any)[0].(map[string]any)["version"]
	}
	if version(a) != "v1 go1.26.0" || version(b) != "v2 go1.26.8" {
		t.Fatalf("metadata.tools names %v and %v", version(a), version(b))
	}
	delete(a["metadata"].(map[string]any), "tools")
	delete(b["metadata"].(map[string]any), "tools")
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("two tools' SBOMs of one seal differ beyond metadata.tools:\n%s\n%s", ja, jb)
	}
}
