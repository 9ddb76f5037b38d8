package pep503

import "testing"

func TestNormalize(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"requests", "requests"},
		{"Django", "django"},
		{"zope.interface", "zope-interface"},
		{"Foo__Bar--baz..Qux", "foo-bar-baz-qux"},
		{"a-_.b", "a-b"},
		{"-lead", "-lead"},
		{"Ünïcode_Name", "ünïcode-name"},
		{"", ""},
	} {
		t.Run(c.in, func(t *testing.T) {
			if got := Normalize(c.in); got != c.want {
				t.Errorf("Normalize(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"requests", "A_b.C", "x--y", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := Normalize(s)
		if Normalize(n) != n {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, n, Normalize(n))
		}
	})
}
