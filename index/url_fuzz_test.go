package index_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/index"
)

// FuzzParseURL: ParseURL never panics, refuses with a one-line
// *URLError or returns an http(s) URL with a host, and never shows what
// a user meant as a secret: the characters before an @ (a password,
// even one with an unescaped / ? or #, which move the @ out of the user
// information), or after a ? or # (a query or fragment), neither in its
// error nor in the redacted form of the URL it returns.
func FuzzParseURL(f *testing.F) {
	for _, s := range [][2]string{
		{"https://u:", "@idx.example/simple/"},
		{"https://__token__:abc/", "@idx.example/simple/"},
		{"https://u:123/", "@idx.example/simple/"},
		{"https://u:pa?", "@idx.example/simple/"},
		{"https://u:pa#", "@idx.example/simple/"},
		{"https://u:pa ", "@idx.example/simple/"},
		{"https:/", "@idx.example/simple/"},
		{"http:", "@idx.example"},
		{"https://idx.example/simple/?token=", ""},
		{"https://idx.example/simple/#", ""},
		{"https://idx.example:", "@x/"},
		{"https://[", "@idx.example/"},
		{"https://u:", "/rest@idx.example/simple/"},
		{"https://u:", "?rest@idx.example/simple/"},
		{"https://u:", "#rest@idx.example/simple/"},
		{"https://u:", " rest@idx.example/simple/"},
		{"https://u:", "%zz@idx.example/simple/"},
		{"http:", ":@"},
		{"https://", ":@idx.example/simple/"},
		{"https://", "@idx.example/simple/"},
		{"https://u:%zz", "@idx.example/"},
	} {
		f.Add(s[0], s[1])
	}
	// What a user meant to keep secret goes between pre and post: the
	// same letters each time, found in nothing else ParseURL says.
	const secret = "QZXJVKWQ"
	f.Fuzz(func(t *testing.T, pre, post string) {
		raw := pre + secret + post
		u, err := index.ParseURL(raw)
		if err != nil {
			var ue *index.URLError
			if !errors.As(err, &ue) {
				t.Fatalf("ParseURL(%q) = %v, want a *URLError", raw, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("ParseURL(%q): %q is not one line", raw, err)
			}
		} else if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("ParseURL(%q) = %q: not an index URL", raw, u)
		}
		// A secret is what comes before an @, or after a ? or # with no
		// @ between (after the last @ comes the host, which is shown);
		// a user name before a password that is not empty is shown.
		d := strings.LastIndexAny(pre, "?#@")
		if strings.Contains(strings.ToUpper(pre+post), secret) || !strings.Contains(post, "@") && (d < 0 || pre[d] == '@') {
			return
		}
		if i := strings.IndexAny(post, ":@/?#"); i >= 0 && post[i] == ':' && i+1 < len(post) && post[i+1] != '@' {
			return
		}
		shown := ""
		if err != nil {
			shown = err.Error()
		} else {
			shown = index.Redact(u.String())
		}
		if strings.Contains(strings.ToUpper(shown), secret) {
			t.Fatalf("ParseURL(%q) shows the secret %q: %q", raw, secret, shown)
		}
	})
}
