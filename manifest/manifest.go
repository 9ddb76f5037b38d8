// Package manifest owns the provider's package-side manifest,
// <dist-info>/cruxible/provider.toml (DESIGN §3): strict parsing into a
// Manifest, reading it and the embedded pylock.toml out of a root wheel,
// each entrypoint's implementation digest (§5), and Inspect, the report of
// a root wheel that `cruxprov inspect` prints.
//
// It does not parse the lock (lockfile/ does; Inspect only summarizes
// what it returns), check interfaces against a
// registry (registry/ does), or decide which protocol versions the
// executor speaks. Every fault is a *refusal.Error: manifest_invalid (with
// the key and the line), manifest_missing, lock_missing.
package manifest

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/refusal"
)

// Schema is the only manifest schema this package reads.
const Schema = 1

// Manifest is a parsed, validated provider.toml.
type Manifest struct {
	// Schema is the manifest format version (always 1).
	Schema int `json:"schema"`
	// Name is the root wheel's PEP 503 normalized distribution name.
	Name string `json:"name"`
	// Protocol is the inclusive range of protocol versions supported.
	Protocol [2]int `json:"protocol"`
	// Secrets are the secret refs the provider may receive, as written.
	Secrets []string `json:"secrets"`
	// Egress are the declared endpoints (recording, not containment).
	Egress []string `json:"egress"`
	// Budgets are defaults an executor may lower, never raise.
	Budgets Budgets `json:"budgets"`
	// Entrypoints are the provider's entrypoints, in file order.
	Entrypoints []Entrypoint `json:"entrypoints"`
}

// Budgets are the provider's default limits; 0 means the manifest gives
// none (the executor's own default applies).
type Budgets struct {
	// TimeoutMS is the wall-clock limit of one run, in milliseconds.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// OutputBytes bounds stdout and stderr together.
	OutputBytes int64 `json:"output_bytes,omitempty"`
}

// Entrypoint is one [[entrypoints]] table.
type Entrypoint struct {
	// Name is the entrypoint's name, unique in the manifest.
	Name string `json:"name"`
	// Object is the "module:attr" the harness imports.
	Object string `json:"object"`
	// Interface is the interface the entrypoint implements.
	Interface Interface `json:"interface"`
}

// Interface names an interface by id and by the digest of its schema.
type Interface struct {
	// ID is the interface id ("web.fetch").
	ID string `json:"id"`
	// Digest is the sha256 of the interface schema's canonical JSON.
	Digest digest.Digest `json:"digest"`
}

// Entrypoint returns the entrypoint called name, or false.
func (m *Manifest) Entrypoint(name string) (Entrypoint, bool) {
	for _, e := range m.Entrypoints {
		if e.Name == name {
			return e, true
		}
	}
	return Entrypoint{}, false
}

var (
	identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	// Names of entrypoints, secret refs and interface ids: a safe,
	// printable alphabet that survives shells, YAML and `REF=@FILE`.
	nameRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	refRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`)
	egressRe = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://[!-~]+$`)
)

const maxText = 256

// problem is one fault found, with the key path and its line.
type problem struct {
	line int
	key  string
	msg  string
}

type checker struct {
	lines    lineIndex
	problems []problem
	// misspelt holds the paths of keys an unknown key of their table was
	// taken for a misspelling of (unknown): that problem names both, so
	// the key is not also reported missing.
	misspelt map[string]bool
}

func (c *checker) add(key, format string, args ...any) {
	c.problems = append(c.problems, problem{c.lines.line(key), key, fmt.Sprintf(format, args...)})
}

// addAt reports a problem about key at the line of another path (a missing
// key is reported at its table's line).
func (c *checker) addAt(at, key, format string, args ...any) {
	c.problems = append(c.problems, problem{c.lines.line(at), key, fmt.Sprintf(format, args...)})
}

func (c *checker) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	sort.SliceStable(c.problems, func(i, j int) bool { return c.problems[i].line < c.problems[j].line })
	p := c.problems[0]
	more := ""
	if n := len(c.problems) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	return refusal.New(refusal.ManifestInvalid, "provider.toml line %d: %s: %s%s; %s", p.line, p.key, p.msg, more, fixManifest)
}

// fixManifest is what every manifest_invalid detail ends with.
const fixManifest = "fix the manifest (docs/manifest.md) and rebuild or re-embed it"

// syntaxError is the TOML parser's error as a manifest_invalid detail
// quotes it (one line, without the parser's own "toml: line N" prefix,
// which the detail says as "provider.toml line N"), so that it is said
// once; Unwrap gives the parser's error.
type syntaxError struct {
	msg string
	err error
}

func (e *syntaxError) Error() string { return e.msg }
func (e *syntaxError) Unwrap() error { return e.err }

// Parse parses and validates provider.toml. wheelName is the root wheel's
// distribution name (from its file name, any spelling); the manifest's
// name must be its PEP 503 normalized form.
//
// Strict: unknown keys, missing required keys (schema, name, protocol,
// entrypoints), wrong types, schema other than 1, a name that is not the
// wheel's normalized name, a protocol range that is not two positive
// integers in order, duplicate or malformed secrets and egress entries,
// budgets that are not positive, an empty entrypoint list, duplicate
// entrypoint names, an object that is not "module:attr" of dotted Python
// identifiers, an interface digest that is not "sha256:<64 hex>": each is
// refusal.ManifestInvalid whose detail names the key and the line.
func Parse(data []byte, wheelName string) (*Manifest, error) {
	m, c, err := check(data, wheelName)
	if err != nil {
		return nil, err
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return m, nil
}

// check parses data and returns every problem found (tests read them).
func check(data []byte, wheelName string) (*Manifest, *checker, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		// The detail says the parser's message once, then what to do: the
		// cause's own text (toml: line N (last key …): message) repeated
		// it after the detail, and the line ended with no next step.
		var pe toml.ParseError
		if errors.As(err, &pe) {
			cause := &syntaxError{msg: oneLine(pe.Message), err: err}
			return nil, nil, refusal.Wrap(refusal.ManifestInvalid, cause, "provider.toml line %d: not valid TOML: %s; %s", pe.Position.Line, cause.msg, fixManifest)
		}
		cause := &syntaxError{msg: oneLine(err.Error()), err: err}
		return nil, nil, refusal.Wrap(refusal.ManifestInvalid, cause, "provider.toml is not valid TOML: %s; %s", cause.msg, fixManifest)
	}
	c := &checker{lines: indexLines(string(data))}
	m := &Manifest{}
	c.unknown("", raw, "schema", "name", "protocol", "secrets", "egress", "budgets", "entrypoints")

	if v, ok := c.required("", raw, "schema"); ok {
		if n, ok := c.integer("schema", v); ok && n != Schema {
			c.add("schema", "schema %d is not supported (this cruxprov reads schema %d)", n, Schema)
		} else if ok {
			m.Schema = int(n)
		}
	}
	if v, ok := c.required("", raw, "name"); ok {
		if s, ok := c.text("name", v); ok {
			want := pep503.Normalize(wheelName)
			if s != want {
				c.add("name", "%q is not the wheel's normalized distribution name %q", s, want)
			} else {
				m.Name = s
			}
		}
	}
	if v, ok := c.required("", raw, "protocol"); ok {
		c.protocol(v, m)
	}
	if v, ok := raw["secrets"]; ok {
		m.Secrets = c.strings("secrets", v, refRe, "a secret ref (letters, digits, . _ - /, starting with a letter or digit)")
	}
	if v, ok := raw["egress"]; ok {
		m.Egress = c.strings("egress", v, egressRe, "an endpoint such as https://api.example/* (no spaces)")
	}
	if m.Secrets == nil {
		m.Secrets = []string{}
	}
	if m.Egress == nil {
		m.Egress = []string{}
	}
	if v, ok := raw["budgets"]; ok {
		c.budgets(v, m)
	}
	if v, ok := c.required("", raw, "entrypoints"); ok {
		c.entrypoints(v, m)
	}
	return m, c, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// unknown reports each key of t not in allowed. One that reads as a
// misspelling of an allowed key t lacks (protocl, timeout-ms) says so,
// and that key, when required, is not reported missing too: the missing
// key was reported at its table's line, which comes first, and named
// "protocol" where the author wrote "protocl", hiding the typo.
func (c *checker) unknown(table string, t map[string]any, allowed ...string) {
	for k := range t {
		if !contains(allowed, k) {
			shown := k
			if !bareKey(k) {
				shown = strconv.Quote(k)
			}
			msg := "unknown key (allowed here: " + strings.Join(allowed, ", ") + ")"
			if m := misspelling(k, t, allowed); m != "" {
				msg = "unknown key: rename it " + m + ", which it misspells (allowed here: " + strings.Join(allowed, ", ") + ")"
				if c.misspelt == nil {
					c.misspelt = map[string]bool{}
				}
				c.misspelt[joinPath(table, m)] = true
			}
			c.problems = append(c.problems, problem{c.lines.line(joinPath(table, k)), joinPath(table, shown), msg})
		}
	}
}

// misspelling returns the key of allowed that t lacks and k reads as a
// misspelling of (case, '-' for '_', or at most two letters added,
// dropped, changed or swapped; one for a key of four letters or less),
// or "" when there is none, or more than one.
func misspelling(k string, t map[string]any, allowed []string) string {
	found := ""
	for _, a := range allowed {
		if _, ok := t[a]; ok {
			continue
		}
		d := editDistance(strings.ReplaceAll(strings.ToLower(k), "-", "_"), a)
		if d == 0 || d == 1 || d == 2 && len(a) > 4 {
			if found != "" {
				return ""
			}
			found = a
		}
	}
	return found
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and swaps of two adjacent bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30 // no key is that long: not worth the table
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

func bareKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !isBare(k[i]) {
			return false
		}
	}
	return true
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func (c *checker) required(table string, t map[string]any, key string) (any, bool) {
	v, ok := t[key]
	if !ok && !c.misspelt[joinPath(table, key)] {
		c.addAt(table, joinPath(table, key), "required key is missing")
	}
	return v, ok
}

func (c *checker) integer(key string, v any) (int64, bool) {
	n, ok := v.(int64)
	if !ok {
		c.add(key, "must be an integer, not %s", tomlType(v))
	}
	return n, ok
}

func (c *checker) text(key string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		c.add(key, "must be a string, not %s", tomlType(v))
		return "", false
	}
	if s == "" {
		c.add(key, "must not be empty")
		return "", false
	}
	if len(s) > maxText {
		c.add(key, "is longer than %d bytes", maxText)
		return "", false
	}
	return s, true
}

func (c *checker) table(key string, v any) (map[string]any, bool) {
	t, ok := v.(map[string]any)
	if !ok {
		c.add(key, "must be a table, not %s", tomlType(v))
	}
	return t, ok
}

func (c *checker) protocol(v any, m *Manifest) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		c.add("protocol", "must be [lowest, highest], two integers")
		return
	}
	var r [2]int
	for i, x := range arr {
		key := "protocol[" + strconv.Itoa(i) + "]"
		n, ok := c.integer(key, x)
		if !ok {
			return
		}
		if n < 1 || n > 1<<20 {
			c.add(key, "protocol version %d is not a positive integer", n)
			return
		}
		r[i] = int(n)
	}
	if r[0] > r[1] {
		c.add("protocol", "range [%d, %d] is inverted (lowest first)", r[0], r[1])
		return
	}
	m.Protocol = r
}

func (c *checker) strings(key string, v any, re *regexp.Regexp, what string) []string {
	arr, ok := v.([]any)
	if !ok {
		c.add(key, "must be an array of strings, not %s", tomlType(v))
		return nil
	}
	out := []string{}
	seen := map[string]bool{}
	for i, x := range arr {
		el := key + "[" + strconv.Itoa(i) + "]"
		s, ok := c.text(el, x)
		if !ok {
			continue
		}
		if !re.MatchString(s) {
			c.add(el, "%q is not %s", s, what)
			continue
		}
		if seen[s] {
			c.add(el, "%q is listed twice", s)
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

func (c *checker) budgets(v any, m *Manifest) {
	t, ok := c.table("budgets", v)
	if !ok {
		return
	}
	c.unknown("budgets", t, "timeout_ms", "output_bytes")
	for _, k := range []string{"timeout_ms", "output_bytes"} {
		x, ok := t[k]
		if !ok {
			continue
		}
		key := "budgets." + k
		n, ok := c.integer(key, x)
		if !ok {
			continue
		}
		if n <= 0 {
			c.add(key, "must be a positive integer, not %d (leave it out for no default)", n)
			continue
		}
		if k == "timeout_ms" {
			m.Budgets.TimeoutMS = n
		} else {
			m.Budgets.OutputBytes = n
		}
	}
}

func (c *checker) entrypoints(v any, m *Manifest) {
	var tables []map[string]any
	switch a := v.(type) {
	case []map[string]any:
		tables = a
	case []any:
		for i, x := range a {
			t, ok := c.table("entrypoints["+strconv.Itoa(i)+"]", x)
			if !ok {
				return
			}
			tables = append(tables, t)
		}
	default:
		c.add("entrypoints", "must be an array of tables ([[entrypoints]]), not %s", tomlType(v))
		return
	}
	if len(tables) == 0 {
		c.add("entrypoints", "lists no entrypoint; a provider has at least one")
		return
	}
	seen := map[string]string{}
	for i, t := range tables {
		p := "entrypoints[" + strconv.Itoa(i) + "]"
		c.unknown(p, t, "name", "object", "interface")
		var e Entrypoint
		good := true
		if x, ok := c.required(p, t, "name"); ok {
			if s, ok := c.text(p+".name", x); ok {
				switch {
				case !nameRe.MatchString(s):
					c.add(p+".name", "%q is not an entrypoint name (letters, digits, . _ -, starting with a letter or digit)", s)
					good = false
				case seen[s] != "":
					c.add(p+".name", "%q is already the name of %s", s, seen[s])
					good = false
				default:
					seen[s] = p
					e.Name = s
				}
			} else {
				good = false
			}
		} else {
			good = false
		}
		if x, ok := c.required(p, t, "object"); ok {
			if s, ok := c.text(p+".object", x); ok && validObject(s) {
				e.Object = s
			} else {
				if ok {
					c.add(p+".object", "%q is not module:attr (dotted Python identifiers)", s)
				}
				good = false
			}
		} else {
			good = false
		}
		if x, ok := c.required(p, t, "interface"); ok {
			if it, ok := c.iface(p+".interface", x); ok {
				e.Interface = it
			} else {
				good = false
			}
		} else {
			good = false
		}
		if good {
			m.Entrypoints = append(m.Entrypoints, e)
		}
	}
}

func validObject(s string) bool {
	mod, attr, ok := strings.Cut(s, ":")
	return ok && identRe.MatchString(mod) && identRe.MatchString(attr)
}

func (c *checker) iface(key string, v any) (Interface, bool) {
	t, ok := c.table(key, v)
	if !ok {
		return Interface{}, false
	}
	c.unknown(key, t, "id", "digest")
	var it Interface
	good := true
	if x, ok := c.required(key, t, "id"); ok {
		if s, ok := c.text(key+".id", x); ok && refRe.MatchString(s) {
			it.ID = s
		} else {
			if ok {
				c.add(key+".id", "%q is not an interface id (letters, digits, . _ - /, starting with a letter or digit)", s)
			}
			good = false
		}
	} else {
		good = false
	}
	if x, ok := c.required(key, t, "digest"); ok {
		if s, ok := x.(string); !ok {
			c.add(key+".digest", "must be a string, not %s", tomlType(x))
			good = false
		} else if d, err := digest.Parse(s); err != nil {
			c.add(key+".digest", "%q is not sha256:<64 lowercase hex>", clip(s))
			good = false
		} else {
			it.Digest = d
		}
	} else {
		good = false
	}
	return it, good
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case []map[string]any:
		return "an array of tables"
	case map[string]any:
		return "a table"
	default:
		return "a date or time"
	}
}
