package invoke

import (
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
