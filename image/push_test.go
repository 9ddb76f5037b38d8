package image

import "testing"

// TestParsePush: a --push value with or without a tag; a registry's
// port is not a tag; a digest or a malformed name is an error.
func TestParsePush(t *testing.T) {
	for _, c := range []struct{ in, repo, tag string }{
		{"registry.example/acme/echo", "registry.example/acme/echo", ""},
		{"registry.example/acme/echo:1.0", "registry.example/acme/echo", "1.0"},
		{"127.0.0.1:5000/acme/echo", "127.0.0.1:5000/acme/echo", ""},
		{"127.0.0.1:5000/acme/echo:1.0", "127.0.0.1:5000/acme/echo", "1.0"},
		{"localhost:5000/echo", "localhost:5000/echo", ""},
	} {
		r, tag, err := ParsePush(c.in)
		if err != nil || r.Name() != c.repo || tag != c.tag {
			t.Errorf("%s: %s %q %v", c.in, r.Name(), tag, err)
		}
	}
	for _, bad := range []string{"", "registry.example/acme/echo@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "Registry.example/ACME/echo", "registry.example/acme/echo:", "registry.example/acme/echo:a:b"} {
		if r, tag, err := ParsePush(bad); err == nil {
			t.Errorf("%q: %s %q", bad, r.Name(), tag)
		}
	}
}
