package index_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/index"
)

// TestParseURLSaysWhatIsWrong: every malformed index URL is a
// *URLError naming what is wrong with it (https:/host/simple/ and
// http:host said they had no scheme), never a credential, query or
// fragment; a well-formed one parses.
func TestParseURLSaysWhatIsWrong(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"empty", "", "it is empty"},
		{"white space", " https://idx.example/simple/", "white space"},
		{"no scheme", "idx.example/simple/", "no scheme"},
		{"no scheme, slashes", "//idx.example/simple/", "no scheme"},
		{"no scheme, host and port", "idx.example:8080/simple/", "no scheme"},
		{"no scheme, address and port", "127.0.0.1:8080/simple/", "no scheme"},
		{"no scheme, credentials", "u:SEKRET@idx.example/simple/", "no scheme"},
		{"one slash", "https:/idx.example/simple/", "https: is followed by one slash, not two: write https://idx.example/simple/"},
		{"no slash", "http:idx.example", "http: is followed by no slash, not two: write http://idx.example"},
		{"one slash, credentials", "https:/u:SEKRET@idx.example/simple/", "one slash"},
		{"another scheme", "ftp://idx.example/simple/", "its scheme, ftp, is not http or https"},
		{"file scheme", "file:///srv/simple/", "its scheme, file, is not http or https"},
		{"no host", "https://", "it has no host"},
		{"three slashes", "https:///simple/", "it has no host"},
		{"credentials and no host", "https://u:SEKRET@/simple/", "it has no host"},
		{"port and no host", "https://:8443/simple/", "a port and no host"},
		{"port out of range", "https://idx.example:99999/simple/", "its port 99999 is not a port number"},
		{"port zero", "https://idx.example:0/simple/", "its port 0 is not a port number"},
		{"port not a number", "https://idx.example:x/simple/", "invalid port"},
		{"space in host", "https://idx example/simple/", "invalid character"},
		{"bad escape", "https://idx.example/sim%zzple/", "a % not followed by two hex digits"},
		{"query", "https://idx.example/simple/?token=SEKRET", "it has a query"},
		{"empty query", "https://idx.example/simple/?", "it has a query"},
		{"fragment", "https://idx.example/simple/#SEKRET", "it has a fragment"},
		{"password with a slash, read as a port", "https://u:123/SEKRET@idx.example/simple/", "an @ after a /, ?, # or another @"},
		{"password with a slash", "https://u:SEKRET/x@idx.example/simple/", "an @ after a /, ?, # or another @"},
		{"password with a question mark", "https://u:SEKRET?x@idx.example/simple/", "an @ after a /, ?, # or another @"},
		{"password with a hash", "https://u:SEKRET#x@idx.example/simple/", "an @ after a /, ?, # or another @"},
		{"password with an @ and a slash", "https://u:p@SEKRET/x@idx.example/simple/", "an @ after a /, ?, # or another @"},
		{"password with an @", "https://u:p@SEKRET@idx.example/simple/", "an @ after a /, ?, # or another @"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := index.ParseURL(c.in)
			var ue *index.URLError
			if !errors.As(err, &ue) {
				t.Fatalf("ParseURL(%q) = %v, want a *URLError", c.in, err)
			}
			if !strings.Contains(ue.Problem, c.want) || strings.Contains(ue.Problem, "\n") {
				t.Errorf("ParseURL(%q): problem %q, want one line with %q", c.in, ue.Problem, c.want)
			}
			if strings.Contains(err.Error(), "SEKRET") {
				t.Errorf("ParseURL(%q) = %q: a secret is printed", c.in, err)
			}
			if _, err := index.New(c.in, index.Options{}); !errors.As(err, &ue) {
				t.Errorf("New(%q) = %v, want ParseURL's *URLError", c.in, err)
			}
		})
	}
	for _, in := range []string{"https://idx.example/simple/", "http://127.0.0.1:8080/simple", "HTTPS://u:p@idx.example:443/", "http://[::1]:3141/root/pypi/+simple/"} {
		t.Run("ok "+in, func(t *testing.T) {
			if u, err := index.ParseURL(in); err != nil || u.Host == "" {
				t.Errorf("ParseURL(%q) = %v, %v", in, u, err)
			}
		})
	}
}
