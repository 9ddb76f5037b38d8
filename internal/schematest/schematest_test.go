package schematest

import (
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// TestValidatorsRefuse: the validators are not vacuous. A minimal valid
// document of each kind passes, and each mistake below is named: a
// CycloneDX component without its type, with a field 1.5 does not define,
// with a hash that is no hex digest; a statement of another _type, without
// a subject digest, with a field in-toto does not define; a provenance
// without a builder id, with a builder version that is no string map,
// naming a dependency by no URI ("oci://oci:oci"). CI runs it (.ci/run:
// python3-jsonschema, make schemas); elsewhere it skips saying what to
// install.
func TestValidatorsRefuse(t *testing.T) {
	const bom = `{"bomFormat":"CycloneDX","specVersion":"1.5","version":1,"components":[%s]}`
	const comp = `{"type":"library","name":"idna","version":"3.7","hashes":[{"alg":"SHA-256","content":"` + hex64 + `"}]}`
	if out, err := cycloneDX(t, [][]byte{[]byte(strings.Replace(bom, "%s", comp, 1))}); err != nil {
		t.Errorf("a valid BOM: %v\n%s", err, out)
	}
	for _, c := range []struct{ doc, want string }{
		{strings.Replace(comp, `"type":"library",`, "", 1), "'type' is a required property"},
		{strings.Replace(comp, `"name"`, `"colour":"red","name"`, 1), "'colour' was unexpected"},
		{strings.Replace(comp, hex64, "xyz", 1), "does not match"},
	} {
		t.Run("BOM "+c.want, func(t *testing.T) {
			out, err := cycloneDX(t, [][]byte{[]byte(strings.Replace(bom, "%s", c.doc, 1))})
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Errorf("%s: %v\n%s; want %q", c.doc, err, out, c.want)
			}
		})
	}

	const prov = `{"buildDefinition":{"buildType":"https://example.com/build/v1","externalParameters":{"a":1},` +
		`"resolvedDependencies":[{"name":"base","uri":"oci://registry.example/base","digest":{"sha256":"` + hex64 + `"}}]},` +
		`"runDetails":{"builder":{"id":"https://ci.example/builder","version":{"tool":"1"}}}}`
	st := func(typ, digest, pred string) string {
		return `{"_type":"` + typ + `","subject":[{"name":"x","digest":{"sha256":"` + digest + `"}}],` +
			`"predicateType":"https://slsa.dev/provenance/v1","predicate":` + pred + `}`
	}
	const v1 = "https://in-toto.io/Statement/v1"
	if out, err := inToto(t, [][]byte{[]byte(st(v1, hex64, prov))}); err != nil {
		t.Errorf("a valid statement: %v\n%s", err, out)
	}
	for _, c := range []struct{ doc, want string }{
		{st("https://in-toto.io/Statement/v9", hex64, prov), "_type"},
		{st(v1, "abc", prov), "digest"},
		{strings.Replace(st(v1, hex64, prov), `"subject"`, `"colour":"red","subject"`, 1), "colour"},
		{st(v1, hex64, strings.Replace(prov, `"id":"https://ci.example/builder",`, "", 1)), "builder.id required"},
		{st(v1, hex64, strings.Replace(prov, `{"tool":"1"}`, `"1"`, 1)), "not a SLSA Provenance v1 predicate"},
		{st(v1, hex64, strings.Replace(prov, "oci://registry.example/base", "oci://oci:oci", 1)), "is not a URI"},
		{st(v1, hex64, strings.Replace(prov, "https://ci.example/builder", "ci-runner-7", 1)), "not an absolute URI"},
	} {
		t.Run("statement "+c.want, func(t *testing.T) {
			out, err := inToto(t, [][]byte{[]byte(c.doc)})
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Errorf("%s: %v\n%s; want %q", c.doc, err, out, c.want)
			}
		})
	}
}

const hex64 = "35349f722201aa58419d94ef9c81ef4f390de5b552be8e4e20ffcad3e5a4c82c"
