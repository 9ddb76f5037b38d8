package index_test

import (
	"testing"

	"github.com/cruxible/cruxprov/index"
)

// TestWithScheme: the URL with the other scheme keeps its port, naming
// the old scheme's default where it had none, and its user information;
// what is no http(s) URL with a host is left as it is.
func TestWithScheme(t *testing.T) {
	for _, c := range []struct{ in, s, want string }{
		{"http://127.0.0.1:8443/simple/", "https", "https://127.0.0.1:8443/simple/"},
		{"https://idx.example/simple/", "http", "http://idx.example:443/simple/"},
		{"http://Idx.Example/simple/", "https", "https://Idx.Example:80/simple/"},
		{"http://USER:PASSWORD@idx.example:8080/simple/", "https", "https://USER:PASSWORD@idx.example:8080/simple/"},
		{"http://[::1]/simple/", "https", "https://[::1]:80/simple/"},
		{"file:///srv/simple/", "https", "file:///srv/simple/"},
		{"idx.example/simple/", "https", "idx.example/simple/"},
	} {
		t.Run(c.in, func(t *testing.T) {
			if got := index.WithScheme(c.in, c.s); got != c.want {
				t.Errorf("WithScheme(%q, %q) = %q, want %q", c.in, c.s, got, c.want)
			}
		})
	}
}
