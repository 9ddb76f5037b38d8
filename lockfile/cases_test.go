package lockfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// lockCase is one testdata/{parse,resolve}/*.txtar file: a header of
// key=value expectations (other header lines are comments) and the lock
// as the file pylock.toml. See testdata/README.md.
type lockCase struct {
	lock []byte
	hdr  map[string][]string
}

func (c lockCase) get(k string) string {
	if v := c.hdr[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// readCase reads a txtar file holding exactly one file, pylock.toml.
func readCase(t *testing.T, path string) lockCase {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "-- pylock.toml --\n"
	head, lock, ok := strings.Cut(string(b), marker)
	if !ok || strings.Contains(lock, "\n-- ") {
		t.Fatalf("%s: want a header and one file, pylock.toml", path)
	}
	c := lockCase{lock: []byte(lock), hdr: map[string][]string{}}
	for _, line := range strings.Split(head, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.Contains(k, " ") {
			c.hdr[k] = append(c.hdr[k], v)
		}
	}
	return c
}

func readCases(t *testing.T, dir string) map[string]lockCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases in testdata/%s: %v", dir, err)
	}
	out := map[string]lockCase{}
	for _, f := range files {
		out[strings.TrimSuffix(filepath.Base(f), ".txtar")] = readCase(t, f)
	}
	return out
}

// lockCases are every case of testdata/parse and testdata/resolve.
func lockCases(t *testing.T) map[string]lockCase {
	out := map[string]lockCase{}
	for _, dir := range []string{"parse", "resolve"} {
		for name, c := range readCases(t, dir) {
			out[dir+"/"+name] = c
		}
	}
	return out
}

// TestParseCases: each testdata/parse case is refused with its wantErr
// code, or parses with exactly its wantWarn warnings (by key, in order).
func TestParseCases(t *testing.T) {
	for name, c := range readCases(t, "parse") {
		t.Run(name, func(t *testing.T) {
			_, warns, err := Parse(c.lock)
			if code := c.get("wantErr"); code != "" {
				if !errors.Is(err, refusal.Code(code)) {
					t.Fatalf("got %v, want %s", err, code)
				}
				if m := c.get("mention"); m != "" && !strings.Contains(err.Error(), m) {
					t.Errorf("detail %q does not name %q", err, m)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, w := range warns {
				keys = append(keys, w.Key)
			}
			if want := c.hdr["wantWarn"]; !slices.Equal(keys, want) {
				t.Errorf("warnings %q, want %q", keys, want)
			}
		})
	}
}

// TestResolveCases: each testdata/resolve case parses, and resolving it
// for its platform is refused with its wantErr code naming mention, or
// gives exactly its want=NAME FILENAME wheels.
func TestResolveCases(t *testing.T) {
	for name, c := range readCases(t, "resolve") {
		t.Run(name, func(t *testing.T) {
			l, _, err := Parse(c.lock)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var opts Options
			if e, ok := c.hdr["extras"]; ok {
				opts.Extras = strings.Fields(e[0])
			}
			res, err := Resolve(l, preset(t, c.get("platform")), opts)
			if code := c.get("wantErr"); code != "" {
				if !errors.Is(err, refusal.Code(code)) {
					t.Fatalf("got %v, want %s", err, code)
				}
				if m := c.get("mention"); !strings.Contains(err.Error(), m) {
					t.Errorf("detail %q does not name %q", err, m)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range res.Packages {
				got = append(got, p.Name+" "+p.Filename)
			}
			if want := c.hdr["want"]; !slices.Equal(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}
