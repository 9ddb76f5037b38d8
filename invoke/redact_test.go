package invoke

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestRedactText: every text form of every secret goes, each in one
// pass: a one-letter secret beside a longer one does not redact the
// letters of the marker the longer one left.
func TestRedactText(t *testing.T) {
	r := newRedactor([]string{"t", "s3cr3t"})
	for in, want := range map[string]string{
		"https://x/?token=s3cr3t": "h[redacted][redacted]ps://x/?[redacted]oken=[redacted]",
		"no secret here":          "no secre[redacted] here",
		"s3cr3ts3cr3t":            "[redacted][redacted]",
		"":                        "",
	} {
		if got := r.text(in); got != want {
			t.Errorf("text(%q) = %q, want %q", in, got, want)
		}
	}
	if got := newRedactor(nil).text("as it is"); got != "as it is" {
		t.Errorf("no secrets: %q", got)
	}
	// The JSON-escaped form of a value is redacted too.
	if got := newRedactor([]string{`a"b`}).text(`{"v":"a\"b"}`); got != `{"v":"[redacted]"}` {
		t.Errorf("escaped form: %q", got)
	}
	// Percent-encoded, as a token rides in an egress URL.
	r = newRedactor([]string{"tok+AbC/xyz== ü"})
	for _, in := range []string{
		"https://api.example/v1?token=tok%2BAbC%2Fxyz%3D%3D+%C3%BC",
		"https://api.example/v1?token=tok%2BAbC%2Fxyz%3D%3D%20%C3%BC",
		"https://api.example/v1?token=tok%2bAbC%2fxyz%3d%3d+%c3%bc",
		"https://api.example/v1/tok+AbC%2Fxyz==%20%C3%BC/x",
		"https://api.example/v1/tok+AbC/xyz==%20%C3%BC/x",
	} {
		if got := r.text(in); got == in || !strings.Contains(got, redacted) {
			t.Errorf("text(%q) = %q", in, got)
		}
	}
}

// TestRedactPythonForms: every encoding docs/executor.md promises is
// redacted, each form written by a real Python (the provider's side) as a
// provider would put a secret in a message or a URL: raw, repr and ascii
// (whichever quote Python picks), json.dumps with and without ASCII
// escapes, urllib.parse.quote (path: "/" kept), quote(safe=""),
// quote_plus and urlencode (query), and each percent-encoding with
// lower-case hex.
func TestRedactPythonForms(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	values := []string{
		"tok+AbC/xyz== ü", "a/b+c", "p@ss:w;rd$&,=/x", "al\"pha\\back\nslash-é☃-α",
		"b'eta-\u2028-t0k3n-\u00ff\\x", `both'and"`, "tab\there\x7f", "emoji😀-\u00a0-\u00ad-end",
	}
	const script = `
import json, sys, urllib.parse
out = []
for v in json.load(sys.stdin):
    forms = {"raw": v, "repr": repr(v)[1:-1], "ascii": ascii(v)[1:-1],
             "json": json.dumps(v)[1:-1], "json-utf8": json.dumps(v, ensure_ascii=False)[1:-1],
             "quote": urllib.parse.quote(v), "quote-nosafe": urllib.parse.quote(v, safe=""),
             "quote_plus": urllib.parse.quote_plus(v), "urlencode": urllib.parse.urlencode({"t": v})[2:]}
    for k in ("quote", "quote-nosafe", "quote_plus"):
        forms[k + "-lower"] = __import__("re").sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), forms[k])
    out.append(forms)
json.dump(out, sys.stdout)
`
	in, _ := json.Marshal(values)
	cmd := exec.Command(py, "-I", "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	b, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var forms []map[string]string
	if err := json.Unmarshal(b, &forms); err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		r := newRedactor([]string{v})
		for name, f := range forms[i] {
			if got := r.text("<" + f + ">"); got != "<"+redacted+">" {
				t.Errorf("%q: Python's %s form %q: redacted to %q", v, name, f, got)
			}
		}
	}
}

// TestTailCutOnlyWhereCut: a stderr kept whole from its first byte is not
// redacted at its start for beginning with the end of a secret (a secret
// ending in "T" made "Traceback …" read "[redacted]raceback …"); a window
// that stderr's earlier bytes were dropped from is, as is an end cut
// mid-secret.
func TestTailCutOnlyWhereCut(t *testing.T) {
	r := newRedactor([]string{"SEKRIT"})
	const trace = "Traceback (most recent call last):\nRuntimeError: SEKRIT\n"
	m := &meter{budget: 1 << 20, spent: make(chan struct{})}
	whole := &sink{m: m, limit: StderrTail + 4096}
	_, _ = whole.Write([]byte(trace))
	b, cut := whole.tail(StderrTail)
	if got, want := r.tail(string(b), cut), "Traceback (most recent call last):\nRuntimeError: [redacted]\n"; got != want {
		t.Errorf("whole stderr: %q, want %q", got, want)
	}
	// The same text at the end of a longer stderr: its start may be the
	// rest of a secret the window cut.
	long := &sink{m: m, limit: StderrTail + 4096}
	_, _ = long.Write([]byte(strings.Repeat("x", 3*StderrTail) + "SE"))
	_, _ = long.Write([]byte("KRIT" + strings.Repeat("y", StderrTail-len("KRIT")-len(trace)) + trace))
	b, cut = long.tail(StderrTail)
	if !cut || !strings.HasPrefix(string(b), "KRIT") {
		t.Fatalf("tail of a long stderr: cut %v, %q…", cut, b[:8])
	}
	if got := r.tail(string(b), cut); !strings.HasPrefix(got, "[redacted]yyy") {
		t.Errorf("cut window: %q…", got[:30])
	}
	// An end cut mid-secret is redacted whether or not the start is.
	if got := r.tail("Traceback\nvalue SEK", false); got != "Traceback\nvalue [redacted]" {
		t.Errorf("end cut: %q", got)
	}
}
