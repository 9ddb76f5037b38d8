package lockfile

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

const sha = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const shb = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

func lockOf(body string) []byte {
	return []byte("lock-version = \"1.0\"\ncreated-by = \"test\"\n" + body)
}

// good is a small lock with a pure wheel, a platform-specific package and
// markers on extras and groups.
var good = `
requires-python = ">=3.9"
extras = ["Fast"]
dependency-groups = ["dev"]
default-groups = ["dev"]

[[packages]]
name = "Six"
version = "1.16.0"
index = "https://pypi.org/simple"
wheels = [{ url = "https://files.example/six-1.16.0-py2.py3-none-any.whl", size = 11053, hashes = { sha256 = "` + sha + `" } }]

[[packages]]
name = "numpy"
version = "1.26.4"
marker = "python_version >= '3.9'"
[[packages.wheels]]
url = "https://files.example/numpy-1.26.4-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
hashes = { sha256 = "` + sha + `" }
[[packages.wheels]]
url = "https://files.example/numpy-1.26.4-cp312-cp312-macosx_11_0_arm64.whl"
hashes = { sha256 = "` + shb + `" }
[[packages.wheels]]
name = "numpy-1.26.4-cp312-cp312-musllinux_1_1_x86_64.whl"
path = "wheels/x.whl"
hashes = { SHA256 = "` + shb + `", sha256 = "` + strings.ToUpper(shb) + `" }

[[packages]]
name = "uvloop"
version = "0.19.0"
marker = "sys_platform != 'win32' and 'fast' in extras"
wheels = [{ url = "https://files.example/uvloop-0.19.0-cp312-cp312-manylinux_2_17_x86_64.whl", hashes = { sha256 = "` + sha + `" } }]

[[packages]]
name = "pytest"
version = "8.0"
marker = "'dev' in dependency_groups"
wheels = [{ url = "https://files.example/pytest-8.0.0-py3-none-any.whl", hashes = { sha256 = "` + sha + `" } }]

[[packages]]
name = "local"
version = "1.0+cpu"
wheels = [{ url = "https://files.example/a/local-1.0%2Bcpu-py3-none-any.whl?x=1#frag", hashes = { sha256 = "` + sha + `" } }]

[tool.uv]
anything = { goes = [1, "two"] }
[[packages.tool.pdm]]
`

func mustParse(t *testing.T, body string) *Lock {
	t.Helper()
	l, _, err := Parse(lockOf(body))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return l
}

func preset(t testing.TB, name string) *platform.Platform {
	t.Helper()
	p, err := platform.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseGood(t *testing.T) {
	l, warns, err := Parse(lockOf(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %v", warns)
	}
	if l.Packages[0].Name != "six" || l.Packages[3].Version != "8.0" || l.Extras[0] != "fast" {
		t.Errorf("normalization: %+v", l.Packages[0])
	}
	if w := l.Packages[4].Wheels[0]; w.Name != "local-1.0+cpu-py3-none-any.whl" {
		t.Errorf("url name not percent-decoded: %q", w.Name)
	}
	if w := l.Packages[1].Wheels[2]; w.Name != "numpy-1.26.4-cp312-cp312-musllinux_1_1_x86_64.whl" || w.SHA256() != shb {
		t.Errorf("explicit name / hash: %q %q", w.Name, w.SHA256())
	}
	if *l.Packages[0].Wheels[0].Size != 11053 || l.Packages[0].Index != "https://pypi.org/simple" {
		t.Errorf("size/index: %+v", l.Packages[0])
	}
}

func TestParseWarnings(t *testing.T) {
	data := []byte(strings.Replace(string(lockOf(good)), `"1.0"`, `"1.3"`, 1) + "\nfuture = 1\n")
	data = []byte(strings.Replace(string(data), "name = \"Six\"", "name = \"Six\"\nnew-key = true", 1))
	_, warns, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, w := range warns {
		keys = append(keys, w.Key)
	}
	got := strings.Join(keys, " ")
	for _, want := range []string{"lock-version", "packages.new-key"} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "tool") {
		t.Errorf("tool tables must be ignored: %q", got)
	}
}

func TestResolve(t *testing.T) {
	l := mustParse(t, good)
	for _, tc := range []struct {
		platform string
		opts     Options
		want     map[string]string // name → filename
	}{
		{"cp312-manylinux_2_28_x86_64", Options{}, map[string]string{
			"six": "six-1.16.0-py2.py3-none-any.whl", "numpy": "numpy-1.26.4-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
			"pytest": "pytest-8.0.0-py3-none-any.whl", "local": "local-1.0+cpu-py3-none-any.whl"}},
		{"cp312-manylinux_2_28_x86_64", Options{Extras: []string{"FAST"}, Groups: []string{}}, map[string]string{
			"six": "six-1.16.0-py2.py3-none-any.whl", "numpy": "numpy-1.26.4-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
			"uvloop": "uvloop-0.19.0-cp312-cp312-manylinux_2_17_x86_64.whl", "local": "local-1.0+cpu-py3-none-any.whl"}},
		{"cp312-macosx_14_0_arm64", Options{}, map[string]string{
			"six": "six-1.16.0-py2.py3-none-any.whl", "numpy": "numpy-1.26.4-cp312-cp312-macosx_11_0_arm64.whl",
			"pytest": "pytest-8.0.0-py3-none-any.whl", "local": "local-1.0+cpu-py3-none-any.whl"}},
		{"cp312-musllinux_1_2_x86_64", Options{}, map[string]string{
			"six": "six-1.16.0-py2.py3-none-any.whl", "numpy": "numpy-1.26.4-cp312-cp312-musllinux_1_1_x86_64.whl",
			"pytest": "pytest-8.0.0-py3-none-any.whl", "local": "local-1.0+cpu-py3-none-any.whl"}},
	} {
		t.Run(fmt.Sprintf("%s/extras=%v", tc.platform, tc.opts.Extras), func(t *testing.T) {
			res, err := Resolve(l, preset(t, tc.platform), tc.opts)
			if err != nil {
				t.Fatalf("%s: %v", tc.platform, err)
			}
			got := map[string]string{}
			for i, p := range res.Packages {
				got[p.Name] = p.Filename
				if i > 0 && res.Packages[i-1].Name >= p.Name {
					t.Errorf("not sorted: %v", res.Packages)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("%s %+v: got %v", tc.platform, tc.opts, got)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s %+v: %s = %q, want %q", tc.platform, tc.opts, k, got[k], v)
				}
			}
			if res.Platform != tc.platform {
				t.Errorf("platform %q", res.Platform)
			}
		})
	}
	res, _ := Resolve(l, preset(t, "cp312-musllinux_1_2_x86_64"), Options{})
	for _, p := range res.Packages {
		if p.Name == "numpy" && (p.SHA256.Hex() != shb || p.URL != "") {
			t.Errorf("musl numpy: %+v", p)
		}
		if p.Name == "six" && (p.Size != 11053 || p.Version != "1.16.0" || p.URL == "") {
			t.Errorf("six: %+v", p)
		}
	}
}

func TestResolveChoices(t *testing.T) {
	body := `[[packages]]
name = "t"
version = "1"
wheels = [
  { url = "https://x/t-1-py3-none-any.whl", hashes = { sha256 = "` + sha + `" } },
  { url = "https://x/t-1-cp39-abi3-manylinux_2_17_x86_64.whl", hashes = { sha256 = "` + sha + `" } },
  { url = "https://x/t-1-cp312-cp312-manylinux_2_17_x86_64.whl", hashes = { sha256 = "` + sha + `" } },
  { url = "https://x/t-1-cp312-cp312-manylinux_2_28_x86_64.whl", hashes = { sha256 = "` + sha + `" } },
  { url = "https://x/t-1-cp312-cp312-linux_x86_64.whl", hashes = { sha256 = "` + sha + `" } },
  { url = "https://x/t-1-cp311-cp311-manylinux_2_17_x86_64.whl", hashes = { sha256 = "` + sha + `" } },
]
`
	l := mustParse(t, body)
	for _, tc := range []struct {
		platform string
		linux    bool
		want     string
	}{
		{"cp312-manylinux_2_39_x86_64", false, "t-1-cp312-cp312-manylinux_2_28_x86_64.whl"},
		{"cp312-manylinux_2_27_x86_64", false, "t-1-cp312-cp312-manylinux_2_17_x86_64.whl"},
		{"cp312-manylinux_2_27_x86_64", true, "t-1-cp312-cp312-manylinux_2_17_x86_64.whl"},
		{"cp311-manylinux_2_39_x86_64", false, "t-1-cp311-cp311-manylinux_2_17_x86_64.whl"},
		{"cp313-manylinux_2_39_x86_64", false, "t-1-cp39-abi3-manylinux_2_17_x86_64.whl"},
		{"cp313-manylinux_2_39_aarch64", false, "t-1-py3-none-any.whl"},
		{"cp39-win_amd64", false, "t-1-py3-none-any.whl"},
	} {
		t.Run(fmt.Sprintf("%s/linux=%v", tc.platform, tc.linux), func(t *testing.T) {
			res, err := Resolve(l, preset(t, tc.platform), Options{AllowLinuxTags: tc.linux})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Packages[0].Filename; got != tc.want {
				t.Errorf("%s, want %s", got, tc.want)
			}
		})
	}
	only := mustParse(t, "[[packages]]\nname = \"t\"\nversion = \"1\"\nwheels = [{ url = \"https://x/t-1-cp312-cp312-linux_x86_64.whl\", hashes = { sha256 = \""+sha+"\" } }]\n")
	if _, err := Resolve(only, preset(t, "cp312-manylinux_2_17_x86_64"), Options{AllowLinuxTags: true}); err != nil {
		t.Errorf("AllowLinuxTags: %v", err)
	}
}

func TestResolveAllReport(t *testing.T) {
	body := `[[packages]]
name = "a"
version = "1"
wheels = [{ url = "https://x/a-1-py3-none-any.whl", hashes = { sha256 = "` + sha + `" } }]
[[packages]]
name = "b"
version = "1"
marker = "sys_platform == 'linux'"
wheels = [{ url = "https://x/b-1-cp312-cp312-manylinux_2_17_x86_64.whl", hashes = { sha256 = "` + sha + `" } }]
`
	l := mustParse(t, body)
	ps := []*platform.Platform{preset(t, "cp312-manylinux_2_17_x86_64"), preset(t, "cp312-manylinux_2_17_aarch64"), preset(t, "cp312-win_amd64")}
	reps, err := ResolveAll(l, ps, Options{})
	if !errors.Is(err, refusal.NoCompatibleWheel) || !strings.Contains(err.Error(), "aarch64") {
		t.Errorf("first refusal: %v", err)
	}
	// It says what to do, as every refusal does (docs/refusals.md): it
	// listed the offered tags and stopped there.
	if want := "(offered tags: cp312-cp312-manylinux_2_17_x86_64): lock a wheel of it for cp312-manylinux_2_17_aarch64, or leave that platform out"; !strings.Contains(err.Error(), want) {
		t.Errorf("first refusal: %v\nlacks %q", err, want)
	}
	if len(reps) != 3 {
		t.Fatalf("%d reports", len(reps))
	}
	if o := reps[0].Packages[1]; o.Wheel == nil || o.Err != nil {
		t.Errorf("x86_64 b: %+v", o)
	}
	if o := reps[1].Packages[1]; o.Wheel != nil || !errors.Is(o.Err, refusal.NoCompatibleWheel) || reps[1].Packages[0].Wheel == nil {
		t.Errorf("aarch64: %+v", reps[1].Packages)
	}
	if o := reps[2].Packages[1]; o.Selected || o.Err != nil {
		t.Errorf("windows b must be unselected: %+v", o)
	}
	if _, err := ResolveAll(l, ps, Options{Extras: []string{"nope"}}); err == nil || refusal.CodeOf(err) != "" {
		t.Errorf("unknown extra: %v", err)
	}
}

func TestResolutionDigest(t *testing.T) {
	l := mustParse(t, good)
	p := preset(t, "cp312-manylinux_2_28_x86_64")
	a, _ := Resolve(l, p, Options{})
	da, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	moved := mustParse(t, strings.ReplaceAll(good, "https://files.example/", "https://mirror.internal/pypi/"))
	b, _ := Resolve(moved, p, Options{})
	if db, _ := b.Digest(); db != da {
		t.Errorf("a mirror move changed the digest: %s vs %s", da, db)
	}
	c, _ := Resolve(l, preset(t, "cp312-macosx_14_0_arm64"), Options{})
	if dc, _ := c.Digest(); dc == da {
		t.Error("different wheels, same digest")
	}
}

// TestParseInvalidSaysWhatToDo: every lock_invalid of Parse ends with what
// to do, its cause said once. "created-by missing" and "lock-version "1"
// is not MAJOR.MINOR" named the fault and stopped there.
func TestParseInvalidSaysWhatToDo(t *testing.T) {
	const pkg = "\n[[packages]]\nname = \"six\"\nversion = \"1.16.0\"\nwheels = [{ url = \"https://x/six-1.16.0-py2.py3-none-any.whl\", hashes = { sha256 = \"8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254\" } }]\n"
	for _, c := range []struct{ name, doc string }{
		{"created-by missing", "lock-version = \"1.0\"\npackages = []\n"},
		{"lock-version not MAJOR.MINOR", "lock-version = \"1\"\ncreated-by = \"x\"\npackages = []\n"},
		{"size a float", "lock-version = \"1.0\"\ncreated-by = \"x\"\n" + strings.Replace(pkg, "hashes", "size = 1.5, hashes", 1)},
		{"version not PEP 440", "lock-version = \"1.0\"\ncreated-by = \"x\"\n" + strings.Replace(pkg, "version = \"1.16.0\"", "version = \"one\"", 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Parse([]byte(c.doc))
			var r *refusal.Error
			if !errors.As(err, &r) || r.Code != refusal.LockInvalid {
				t.Fatalf("got %v, want lock_invalid", err)
			}
			msg := r.Message()
			if !strings.HasSuffix(msg, "; fix it in the lock, or regenerate the lock with a PEP 751 locker (docs/lockfile.md)") {
				t.Errorf("%q does not say what to do", msg)
			}
			if r.Err != nil && strings.Count(msg, r.Err.Error()) != 1 {
				t.Errorf("%q: its cause %q not said once", msg, r.Err)
			}
		})
	}
	// A detail that says to regenerate already is left as it is.
	_, _, err := Parse([]byte("lock-version = \"1.0\"\n[[packages]\n"))
	if m := err.Error(); strings.Count(m, "regenerate") != 1 {
		t.Errorf("%q: advice twice", m)
	}
}

// TestMissingKeyNamesTheStrayOnes: a required key misspelt ("lock-verison",
// "NAME": keys match case and all) is refused as missing, naming the
// unknown keys of its table, so the typo shows; the refusal named the
// missing key alone, and the warning about the stray one was lost with it.
func TestMissingKeyNamesTheStrayOnes(t *testing.T) {
	const pkg = "\n[[packages]]\nname = \"six\"\nversion = \"1.16.0\"\nwheels = [{ url = \"https://x/six-1.16.0-py2.py3-none-any.whl\", hashes = { sha256 = \"" + sha + "\" } }]\n"
	for _, c := range []struct{ name, doc, want string }{
		{"lock-version", "lock-verison = \"1.0\"\ncreated-by = \"x\"\npackages = []\n",
			`lock-version missing (the lock has an unknown key, lock-verison: a misspelling?); a PEP 751 lock starts with`},
		{"created-by", "lock-version = \"1.0\"\ncreated_by = \"x\"\n\"Created By\" = \"y\"\npackages = []\n",
			`created-by missing (the lock has unknown keys, created_by, "Created By": a misspelling?); fix it in the lock`},
		{"packages", "lock-version = \"1.0\"\ncreated-by = \"x\"\npackage = []\n",
			`packages missing (the lock has an unknown key, package: a misspelling?); a lock with no packages`},
		{"name", "lock-version = \"1.0\"\ncreated-by = \"x\"\n" + strings.Replace(pkg, "name =", "NAME =", 1),
			`packages[0].name missing (the package has an unknown key, NAME: a misspelling?); fix it in the lock`},
		{"no stray key", "lock-version = \"1.0\"\npackages = []\n", "created-by missing; fix it in the lock"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Parse([]byte(c.doc))
			if refusal.CodeOf(err) != refusal.LockInvalid || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

// TestNoPEP751KeyIsStray: every key PEP 751 defines, at the top of a
// lock and in a [[packages]] table, is one the parse takes: none is named
// as a possible misspelling beside a missing required key. The parse's
// switch cases are the only list of those keys in the package (a second
// list, which the refusal compared with, could drift from them).
func TestNoPEP751KeyIsStray(t *testing.T) {
	top := "lock-version = \"1.0\"\nenvironments = ['sys_platform == \"linux\"']\nrequires-python = \">=3.9\"\n" +
		"extras = []\ndependency-groups = []\ndefault-groups = []\npackages = []\n[tool.x]\ny = 1\n"
	if _, _, err := Parse([]byte(top)); refusal.CodeOf(err) != refusal.LockInvalid || !strings.Contains(err.Error(), "created-by missing; fix it in the lock") {
		t.Errorf("a lock with every top-level key but created-by: %v", err)
	}
	pkg := "lock-version = \"1.0\"\ncreated-by = \"x\"\n[[packages]]\n" +
		"version = \"1\"\nmarker = \"\"\nrequires-python = \"\"\ndependencies = []\nindex = \"\"\nvcs = {}\ndirectory = {}\n" +
		"archive = {}\nsdist = {}\nwheels = []\nattestation-identities = []\ntool = {}\n"
	if _, _, err := Parse([]byte(pkg)); refusal.CodeOf(err) != refusal.LockInvalid || !strings.Contains(err.Error(), "packages[0].name missing; fix it in the lock") {
		t.Errorf("a package with every key but name: %v", err)
	}
}

// TestHashMissingNamesTheHashes: a wheel with hashes but no sha256 (a
// key misspelt "sha265") is refused hash_missing naming the algorithms it
// has, so the typo can be seen. It said "has no sha256 in the lock"
// and nothing of what the lock had instead.
func TestHashMissingNamesTheHashes(t *testing.T) {
	l := mustParse(t, `[[packages]]
name = "six"
version = "1.16.0"
wheels = [{ url = "https://x/six-1.16.0-py2.py3-none-any.whl", hashes = { sha265 = "`+sha+`" } }]
`)
	_, err := Resolve(l, preset(t, "cp312-manylinux_2_28_x86_64"), Options{})
	if refusal.CodeOf(err) != refusal.HashMissing || !strings.Contains(err.Error(), `its hashes are "sha265" only`) {
		t.Fatalf("%v: want hash_missing naming sha265", err)
	}
}
