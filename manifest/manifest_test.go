package manifest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

const hexA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// good is DESIGN §3's example, with two entrypoints, one of them written
// with a sub-table instead of an inline table.
const good = `schema = 1
name = "acme-web-fetch"          # must equal the wheel's normalized distribution name
protocol = [1, 1]
secrets = ["acme/api-token"]
egress = ["https://api.acme.example/*"]
[budgets]
timeout_ms = 30000
output_bytes = 1048576
[[entrypoints]]
name = "fetch"
object = "acme_web_fetch.impl:Fetch"
interface = { id = "web.fetch", digest = "sha256:` + hexA + `" }

[[entrypoints]]
name = "head"
object = "acme_web_fetch.impl:head"
[entrypoints.interface]
id = "web.head"
digest = "sha256:` + hexA + `"
`

func TestParseGood(t *testing.T) {
	for _, wheelName := range []string{"acme_web_fetch", "Acme.Web-Fetch", "acme-web-fetch"} {
		t.Run(wheelName, func(t *testing.T) {
			m, err := Parse([]byte(good), wheelName)
			if err != nil {
				t.Fatalf("%s: %v", wheelName, err)
			}
			d := digest.Digest{}
			if err := d.UnmarshalText([]byte("sha256:" + hexA)); err != nil {
				t.Fatal(err)
			}
			want := Manifest{
				Schema: 1, Name: "acme-web-fetch", Protocol: [2]int{1, 1},
				Secrets: []string{"acme/api-token"}, Egress: []string{"https://api.acme.example/*"},
				Budgets: Budgets{TimeoutMS: 30000, OutputBytes: 1048576},
				Entrypoints: []Entrypoint{
					{Name: "fetch", Object: "acme_web_fetch.impl:Fetch", Interface: Interface{"web.fetch", d}},
					{Name: "head", Object: "acme_web_fetch.impl:head", Interface: Interface{"web.head", d}},
				},
			}
			if !equal(*m, want) {
				t.Fatalf("got %+v\nwant %+v", *m, want)
			}
			if e, ok := m.Entrypoint("head"); !ok || e.Interface.ID != "web.head" {
				t.Fatalf("Entrypoint(head) = %+v %v", e, ok)
			}
			if _, ok := m.Entrypoint("nope"); ok {
				t.Fatal("Entrypoint(nope) found")
			}
		})
	}
}

func equal(a, b Manifest) bool {
	if a.Schema != b.Schema || a.Name != b.Name || a.Protocol != b.Protocol || a.Budgets != b.Budgets ||
		strings.Join(a.Secrets, ",") != strings.Join(b.Secrets, ",") || strings.Join(a.Egress, ",") != strings.Join(b.Egress, ",") ||
		len(a.Entrypoints) != len(b.Entrypoints) {
		return false
	}
	for i := range a.Entrypoints {
		if a.Entrypoints[i] != b.Entrypoints[i] {
			return false
		}
	}
	return true
}

func TestParseMinimal(t *testing.T) {
	m, err := Parse([]byte(`schema = 1
name = "x"
protocol = [1, 2]
entrypoints = [{name = "run", object = "x:run", interface = {id = "x.run", digest = "sha256:`+hexA+`"}}]
`), "X")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Secrets) != 0 || m.Secrets == nil || m.Egress == nil || m.Budgets != (Budgets{}) || m.Protocol != [2]int{1, 2} {
		t.Fatalf("%+v", m)
	}
}

// TestParseSaysTheFirstCharacterRule: a secret ref, an entrypoint name
// and an interface id start with a letter or digit; one that starts with
// a character allowed elsewhere ("/acme", ".x", "-x") was refused with
// only the characters allowed, all of which it is made of.
func TestParseSaysTheFirstCharacterRule(t *testing.T) {
	for _, c := range []struct{ old, new string }{
		{`secrets = ["acme/api-token"]`, `secrets = ["/acme"]`},
		{`name = "head"`, `name = ".head"`},
		{`id = "web.head"`, `id = "-web.head"`},
	} {
		if !strings.Contains(good, c.old) {
			t.Fatalf("good manifest has no %q", c.old)
		}
		_, err := Parse([]byte(strings.Replace(good, c.old, c.new, 1)), "acme-web-fetch")
		if !errors.Is(err, refusal.ManifestInvalid) || !strings.Contains(err.Error(), "starting with a letter or digit") {
			t.Errorf("%s: %v, want manifest_invalid saying it starts with a letter or digit", c.new, err)
		}
	}
}

// TestParseInvalid: each case is refused as manifest_invalid, and the
// first problem names the key and the line where it is written.
func TestParseInvalid(t *testing.T) {
	replace := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("good manifest has no %q", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	cases := []struct {
		name, doc, key string
		line           int
	}{
		{"unknown top key", replace("protocol = [1, 1]", "protocol = [1, 1]\nprotocl = 2"), "protocl", 4},
		{"unknown budget key", replace("timeout_ms = 30000", "timeout_ms = 30000\ncpu = 2"), "budgets.cpu", 8},
		{"unknown entrypoint key", replace(`name = "head"`, `name = "head"`+"\nweight = 1"), "entrypoints[1].weight", 16},
		{"unknown inline interface key", replace(`{ id = "web.fetch",`, `{ id = "web.fetch", version = 2,`), "entrypoints[0].interface.version", 12},
		{"unknown sub-table interface key", replace(`id = "web.head"`, `id = "web.head"`+"\nextra = true"), "entrypoints[1].interface.extra", 19},
		{"quoted unknown key", replace("[budgets]", "\"a b\" = 1\n[budgets]"), `"a b"`, 6},
		{"schema 2", replace("schema = 1", "schema = 2"), "schema", 1},
		{"schema string", replace("schema = 1", `schema = "1"`), "schema", 1},
		{"schema missing", replace("schema = 1\n", ""), "schema", 1},
		{"name mismatch", replace(`name = "acme-web-fetch"`, `name = "acme-web-fetcher"`), "name", 2},
		{"name not normalized", replace(`name = "acme-web-fetch"`, `name = "acme_web_fetch"`), "name", 2},
		{"protocol inverted", replace("protocol = [1, 1]", "protocol = [2, 1]"), "protocol", 3},
		{"protocol zero", replace("protocol = [1, 1]", "protocol = [0, 1]"), "protocol[0]", 3},
		{"protocol one element", replace("protocol = [1, 1]", "protocol = [1]"), "protocol", 3},
		{"protocol float", replace("protocol = [1, 1]", "protocol = [1, 1.5]"), "protocol[1]", 3},
		{"protocol multi-line", replace("protocol = [1, 1]", "protocol = [\n  1,\n  true,\n]"), "protocol[1]", 5},
		{"secret twice", replace(`secrets = ["acme/api-token"]`, `secrets = ["acme/api-token", "acme/api-token"]`), "secrets[1]", 4},
		{"secret with space", replace(`secrets = ["acme/api-token"]`, `secrets = ["acme api"]`), "secrets[0]", 4},
		{"secret with equals", replace(`secrets = ["acme/api-token"]`, `secrets = ["a=b"]`), "secrets[0]", 4},
		{"secret empty", replace(`secrets = ["acme/api-token"]`, `secrets = [""]`), "secrets[0]", 4},
		{"secrets not array", replace(`secrets = ["acme/api-token"]`, `secrets = "acme/api-token"`), "secrets", 4},
		{"egress no scheme", replace(`egress = ["https://api.acme.example/*"]`, `egress = ["api.acme.example"]`), "egress[0]", 5},
		{"budget negative", replace("timeout_ms = 30000", "timeout_ms = -1"), "budgets.timeout_ms", 7},
		{"budget zero", replace("output_bytes = 1048576", "output_bytes = 0"), "budgets.output_bytes", 8},
		{"budgets not table", replace("[budgets]\ntimeout_ms = 30000\noutput_bytes = 1048576\n", "budgets = 5\n"), "budgets", 6},
		{"dotted budgets negative", replace("[budgets]\ntimeout_ms = 30000\noutput_bytes = 1048576\n", "budgets.timeout_ms = -5\n"), "budgets.timeout_ms", 6},
		{"entrypoints empty", "schema = 1\nname = \"acme-web-fetch\"\nprotocol = [1, 1]\nentrypoints = []\n", "entrypoints", 4},
		{"entrypoints missing", "schema = 1\nname = \"acme-web-fetch\"\nprotocol = [1, 1]\n", "entrypoints", 1},
		{"entrypoints not tables", "schema = 1\nname = \"acme-web-fetch\"\nprotocol = [1, 1]\nentrypoints = [1]\n", "entrypoints[0]", 4},
		{"duplicate entrypoint", replace(`name = "head"`, `name = "fetch"`), "entrypoints[1].name", 15},
		{"entrypoint name missing", replace(`name = "head"`+"\n", ""), "entrypoints[1].name", 14},
		{"entrypoint name bad", replace(`name = "head"`, `name = "he ad"`), "entrypoints[1].name", 15},
		{"object no colon", replace(`"acme_web_fetch.impl:head"`, `"acme_web_fetch.impl.head"`), "entrypoints[1].object", 16},
		{"object two colons", replace(`"acme_web_fetch.impl:head"`, `"a:b:c"`), "entrypoints[1].object", 16},
		{"object dash", replace(`"acme_web_fetch.impl:head"`, `"acme-web:head"`), "entrypoints[1].object", 16},
		{"object empty attr", replace(`"acme_web_fetch.impl:head"`, `"acme_web_fetch.impl:"`), "entrypoints[1].object", 16},
		{"object integer", replace(`"acme_web_fetch.impl:head"`, `5`), "entrypoints[1].object", 16},
		{"digest uppercase", replace(`digest = "sha256:`+hexA+`"`+"\n", `digest = "sha256:`+strings.ToUpper(hexA)+`"`+"\n"), "entrypoints[1].interface.digest", 19},
		{"digest md5", replace(`digest = "sha256:`+hexA+`" }`, `digest = "md5:abc" }`), "entrypoints[0].interface.digest", 12},
		{"digest short", replace(`digest = "sha256:`+hexA+`" }`, `digest = "sha256:abc" }`), "entrypoints[0].interface.digest", 12},
		{"interface missing", replace("[entrypoints.interface]\nid = \"web.head\"\ndigest = \"sha256:"+hexA+"\"\n", ""), "entrypoints[1].interface", 14},
		{"interface id missing", replace(`id = "web.head"`+"\n", ""), "entrypoints[1].interface.id", 17},
		{"interface not table", replace(`interface = { id = "web.fetch", digest = "sha256:`+hexA+`" }`, `interface = "web.fetch"`), "entrypoints[0].interface", 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc), "acme-web-fetch")
			if !errors.Is(err, refusal.ManifestInvalid) {
				t.Fatalf("err = %v, want manifest_invalid\n%s", err, c.doc)
			}
			_, ck, err := check([]byte(c.doc), "acme-web-fetch")
			if err != nil {
				t.Fatal(err)
			}
			if len(ck.problems) == 0 {
				t.Fatal("no problems recorded")
			}
			var p problem
			for _, q := range ck.problems {
				if q.key == c.key {
					p = q
				}
			}
			if p.key != c.key || p.line != c.line {
				t.Fatalf("problems %+v; want key %s at line %d\n%s", ck.problems, c.key, c.line, c.doc)
			}
		})
	}
}

func TestParseNotTOML(t *testing.T) {
	for _, doc := range []string{"schema = ", "a = 1\na = 2", "[x\n", "\xff = 1", "name = \"\x00\""} {
		t.Run(fmt.Sprintf("%q", doc), func(t *testing.T) {
			if _, err := Parse([]byte(doc), "x"); !errors.Is(err, refusal.ManifestInvalid) {
				t.Errorf("%q: %v", doc, err)
			}
		})
	}
}

func TestLineIndex(t *testing.T) {
	doc := `# comment
a = """
multi "" line
""""
b = [ # c
  'x',
  { k = 1, "q k" = 2 },
]
[t . 'u']
v = 1979-05-27 07:32:00Z
w = 2
[[arr]]
x = 1
[[arr]]
x = 2
[arr.sub]
y = 3
`
	ix := indexLines(doc)
	want := map[string]int{
		"a": 2, "b": 5, "b[0]": 6, "b[1]": 7, "b[1].k": 7, "b[1].q k": 7, "t.u": 9, "t.u.v": 10, "t.u.w": 11,
		"arr[0]": 12, "arr[0].x": 13, "arr[1]": 14, "arr[1].x": 15, "arr[1].sub": 16, "arr[1].sub.y": 17,
	}
	for k, n := range want {
		if ix[k] != n {
			t.Errorf("%s: line %d, want %d (index %v)", k, ix[k], n, ix)
		}
	}
	if ix.line("arr[1].sub.nope") != 16 || ix.line("nothing") != 1 {
		t.Errorf("fallbacks: %d %d", ix.line("arr[1].sub.nope"), ix.line("nothing"))
	}
}

func TestImplementationDigest(t *testing.T) {
	m, err := Parse([]byte(good), "acme_web_fetch")
	if err != nil {
		t.Fatal(err)
	}
	dist := digest.Sum([]byte("wheel bytes"))
	a, err := m.Entrypoints[0].ImplementationDigest(dist)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Entrypoints[1].ImplementationDigest(dist)
	if err != nil || a == b {
		t.Fatalf("%v %v %v", a, b, err)
	}
	want, err := digest.ImplementationDigest("web.fetch", m.Entrypoints[0].Interface.Digest, "fetch", "acme_web_fetch.impl:Fetch", dist)
	if err != nil || a != want {
		t.Fatalf("%v != %v (%v)", a, want, err)
	}
	if _, err := m.Entrypoints[0].ImplementationDigest(digest.Digest{}); !errors.Is(err, refusal.ManifestInvalid) {
		t.Fatalf("zero distribution: %v", err)
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(good), "acme-web-fetch")
	f.Add([]byte("schema = 1\nentrypoints = [{name = \"a\"}]"), "a")
	f.Add([]byte("[[entrypoints]]\n[entrypoints.interface]\n[[entrypoints]]"), "x")
	f.Add([]byte("a = '''\n'''''\nb = \"\"\"\\\"\"\"\"\n"), "x")
	f.Add([]byte("t = 1979-05-27 07:32:00\nx = [1,\n2]"), "x")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		m, err := Parse(data, name)
		if err != nil {
			if refusal.CodeOf(err) != refusal.ManifestInvalid {
				t.Fatalf("error without manifest_invalid: %v", err)
			}
			return
		}
		if m.Schema != 1 || len(m.Entrypoints) == 0 || m.Protocol[0] > m.Protocol[1] {
			t.Fatalf("accepted an invalid manifest: %+v", m)
		}
		for _, e := range m.Entrypoints {
			if e.Interface.Digest.IsZero() || !validObject(e.Object) {
				t.Fatalf("accepted entrypoint %+v", e)
			}
		}
	})
}

// TestParseMisspeltKey: a required key written misspelt is one problem,
// at the misspelling's line, naming the key to rename it to. It was
// reported as the required key missing, at its table's line (line 1 for
// protocol), which comes first, so the refusal named "protocol" where
// the author had written "protocl" and never said so.
func TestParseMisspeltKey(t *testing.T) {
	replace := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("good manifest has no %q", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	cases := []struct {
		name, doc, key, want string
		line                 int
	}{
		{"required top key", replace("protocol = [1, 1]", "protocl = [1, 1]"), "protocl", "protocol", 3},
		{"required top key, swapped letters", replace("schema = 1", "shcema = 1"), "shcema", "schema", 1},
		{"optional key, dash for underscore", replace("timeout_ms = 30000", "timeout-ms = 30000"), "budgets.timeout-ms", "timeout_ms", 7},
		{"entrypoint key", replace(`object = "acme_web_fetch.impl:head"`, `objcet = "acme_web_fetch.impl:head"`), "entrypoints[1].objcet", "object", 16},
		{"interface key, case", replace(`id = "web.head"`, `ID = "web.head"`), "entrypoints[1].interface.ID", "id", 18},
		// An array of tables misspelt is reported at its first header: it
		// was at line 1.
		{"array of tables header", "schema = 1\nname = \"acme-web-fetch\"\nprotocol = [1, 1]\n\n[[entrypoint]]\nname = \"fetch\"\nobject = \"a:b\"\ninterface = { id = \"web.fetch\", digest = \"sha256:" + hexA + "\" }\n", "entrypoint", "entrypoints", 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc), "acme-web-fetch")
			if !errors.Is(err, refusal.ManifestInvalid) {
				t.Fatalf("err = %v, want manifest_invalid", err)
			}
			_, ck, err := check([]byte(c.doc), "acme-web-fetch")
			if err != nil {
				t.Fatal(err)
			}
			if len(ck.problems) != 1 {
				t.Fatalf("problems %+v; want one, the misspelling", ck.problems)
			}
			p := ck.problems[0]
			if p.key != c.key || p.line != c.line || !strings.Contains(p.msg, "rename it "+c.want+",") {
				t.Fatalf("problem %+v; want %s at line %d, to rename %s", p, c.key, c.line, c.want)
			}
		})
	}
	// Not a misspelling: far from every key.
	for _, doc := range []string{replace("protocol = [1, 1]", "protocol = [1, 1]\nweight = 2")} {
		_, ck, err := check([]byte(doc), "acme-web-fetch")
		if err != nil {
			t.Fatal(err)
		}
		if len(ck.problems) != 1 || strings.Contains(ck.problems[0].msg, "rename") {
			t.Fatalf("problems %+v; want one unknown key, no rename", ck.problems)
		}
	}
}

// TestParseNotTOMLSaysItOnce: a TOML syntax error is said once, with its
// line, and ends with what to do. The parser's message was repeated after
// the detail ("…: toml: line 3 (last key …): …") with no next step.
func TestParseNotTOMLSaysItOnce(t *testing.T) {
	_, err := Parse([]byte("schema = 1\nname = \"x\"\nprotocol = [1, 1\n"), "x")
	var r *refusal.Error
	if !errors.As(err, &r) || r.Code != refusal.ManifestInvalid {
		t.Fatalf("err = %v, want manifest_invalid", err)
	}
	msg := r.Message()
	if strings.Count(msg, "expected a comma") != 1 || strings.Contains(msg, "toml: line") ||
		!strings.HasPrefix(msg, "provider.toml line 3: not valid TOML: ") || !strings.HasSuffix(msg, "; fix the manifest (docs/manifest.md) and rebuild or re-embed it") {
		t.Fatalf("message %q: want the parser's message once, at line 3, then what to do", msg)
	}
}
