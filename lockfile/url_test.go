package lockfile

import (
	"net/url"
	"strings"
	"testing"
)

// simpleURLCases are file URLs with whether simpleURLName takes them;
// every one is also checked against net/url (checkSimpleURLName).
var simpleURLCases = []struct {
	url    string
	simple bool
}{
	{"https://files.example/pkg/a-1.0-py3-none-any.whl", true},
	{"http://127.0.0.1:8080/a/b/a-1.0-py3-none-any.whl", true},
	{"https://files.example/a-1.0+local.1-py3-none-any.whl", false}, // '+' goes through url.Parse
	{"https://files.example/a%2B1.whl", false},
	{"https://user:pw@files.example/a.whl", false},
	{"https://files.example/a.whl?sig=1", false},
	{"https://files.example/a.whl#sha256=00", false},
	{"https://[::1]/a.whl", false},
	{"https://files.example:x/a.whl", false},
	{"https://files.example", false},
	{"https:///a.whl", false},
	{"HTTPS://files.example/a.whl", false},
	{"file:///srv/wheels/a.whl", false},
	{"https://files.example/dir/", true},
	{"https://files.example/ a.whl", false},
	{"https://fi_les.example/a.whl", false},
	{"https://files.example:/a.whl", true},
}

func TestSimpleURLName(t *testing.T) {
	for _, c := range simpleURLCases {
		t.Run(c.url, func(t *testing.T) {
			if _, ok := simpleURLName(c.url); ok != c.simple {
				t.Errorf("simpleURLName(%q) ok = %v, want %v", c.url, ok, c.simple)
			}
			checkSimpleURLName(t, c.url)
		})
	}
}

// checkSimpleURLName fails t when simpleURLName answers s differently
// from the url.Parse path of fileURLName.
func checkSimpleURLName(t *testing.T, s string) {
	t.Helper()
	name, ok := simpleURLName(s)
	if !ok {
		return
	}
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("simpleURLName(%q) = %q, but url.Parse refuses it: %v", s, name, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Opaque != "" || u.Host == "" || u.User != nil {
		t.Fatalf("simpleURLName(%q) = %q, but url.Parse reads %#v", s, name, u)
	}
	seg := u.EscapedPath()
	seg = seg[strings.LastIndexByte(seg, '/')+1:]
	want, err := url.PathUnescape(seg)
	if err != nil || want != name {
		t.Fatalf("simpleURLName(%q) = %q, url.Parse's last segment %q (%v)", s, name, want, err)
	}
}
