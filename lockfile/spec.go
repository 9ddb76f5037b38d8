package lockfile

import "github.com/cruxible/cruxprov/pep440"

// compiledSpec is a parsed requires-python specifier set.
type compiledSpec struct{ set pep440.SpecifierSet }

func compileSpec(s string) (*compiledSpec, error) {
	set, err := pep440.ParseSpecifierSet(s)
	if err != nil {
		return nil, err
	}
	return &compiledSpec{set}, nil
}

// contains reports whether the Python version v (a platform's
// python_full_version) satisfies the set; pre-releases of Python count, as
// pip and uv count them for requires-python.
func (c *compiledSpec) contains(v pep440.Version) bool { return c.set.Contains(v, true) }
