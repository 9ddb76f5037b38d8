package canonical

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

// Differential tests against Node.js, whose JSON.parse and JSON.stringify
// implement the ECMAScript number and string rules RFC 8785 adopts. They
// skip when node is not installed (CI installs nodejs, .ci/apt-packages).

// nodeJCS is the reference canonicalizer run by node: one JSON text per
// input line (JSON-encoded as a string), one canonical text (or "!" plus
// the error) per output line, JSON-encoded.
const nodeJCS = `
const jcs = (v) => v === null || typeof v !== "object" ? JSON.stringify(v)
  : Array.isArray(v) ? "[" + v.map(jcs).join(",") + "]"
  : "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + jcs(v[k])).join(",") + "}";
const lines = require("fs").readFileSync(0, "utf8").split("\n").filter((l) => l);
const out = lines.map((l) => { try { return JSON.stringify(jcs(JSON.parse(JSON.parse(l)))); } catch (e) { return JSON.stringify("!" + e.message); } });
process.stdout.write(out.join("\n") + "\n");
`

func runNode(t *testing.T, script string, inputs []string) []string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	var in bytes.Buffer
	for _, s := range inputs {
		b, _ := json.Marshal(s)
		in.Write(b)
		in.WriteByte('\n')
	}
	cmd := exec.Command(node, "-e", script)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.Bytes())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("node returned %d lines for %d inputs", len(lines), len(inputs))
	}
	res := make([]string, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &res[i]); err != nil {
			t.Fatalf("node output %q: %v", l, err)
		}
	}
	return res
}

// TestNumbersAgainstNode writes random doubles (random bit patterns, so
// every exponent range, subnormals included) and random decimal spellings,
// and compares with node.
func TestNumbersAgainstNode(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var inputs []string
	var buf [8]byte
	for len(inputs) < 20000 {
		binary.LittleEndian.PutUint64(buf[:], r.Uint64())
		f := math.Float64frombits(binary.LittleEndian.Uint64(buf[:]))
		if math.IsInf(f, 0) || math.IsNaN(f) {
			continue
		}
		inputs = append(inputs, fmt.Sprintf("%.17g", f))
		// Decimal spellings with many digits and exponents near the edges
		// of the plain-notation range.
		mant := fmt.Sprintf("%d.%d", r.IntN(1000), r.Uint64())
		inputs = append(inputs, fmt.Sprintf("%se%d", mant, r.IntN(50)-25))
		inputs = append(inputs, fmt.Sprintf("-%d", r.Uint64()))
	}
	want := runNode(t, nodeJCS, inputs)
	bad := 0
	for i, in := range inputs {
		got, err := Transform([]byte(in))
		if err != nil || string(got) != want[i] {
			t.Errorf("%s: got %s (%v), node %s", in, got, err, want[i])
			if bad++; bad > 10 {
				t.FailNow()
			}
		}
	}
}

// TestDocumentsAgainstNode canonicalizes random documents (random
// structure, keys and strings from a palette with controls, escapes,
// non-BMP characters and characters whose UTF-8 and UTF-16 orders differ)
// and compares with node.
func TestDocumentsAgainstNode(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	palette := []rune{'a', 'b', 'Z', '0', ' ', '"', '\\', '/', '\n', '\t', 0, 0x1f, 0x7f, 0xe9, 0x2028,
		0x20ac, 0xfb33, 0xff5e, 0x1f600, 0x10000, 0x10fffd, 0xd7ff, 0xe000}
	str := func() string {
		var b strings.Builder
		for n := r.IntN(6); n > 0; n-- {
			b.WriteRune(palette[r.IntN(len(palette))])
		}
		return b.String()
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := r.IntN(8); {
		case depth > 3 || k < 2:
			return str()
		case k == 2:
			return math.Float64frombits(r.Uint64()>>2 | 0x3000000000000000)
		case k == 3:
			return []any{nil, true, false}[r.IntN(3)]
		case k < 6:
			a := make([]any, r.IntN(4))
			for i := range a {
				a[i] = value(depth + 1)
			}
			return a
		default:
			m := map[string]any{}
			for n := r.IntN(6); n > 0; n-- {
				m[str()] = value(depth + 1)
			}
			return m
		}
	}
	var inputs []string
	for range 3000 {
		b, err := json.MarshalIndent(value(0), "", " ") // escapes non-ASCII as \u sometimes
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(b) {
			t.Fatal("generator produced invalid UTF-8")
		}
		inputs = append(inputs, string(b))
	}
	want := runNode(t, nodeJCS, inputs)
	bad := 0
	for i, in := range inputs {
		got, err := Transform([]byte(in))
		if err != nil || string(got) != want[i] {
			t.Errorf("%s:\n got %q (%v)\nnode %q", in, got, err, want[i])
			if bad++; bad > 5 {
				t.FailNow()
			}
		}
	}
}
