package marker

import "testing"

func FuzzParseMarker(f *testing.F) {
	for _, s := range benchMarkers {
		f.Add(s)
	}
	for _, s := range []string{
		`os.name == "posix"`, `(extra == "Foo_Bar" or extra == "Baz") and python_version >= "3"`,
		`"foo" in extras`, `'a" == os_name or "b' == os_name`, `os_name == "\x41\n\\"`,
		`os_name == "C:\"`, `((os_name == "a" or os_name == "b")) and ((sys_platform == "c"))`,
		`"posix" == "os_name"`, `extra == os_name`, `python_full_version === "3.12.4"`,
		`"3.9" ~= python_version`, `os_name == "a" andos_name == "b"`, "os_name == 'a\\\nb'",
	} {
		f.Add(s)
	}
	meta := benchEnv(f)
	lock := meta.WithLockFile([]string{"foo", "bar"}, []string{"dev"})
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse(s)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("%q: error %T", s, err)
			}
			return
		}
		n := m.String()
		m2, err := Parse(n)
		if err != nil {
			t.Fatalf("%q normalizes to %q which does not parse: %v", s, n, err)
		}
		if m2.String() != n {
			t.Fatalf("%q -> %q -> %q", s, n, m2.String())
		}
		// Normalizing never changes the meaning.
		for _, env := range []*Env{meta, lock} {
			r1, e1 := m.Evaluate(env)
			r2, e2 := m2.Evaluate(env)
			if r1 != r2 || (e1 == nil) != (e2 == nil) {
				t.Fatalf("%q and %q evaluate differently: %v/%v vs %v/%v", s, n, r1, e1, r2, e2)
			}
			if e1 != nil {
				if _, ok := e1.(*EvalError); !ok {
					t.Fatalf("%q: error %T", s, e1)
				}
			}
		}
	})
}
