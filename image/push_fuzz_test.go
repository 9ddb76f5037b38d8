package image

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
)

// FuzzParsePush: any --push destination parses or is refused, never a
// panic; one that parses names the same repository and tag when written
// back.
func FuzzParsePush(f *testing.F) {
	for _, s := range []string{"registry.example/acme/echo", "registry.example/acme/echo:1.0", "127.0.0.1:5000/acme/echo", "127.0.0.1:5000/acme/echo:t", "a/b@sha256:" + hex64, "", ":", "UPPER/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		repo, tag, err := ParsePush(s)
		if err != nil {
			return
		}
		back := repo.Name()
		if tag != "" {
			back += ":" + tag
		}
		again, againTag, err := ParsePush(back)
		if err != nil || again.Name() != repo.Name() || againTag != tag {
			t.Fatalf("%q -> %q %q -> %q: %q %q %v", s, repo.Name(), tag, back, again.Name(), againTag, err)
		}
	})
}

// FuzzErrorBody: whatever a registry (or a proxy before it) answers an
// error with, what of it a refusal carries is short, one line and free of
// control characters: a registry error's codes, messages and details, or
// the first line of a text answer.
func FuzzErrorBody(f *testing.F) {
	for _, s := range []string{
		`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"x"}}]}`,
		`{"errors":[{"code":"DENIED","message":"a\nb\u001b[31mred","detail":"x\u202ey"}]}`,
		"<html><body>503</body></html>",
		"upstream timed out\r\nmore",
		"\xff\xfe",
		`{"errors":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out := errorBody(b)
		if len(out) > 8<<10 {
			t.Fatalf("%d bytes kept", len(out))
		}
		var e struct {
			Errors []struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Detail  any    `json:"detail"`
			} `json:"errors"`
		}
		texts := []string{string(out)}
		if json.Unmarshal(out, &e) == nil && len(e.Errors) > 0 {
			if len(e.Errors) > maxDiagnostics {
				t.Fatalf("%d diagnostics kept", len(e.Errors))
			}
			texts = texts[:0]
			for _, d := range e.Errors {
				texts = append(texts, d.Code, d.Message)
				if s, ok := d.Detail.(string); ok {
					texts = append(texts, s)
				} else if d.Detail != nil {
					t.Fatalf("a detail of type %T kept", d.Detail)
				}
			}
		}
		for _, s := range texts {
			if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0 {
				t.Fatalf("%q keeps a control character: %q", b, s)
			}
		}
	})
}
