package marker

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// linuxEnv is a CPython 3.12.4 on Linux x86_64 environment.
func linuxEnv(t testing.TB) *Env {
	t.Helper()
	env, err := NewEnv(map[string]string{
		"implementation_name": "cpython", "implementation_version": "3.12.4", "os_name": "posix",
		"platform_machine": "x86_64", "platform_release": "6.8.0-45-generic", "platform_system": "Linux",
		"platform_version": "#45-Ubuntu SMP", "python_full_version": "3.12.4",
		"platform_python_implementation": "CPython", "python_version": "3.12", "sys_platform": "linux",
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestParseNormalizes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`python_version>='3.9'`, `python_version >= "3.9"`},
		{"os_name\t==\t'posix'  ", `os_name == "posix"`},
		// Legacy spellings pypa/packaging still reads.
		{`os.name == "nt"`, `os_name == "nt"`},
		{`sys.platform == "win32"`, `sys_platform == "win32"`},
		{`platform.machine == "x"`, `platform_machine == "x"`},
		{`platform.version == "x"`, `platform_version == "x"`},
		{`platform.python_implementation == "x"`, `platform_python_implementation == "x"`},
		{`python_implementation == "CPython"`, `platform_python_implementation == "CPython"`},
		// Operators.
		{`"x" not  in platform_version`, `"x" not in platform_version`},
		{`"x" in platform_version`, `"x" in platform_version`},
		{`python_version ~= "3.9"`, `python_version ~= "3.9"`},
		{`python_version === "3.9"`, `python_version === "3.9"`},
		// Extra names normalized (PEP 685), on either side, and in the lock-file sets.
		{`extra == "Foo_Bar.baz"`, `extra == "foo-bar-baz"`},
		{`'S_P__A_M' == extra`, `"s-p-a-m" == extra`},
		{`"Dev_Tools" in dependency_groups`, `"dev-tools" in dependency_groups`},
		{`extra == os_name`, `extra == os_name`},
		// Parentheses: redundant ones dropped, needed ones kept.
		{`(os_name == "a")`, `os_name == "a"`},
		{`((os_name == "a" or os_name == "b"))`, `os_name == "a" or os_name == "b"`},
		{`os_name == "x" and (os_name == "a" or os_name == "b")`, `os_name == "x" and (os_name == "a" or os_name == "b")`},
		{`os_name == "x" and ((os_name == "a" or os_name == "b"))`, `os_name == "x" and (os_name == "a" or os_name == "b")`},
		{`(os_name == "x") and (sys_platform == "y")`, `os_name == "x" and sys_platform == "y"`},
		// Quoting: Python escapes are evaluated; values are re-quoted to read back.
		{`os_name == "\x41\u00e9\101"`, `os_name == "AéA"`},
		{`os_name == 'a"b'`, `os_name == 'a"b'`},
		{`os_name == "a'b"`, `os_name == "a'b"`},
		{`os_name == "a'\x22b"`, `os_name == "a'\x22b"`},
		{`os_name == "a\\b"`, `os_name == "a\\b"`},
		{`os_name == "a\db"`, `os_name == "a\\db"`},
		{`os_name == "a\nb"`, `os_name == "a\nb"`},
		{"os_name == 'a\\\nb'", `os_name == "ab"`},
		{`os_name == ""`, `os_name == ""`},
		{`"3.9" <= python_version`, `"3.9" <= python_version`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			m, err := Parse(tc.in)
			if err != nil {
				t.Errorf("Parse(%q): %v", tc.in, err)
				return
			}
			if got := m.String(); got != tc.want {
				t.Errorf("Parse(%q).String() = %s, want %s", tc.in, got, tc.want)
				return
			}
			again, err := Parse(tc.want)
			if err != nil || again.String() != tc.want {
				t.Errorf("%s does not read back: %q, %v", tc.want, again.String(), err)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{
		``, ` `, `python_version`, `(python_version)`, `this_isnt_a_real_variable >= "1.0"`,
		`python_version >= 1.0`, `(python_version == "2.7"`, `python_version == "2.7")`,
		`(python_version == "2.7") with random text`, "python_version >= \"3\"\n",
		"python_version >= \"3\"\r", `os_name == "C:\"`, `os_name == "\x"`, `os_name == "\u12"`,
		`os_name == "\U00110000"`, `os_name == "\ud800"`, `os_name == "\N{BULLET}"`,
		"os_name == 'a\nb'", "os_name == 'a\x00b'", `os_name == 'a\'b'`, `os_name == "posix`, `os_name = "posix"`,
		`os_name == "a" andos_name == "b"`, `os_name == "a" and`, `"a" not os_name`,
		`"a" notin os_name`, `os_name inx "a"`, `platform.release == "x"`, `python_versionx == "3"`,
		`extrasx == "a"`, "os_name == \"\xff\"", `os_name == "a" or or os_name == "b"`,
	} {
		t.Run(fmt.Sprintf("%q", in), func(t *testing.T) {
			_, err := Parse(in)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("Parse(%q) = %v, want *ParseError", in, err)
				return
			}
			if pe.Input != in || pe.Pos < 0 || pe.Pos > len(in) {
				t.Errorf("Parse(%q): bad error %+v", in, pe)
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	env := linuxEnv(t)
	for _, tc := range []struct {
		marker string
		want   bool
	}{
		{`sys_platform == "linux" and platform_machine == "x86_64" and python_version >= "3.9"`, true},
		{`sys_platform == "win32" or python_version >= "3.9"`, true},
		{`sys_platform == "win32" or python_version >= "3.9" and os_name == "nt"`, false},
		{`(sys_platform == "win32" or python_version >= "3.9") and os_name == "posix"`, true},
		// Version variables compare as versions: "3.12" > "3.9".
		{`python_version > "3.9"`, true},
		{`python_version < "3.10"`, false},
		{`python_full_version >= "3.12.4"`, true},
		{`python_full_version == "3.12.*"`, true},
		{`python_version ~= "3.10"`, true},
		{`python_version === "3.12"`, true},
		{`python_version === "3.12.0"`, false},
		{`"3.9" < python_version`, true},
		{`"3.13" ~= python_version`, true},
		{`implementation_version >= "3.12"`, true},
		// Not a valid specifier: falls back to strings.
		{`python_version == "3.x"`, false},
		{`python_version <= "3.x"`, false},
		{`python_version in "3.11 3.12"`, true},
		// platform_release is a version variable, but its value is not a version.
		{`platform_release >= "5"`, false},
		{`platform_release == "6.8.0-45-generic"`, true},
		// Other variables: == / != strings, <= / >= equality, < / > false, in substring.
		{`os_name == "posix"`, true},
		{`os_name != "posix"`, false},
		{`os_name <= "posix"`, true},
		{`os_name >= "posiy"`, false},
		{`os_name < "zzz"`, false},
		{`os_name > "a"`, false},
		{`"pos" in os_name`, true},
		{`"nt" not in os_name`, true},
		{`platform_machine in "x86_64 aarch64"`, true},
		{`"SMP" in platform_version`, true},
		// Empty extra in the metadata context.
		{`extra == "socks"`, false},
		{`extra == ""`, true},
		// pypa/packaging quirks kept: var <op> var compares with the right name,
		// literal <op> literal looks the right literal up as a key.
		{`os_name == platform_system`, false},
		{`"posix" == "os_name"`, true},
	} {
		t.Run(tc.marker, func(t *testing.T) {
			m, err := Parse(tc.marker)
			if err != nil {
				t.Fatalf("%s: %v", tc.marker, err)
			}
			got, err := m.Evaluate(env)
			if err != nil || got != tc.want {
				t.Errorf("%s = %v, %v; want %v", tc.marker, got, err, tc.want)
			}
		})
	}
}

func TestEvaluateErrors(t *testing.T) {
	env := linuxEnv(t)
	lock := env.WithLockFile([]string{"socks"}, nil)
	for _, tc := range []struct {
		marker string
		env    *Env
		kind   EvalErrorKind
	}{
		{`os_name ~= "posix"`, env, UndefinedComparison},
		{`os_name === "posix"`, env, UndefinedComparison},
		{`python_version ~= "3"`, env, UndefinedComparison},
		{`"3.9" ~= platform_release`, env, UndefinedComparison},
		{`"a" in extras`, env, UndefinedEnvironmentName},
		{`"a" in dependency_groups`, env, UndefinedEnvironmentName},
		{`extra == "a"`, lock, UndefinedEnvironmentName},
		{`extras == "socks"`, lock, UndefinedComparison},
		{`"a" ~= extras`, lock, UndefinedComparison},
		{`"x" == "no_such_key"`, env, UndefinedEnvironmentName},
		// No short-circuit: an error anywhere fails the marker.
		{`os_name == "posix" or "a" in extras`, env, UndefinedEnvironmentName},
		{`os_name == "nt" and os_name ~= "x"`, env, UndefinedComparison},
	} {
		t.Run(tc.marker, func(t *testing.T) {
			m, err := Parse(tc.marker)
			if err != nil {
				t.Fatalf("%s: %v", tc.marker, err)
			}
			_, err = m.Evaluate(tc.env)
			var ee *EvalError
			if !errors.As(err, &ee) || ee.Kind != tc.kind {
				t.Errorf("%s: err %v, want %v", tc.marker, err, tc.kind)
			}
		})
	}
	// A missing standard variable is undefined too: an Env holds only what it is given.
	partial, err := NewEnv(map[string]string{"sys_platform": "linux"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = mustParse(t, `python_version >= "3"`).Evaluate(partial)
	var ee *EvalError
	if !errors.As(err, &ee) || ee.Kind != UndefinedEnvironmentName || ee.Name != "python_version" {
		t.Errorf("missing variable: %v", err)
	}
}

func TestContexts(t *testing.T) {
	base := linuxEnv(t)
	// Metadata context: extra is a string, normalized.
	withExtra := base.WithExtra("Socks_Proxy")
	for marker, want := range map[string]bool{
		`extra == "socks-proxy"`: true,
		`extra == "SOCKS.proxy"`: true,
		`extra == "socks"`:       false,
		`"socks" in extra`:       true,
		`extra != "socks-proxy"`: false,
	} {
		t.Run("with extra "+marker, func(t *testing.T) {
			if got, err := mustParse(t, marker).Evaluate(withExtra); err != nil || got != want {
				t.Errorf("%s with extra = %v, %v", marker, got, err)
			}
		})
	}
	if got, _ := mustParse(t, `extra == "socks-proxy"`).Evaluate(base); got {
		t.Error("WithExtra changed the original Env")
	}
	// Lock-file context: sets, membership on normalized names.
	lock := base.WithLockFile([]string{"Socks", "http2"}, []string{"Dev_Tools"})
	for marker, want := range map[string]bool{
		`"socks" in extras`:                        true,
		`"SOCKS" in extras`:                        true,
		`"sock" in extras`:                         false,
		`"socks" not in extras`:                    false,
		`"dev-tools" in dependency_groups`:         true,
		`"dev.tools" in dependency_groups`:         true,
		`"docs" in dependency_groups`:              false,
		`"socks" == extras`:                        false,
		`"socks" != extras`:                        true,
		`"http2" in extras and os_name == "posix"`: true,
	} {
		t.Run("lock file "+marker, func(t *testing.T) {
			if got, err := mustParse(t, marker).Evaluate(lock); err != nil || got != want {
				t.Errorf("%s in lock-file context = %v, %v; want %v", marker, got, err, want)
			}
		})
	}
	empty := base.WithLockFile(nil, nil)
	if got, err := mustParse(t, `"socks" in extras`).Evaluate(empty); err != nil || got {
		t.Errorf("empty set: %v %v", got, err)
	}
	// An explicit extra survives the switch to the lock-file context.
	explicit, _ := NewEnv(map[string]string{"extra": "Feature_X"})
	if got, err := mustParse(t, `extra == "feature-x"`).Evaluate(explicit.WithLockFile(nil, nil)); err != nil || !got {
		t.Errorf("explicit extra: %v %v", got, err)
	}
	if v, ok := lock.Get("extras"); !ok || v != "socks,http2" {
		t.Errorf("Get(extras) = %q %v", v, ok)
	}
}

func TestPythonFullVersionUntagged(t *testing.T) {
	env, err := NewEnv(map[string]string{"python_full_version": "3.11.1+"})
	if err != nil {
		t.Fatal(err)
	}
	for marker, want := range map[string]bool{
		`python_full_version < "3.12"`:    true,
		`python_full_version == "3.11.1"`: true,
		`python_full_version > "3.11.1"`:  false,
	} {
		t.Run(marker, func(t *testing.T) {
			if got, err := mustParse(t, marker).Evaluate(env); err != nil || got != want {
				t.Errorf("%s = %v, %v", marker, got, err)
			}
		})
	}
	if v, _ := env.Get("python_full_version"); v != "3.11.1+local" {
		t.Errorf("stored %q", v)
	}
}

func TestPrereleaseInterpreter(t *testing.T) {
	env, _ := NewEnv(map[string]string{"python_full_version": "3.13.0rc1", "python_version": "3.13"})
	for marker, want := range map[string]bool{
		`python_full_version > "3.6.2"`: true,
		`python_full_version >= "3.13"`: false,
		`python_full_version < "3.13"`:  false, // <V excludes V's pre-releases
		`python_version >= "3.13"`:      true,
	} {
		t.Run(marker, func(t *testing.T) {
			if got, err := mustParse(t, marker).Evaluate(env); err != nil || got != want {
				t.Errorf("%s = %v, %v; want %v", marker, got, err, want)
			}
		})
	}
}

func TestZeroMarkerAndOtherKeys(t *testing.T) {
	var m Marker
	if ok, err := m.Evaluate(linuxEnv(t)); !ok || err != nil || m.String() != "" {
		t.Errorf("zero Marker: %v %v %q", ok, err, m.String())
	}
	env, err := NewEnv(map[string]string{"custom": "value"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := mustParse(t, `"value" == "custom"`).Evaluate(env); !ok || err != nil {
		t.Errorf("other key: %v %v", ok, err)
	}
	if v, ok := env.Get("custom"); !ok || v != "value" {
		t.Error("Get(custom)")
	}
	if _, err := mustParse(t, `os_name == "x"`).Evaluate(nil); err == nil {
		t.Error("nil Env defines os_name")
	}
	if _, err := NewEnv(map[string]string{"os_name": "\xff"}); err == nil {
		t.Error("invalid UTF-8 accepted")
	}
}

func TestNormalizeExtra(t *testing.T) {
	for in, want := range map[string]string{
		"foo": "foo", "Foo_Bar": "foo-bar", "a.-_b": "a-b", "A--B": "a-b", "-x-": "-x-", "": "",
		"ÀB_c": "àb-c", "İ": "i\u0307", "ΑΣ": "ας", "ΣΑ": "σα",
	} {
		t.Run(fmt.Sprintf("%q", in), func(t *testing.T) {
			if got := NormalizeExtra(in); got != want {
				t.Errorf("NormalizeExtra(%q) = %q, want %q", in, got, want)
			}
		})
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	env := linuxEnv(t).WithLockFile([]string{"a"}, nil)
	m := mustParse(t, `"a" in extras and python_full_version >= "3.9" and python_version === "3.12" and "3.1" < python_version`)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if ok, err := m.Evaluate(env); !ok || err != nil {
					t.Errorf("%v %v", ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestEvaluateDoesNotAllocate(t *testing.T) {
	env := linuxEnv(t)
	ms := make([]Marker, len(benchMarkers))
	for i, s := range benchMarkers {
		ms[i] = mustParse(t, s)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, m := range ms {
			if _, err := m.Evaluate(env); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("Evaluate allocates %.1f times per run", allocs)
	}
}

// TestSimpleEscapes: each one-character escape decodes to the byte Python's
// string literals give it.
func TestSimpleEscapes(t *testing.T) {
	// (as in packaging, a quote of the string's own kind cannot be escaped)
	env, err := NewEnv(map[string]string{"os_name": "\a\b\f\n\r\t\v\\'"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(`os_name == "\a\b\f\n\r\t\v\\\'"`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := m.Evaluate(env); err != nil || !ok {
		t.Fatalf("escapes decoded wrongly: %v %v (%s)", ok, err, m)
	}
}
