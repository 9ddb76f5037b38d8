package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestEveryCodeIsRaised: each refusal code (DESIGN §2) is named, as
// refusal.<Constant>, by some code outside the refusal package and its
// tests, so docs/refusals.md (which lists every code, what raises it and
// what to do) documents no code nothing can raise, and a code whose last
// raiser is removed goes from the constant set and the doc with it.
func TestEveryCodeIsRaised(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	consts, err := os.ReadFile(filepath.Join(root, "refusal", "codes.go"))
	if err != nil {
		t.Fatal(err)
	}
	byValue := map[refusal.Code]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*([A-Z]\w*)\s+Code\s*=\s*"([a-z_]+)"`).FindAllStringSubmatch(string(consts), -1) {
		byValue[refusal.Code(m[2])] = m[1]
	}
	used := map[string]bool{}
	use := regexp.MustCompile(`\brefusal\.([A-Z]\w*)\b`)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "refusal" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range use.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range refusal.Codes() {
		name, ok := byValue[c]
		if !ok {
			t.Errorf("no constant in refusal/codes.go is %q", c)
			continue
		}
		if !used[name] {
			t.Errorf("refusal.%s (%s) is raised nowhere outside the refusal package", name, c)
		}
	}
}
