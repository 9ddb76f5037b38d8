package invoke

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
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

// TestRedactOnePass: redaction is one pass over the original text. A
// secret that is a part of the marker ("e", "red", "]") does not make
// markers nest; secrets that share bytes ("abc" and "bcd" in "abcd", or
// "aa" in "aaa") are one range, not one redacted and the rest of the other
// left ("x[redacted]dx" kept the "d" of "bcd"); and the stderr tail's cut
// ends are matched against the text, not against the markers already
// written (a secret ending in "[r" took the start of a marker for its own:
// "[redacted]edacted]").
func TestRedactOnePass(t *testing.T) {
	for _, c := range []struct {
		secrets []string
		in      string
		cut     bool
		text    string // "" when only the tail is checked
		tail    string
	}{
		{[]string{"e", "red", "act", "[redacted]"}, "the red act: [redacted]", false,
			"th[redacted] [redacted] [redacted]: [redacted]", "th[redacted] [redacted] [redacted]: [redacted]"},
		// The harness redacted this message before: its markers are
		// markers, not text holding "e".
		{[]string{"e"}, "th[redacted] h[redacted]r[redacted]", false, "th[redacted] h[redacted]r[redacted]", "th[redacted] h[redacted]r[redacted]"},
		// A match that overlaps a marker takes all of it.
		{[]string{"d]x"}, "a [redacted]x b", false, "a [redacted] b", "a [redacted] b"},
		// A window cut through a marker: its ends are markers too.
		{[]string{"e", "act"}, "acted] the end [reda", true, "[redacted][redacted]d] th[redacted] [redacted]nd [r[redacted]da", "acted] th[redacted] [redacted]nd [reda"},
		{[]string{"abc", "bcd"}, "xabcdx", false, "x[redacted]x", "x[redacted]x"},
		{[]string{"aa"}, "xaaax aa", false, "x[redacted]x [redacted]", "x[redacted]x [redacted]"},
		{[]string{"s3cr3t", "t"}, "ts3cr3t", false, "[redacted][redacted]", "[redacted][redacted]"},
		{[]string{"abcd[", "x[r"}, "d[q", true, "d[q", "[redacted]q"},
		{[]string{"q]x", "]abcd"}, "w]ab", true, "w]ab", "w[redacted]"},
		{[]string{"SEKRIT"}, "KRIT then SEKRIT then SEK", true, "KRIT then [redacted] then SEK", "[redacted] then [redacted] then [redacted]"},
	} {
		t.Run(fmt.Sprintf("%q in %q", c.secrets, c.in), func(t *testing.T) {
			r := newRedactor(c.secrets)
			if got := r.text(c.in); got != c.text {
				t.Errorf("text(%q) = %q, want %q", c.in, got, c.text)
			}
			if got := r.tail(c.in, c.cut); got != c.tail {
				t.Errorf("tail(%q, %v) = %q, want %q", c.in, c.cut, got, c.tail)
			}
		})
	}
	// A window inside a secret longer than it (stderr cut at both ends
	// within it: its middle was kept whole).
	var sb strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&sb, "%04d-", i)
	}
	long := sb.String()
	if got := newRedactor([]string{long}).tail(long[100:4196], true); got != redacted {
		t.Errorf("a window inside a secret: %q…", got[:20])
	}
	// A secret with U+FFFD in it does not appear where invalid bytes
	// stood, which the ledger writes as U+FFFD.
	if got := newRedactor([]string{"\uFFFDab"}).text("x\xffab"); got != "x[redacted]" {
		t.Errorf("invalid bytes: %q", got)
	}
}

// FuzzRedact: for any text and two secrets, text and tail redact every
// byte a brute-force search says must go (every occurrence of every form
// of each secret; for the tail, the longest cut form at each end) and no
// other, but for the markers already in the text (which a range takes
// whole or not at all, and none cuts), each range once by the marker,
// and keep every other byte as it was.
func FuzzRedact(f *testing.F) {
	f.Add("the red act: [redacted]", "e", "red", false)
	f.Add("xabcdx", "abc", "bcd", true)
	f.Add("d[q and more d[q", "abcd[", "x[r", true)
	f.Add("KRIT then SEKRIT then SEK", "SEKRIT", "T", true)
	f.Add("x\xffab é", "\uFFFDab", "é", false)
	f.Add("acted] th[redacted] [redacted]x [reda", "e", "d]x", true)
	f.Add("cdefgh", "abcdefghij", "", true)
	f.Add(`{"v":"a\"b"} a%22b`, `a"b`, "", false)
	f.Fuzz(func(t *testing.T, s, a, b string, cut bool) {
		if len(s) > 2048 || len(a) > 64 || len(b) > 64 {
			return
		}
		r := newRedactor([]string{a, b})
		for _, tail := range []bool{false, true} {
			var sp []span
			var out string
			if tail {
				sp, out = r.spans(s, cut, true), r.tail(s, cut)
			} else {
				sp, out = r.spans(s, false, false), r.text(s)
			}
			// What must go, byte by byte.
			must := make([]bool, len(s))
			cover := func(lo, hi int) {
				for i := lo; i < hi; i++ {
					must[i] = true
				}
			}
			for _, f := range r.forms {
				for i := 0; i+len(f) <= len(s); i++ {
					if s[i:i+len(f)] == f {
						cover(i, i+len(f))
					}
				}
				if tail && cut && len(s) < len(f) && strings.Contains(f, s) {
					cover(0, len(s))
				}
				if tail {
					for k := min(len(f)-1, len(s)); k > 0 && cut; k-- {
						if s[:k] == f[len(f)-k:] {
							cover(0, k)
							break
						}
					}
					for k := min(len(f)-1, len(s)); k > 0; k-- {
						if s[len(s)-k:] == f[:k] {
							cover(len(s)-k, len(s))
							break
						}
					}
				}
			}
			// The markers already in s: a match inside one is no
			// secret's; a range that overlaps one takes all of it.
			marks := markers(s, tail && cut, tail)
			inMark := make([]bool, len(s))
			for _, m := range marks {
				for i := m.lo; i < m.hi; i++ {
					inMark[i] = true
				}
			}
			got := make([]bool, len(s))
			prev := -1
			for _, x := range sp {
				if x.lo >= x.hi || x.lo < prev || x.hi > len(s) {
					t.Fatalf("spans %v of %q", sp, s)
				}
				prev = x.hi
				for i := x.lo; i < x.hi; i++ {
					got[i] = true
				}
				for _, m := range marks {
					if m.lo < x.lo && x.lo < m.hi || m.lo < x.hi && x.hi < m.hi {
						t.Fatalf("text %q, secrets %q %q: range %v cuts the marker at %v", s, a, b, x, m)
					}
				}
			}
			// A range takes the whole characters it touches (a form
			// that is not UTF-8 matches a part of one).
			if utf8.ValidString(s) {
				for i := 0; i < len(s); {
					_, n := utf8.DecodeRuneInString(s[i:])
					if slices.Contains(must[i:i+n], true) {
						cover(i, i+n)
					}
					i += n
				}
			}
			for i := range must {
				if must[i] && !got[i] && !inMark[i] {
					t.Fatalf("text %q, secrets %q %q, tail %v cut %v: byte %d kept", s, a, b, tail, cut, i)
				}
				if got[i] && !must[i] && !inMark[i] && utf8.ValidString(s) {
					t.Fatalf("text %q, secrets %q %q, tail %v cut %v: byte %d redacted", s, a, b, tail, cut, i)
				}
			}
			if !utf8.ValidString(out) {
				t.Fatalf("not UTF-8: %q", out)
			}
			if !utf8.ValidString(s) {
				continue
			}
			var want strings.Builder
			at := 0
			for _, x := range sp {
				kept := s[at:x.lo]
				for _, f := range r.forms {
					for i := 0; i+len(f) <= len(kept); i++ {
						if kept[i:i+len(f)] == f && slices.Contains(inMark[at+i:at+i+len(f)], false) {
							t.Fatalf("%q kept in %q", f, kept)
						}
					}
				}
				want.WriteString(kept + redacted)
				at = x.hi
			}
			want.WriteString(s[at:])
			if out != want.String() {
				t.Fatalf("text %q, secrets %q %q, tail %v cut %v: got %q, want %q", s, a, b, tail, cut, out, want.String())
			}
		}
	})
}
