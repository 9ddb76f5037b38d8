package lockfile

import (
	"testing"

	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

func FuzzParseLock(f *testing.F) {
	f.Add(lockOf(good))
	f.Add(benchLock(3))
	f.Add(lockOf("packages = []\n"))
	f.Add([]byte("lock-version = \"2.0\"\n"))
	f.Add(lockOf("[[packages]]\nname = \"a\"\nvcs = { type = \"git\", url = \"https://x\", commit-id = \"1\" }\n"))
	f.Add(lockOf("[[packages]]\nname = \"a\"\nversion = \"1\"\nsdist = { url = \"https://x/a-1.tar.gz\" }\n[[packages]]\nname = \"a\"\nversion = \"2\"\n"))
	f.Add(lockOf("environments = [\"os_name == 'nt'\"]\nrequires-python = \"<3\"\npackages = []\n"))
	ps := []*platform.Platform{}
	for _, n := range []string{"cp312-manylinux_2_28_x86_64", "cp39-macosx_11_0_arm64", "cp313-win_amd64"} {
		p, err := platform.Lookup(n)
		if err != nil {
			f.Fatal(err)
		}
		ps = append(ps, p)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, _, err := Parse(data)
		if err != nil {
			if c := refusal.CodeOf(err); c != refusal.LockInvalid && c != refusal.LockVersionUnsupported {
				t.Fatalf("parse error without a lock code: %v", err)
			}
			return
		}
		reps, err := ResolveAll(l, ps, Options{})
		if reps == nil {
			t.Fatalf("no reports: %v", err)
		}
		for _, r := range reps {
			res, err := r.Resolution()
			if err != nil {
				if refusal.CodeOf(err) == "" {
					t.Fatalf("untyped resolution error: %v", err)
				}
				continue
			}
			if _, err := res.Digest(); err != nil {
				t.Fatalf("digest of an accepted resolution: %v", err)
			}
		}
	})
}

// FuzzSimpleURLName holds the fast path of a file URL to net/url: where
// simpleURLName answers, url.Parse accepts the URL as http(s) with a
// host and an escaped path whose last segment is that answer.
func FuzzSimpleURLName(f *testing.F) {
	for _, s := range simpleURLCases {
		f.Add(s.url)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkSimpleURLName(t, s)
	})
}
