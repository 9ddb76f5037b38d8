package pipeline

import (
	"strconv"
	"testing"

	"github.com/cruxible/cruxprov/pep440"
)

// TestListVersions: a root wheel's version the index does not list is
// refused naming the versions it does, newest first by PEP 440 (1.10
// after 1.9, 2.0rc1 before 2.0), the ten newest and how many more.
func TestListVersions(t *testing.T) {
	vs := map[string]pep440.Version{}
	for _, s := range []string{"1.9", "1.10", "2.0rc1", "2.0", "0.1"} {
		v, err := pep440.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		vs[v.String()] = v
	}
	if got, want := listVersions(vs), "2.0, 2.0rc1, 1.10, 1.9, 0.1"; got != want {
		t.Errorf("listVersions = %q, want %q", got, want)
	}
	for i := 0; i < 20; i++ {
		v, _ := pep440.Parse("3." + strconv.Itoa(i))
		vs[v.String()] = v
	}
	if got, want := listVersions(vs), "3.19, 3.18, 3.17, 3.16, 3.15, 3.14, 3.13, 3.12, 3.11, 3.10, and 15 more"; got != want {
		t.Errorf("listVersions = %q, want %q", got, want)
	}
}
