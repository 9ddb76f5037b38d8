package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

func TestParseTag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // nil = error
	}{
		{"py3-none-any", []string{"py3-none-any"}},
		{"py2.py3-none-any", []string{"py2-none-any", "py3-none-any"}},
		{"cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64", []string{"cp310-cp310-manylinux_2_17_x86_64", "cp310-cp310-manylinux2014_x86_64"}},
		{"_custom-none-any", []string{"_custom-none-any"}},
		{"py3-none-any.any", []string{"py3-none-any"}},
		{"-none-any", nil}, {"py3--any", nil}, {"py3-none-", nil}, {"py3.-none-any", nil},
		{"2-none-any", nil}, {"py3.2-none-any", nil}, {"py+3-none-any", nil}, {"py3-none", nil},
		{"py3-none-any-extra", nil}, {"py3-none-lin/../x", nil}, {"py3-none-lin ux", nil}, {"py3-nöne-any", nil},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTag(tc.in)
			if tc.want == nil {
				if err == nil {
					t.Errorf("ParseTag(%q) = %v, want error", tc.in, got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(tagStrings(got), tc.want) {
				t.Errorf("ParseTag(%q) = %v, %v; want %v", tc.in, tagStrings(got), err, tc.want)
			}
		})
	}
}

func TestManylinuxPlatforms(t *testing.T) {
	x := manylinuxPlatforms(2, 17, "x86_64")
	if x[0] != "manylinux_2_17_x86_64" || x[1] != "manylinux2014_x86_64" || x[len(x)-2] != "manylinux_2_5_x86_64" || x[len(x)-1] != "manylinux1_x86_64" {
		t.Errorf("x86_64 2.17: %v", x)
	}
	if !contains(x, "manylinux2010_x86_64") || indexOf(x, "manylinux2010_x86_64") != indexOf(x, "manylinux_2_12_x86_64")+1 {
		t.Errorf("manylinux2010 must follow manylinux_2_12: %v", x)
	}
	a := manylinuxPlatforms(2, 39, "aarch64")
	if len(a) != 24 || a[0] != "manylinux_2_39_aarch64" || a[len(a)-1] != "manylinux2014_aarch64" {
		t.Errorf("aarch64 2.39 (%d): %v", len(a), a)
	}
	if got := manylinuxPlatforms(2, 17, "sparc"); got != nil {
		t.Errorf("unknown arch: %v", got)
	}
	if got := musllinuxPlatforms(1, 2, "aarch64"); !reflect.DeepEqual(got, []string{"musllinux_1_2_aarch64", "musllinux_1_1_aarch64", "musllinux_1_0_aarch64"}) {
		t.Errorf("musl: %v", got)
	}
}

func TestMacPlatforms(t *testing.T) {
	arm := macPlatforms([2]int{14, 0}, "arm64")
	want := []string{"macosx_14_0_arm64", "macosx_14_0_universal2", "macosx_13_0_arm64"}
	if !reflect.DeepEqual(arm[:3], want) || arm[len(arm)-1] != "macosx_10_4_universal2" || contains(arm, "macosx_10_15_arm64") {
		t.Errorf("arm64 14: %v", arm)
	}
	x := macPlatforms([2]int{11, 3}, "x86_64")
	if x[0] != "macosx_11_0_x86_64" || !contains(x, "macosx_10_16_x86_64") || x[len(x)-1] != "macosx_10_4_universal" {
		t.Errorf("x86_64 11.3: %v", x)
	}
	old := macPlatforms([2]int{10, 15}, "x86_64")
	if old[0] != "macosx_10_15_x86_64" || contains(old, "macosx_10_16_x86_64") || len(old) != 12*6 {
		t.Errorf("x86_64 10.15 (%d): %v", len(old), old[:6])
	}
	if got := macBinaryFormats([2]int{10, 3}, "x86_64"); got != nil {
		t.Errorf("10.3 x86_64: %v", got)
	}
}

func TestSupportedTagsOrder(t *testing.T) {
	tags := tagStrings(supportedTags(3, 12, []string{"cp312"}, []string{"manylinux_2_17_x86_64", "manylinux2014_x86_64"}))
	want := []string{
		"cp312-cp312-manylinux_2_17_x86_64", "cp312-cp312-manylinux2014_x86_64",
		"cp312-abi3-manylinux_2_17_x86_64", "cp312-abi3-manylinux2014_x86_64",
		"cp312-none-manylinux_2_17_x86_64", "cp312-none-manylinux2014_x86_64",
		"cp311-abi3-manylinux_2_17_x86_64",
	}
	if !reflect.DeepEqual(tags[:7], want) {
		t.Errorf("head: %v", tags[:7])
	}
	// 2 platforms × (3 + 10 abi3 + 14 pyXY) + cp312-none-any + 14 any.
	if len(tags) != 2*27+15 {
		t.Errorf("len %d", len(tags))
	}
	if i, j := indexOf(tags, "py312-none-manylinux_2_17_x86_64"), indexOf(tags, "py3-none-manylinux_2_17_x86_64"); !(i >= 0 && j == i+2) {
		t.Errorf("py312 then py3: %d %d", i, j)
	}
	if tags[len(tags)-15] != "cp312-none-any" || tags[len(tags)-1] != "py30-none-any" {
		t.Errorf("tail: %v", tags[len(tags)-15:])
	}
	ft := tagStrings(supportedTags(3, 13, []string{"cp313t"}, []string{"win_amd64"}))
	if ft[0] != "cp313-cp313t-win_amd64" || ft[1] != "cp313-abi3t-win_amd64" || contains(ft, "cp313-abi3-win_amd64") {
		t.Errorf("free-threaded: %v", ft[:4])
	}
}

func TestPresets(t *testing.T) {
	names := Presets()
	if len(names) < 300 {
		t.Fatalf("only %d presets", len(names))
	}
	for _, n := range names {
		p, err := Lookup(n)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", n, err)
		}
		if p.ID() != n {
			t.Errorf("preset %q has id %q", n, p.ID())
		}
		for _, tg := range p.Tags {
			if strings.HasPrefix(tg.Platform, "linux_") {
				t.Fatalf("preset %q lists %s", n, tg)
			}
		}
	}
	for _, n := range []string{"cp311-manylinux_2_36_x86_64", "cp312-musllinux_1_2_aarch64", "cp312-macosx_14_0_arm64", "cp311-win_amd64", "cp39-manylinux_2_17_aarch64", "cp314-manylinux_2_39_x86_64"} {
		if !contains(names, n) {
			t.Errorf("missing preset %q", n)
		}
	}
	for _, n := range []string{"", "host", "cp38-manylinux_2_17_x86_64", "cp312-manylinux_2_16_x86_64", "cp312-manylinux_2_40_x86_64", "cp312-manylinux_2_017_x86_64", "cp312-linux_x86_64", "cp312-macosx_10_8_x86_64", "cp312-macosx_11_0_x86_64x", "pp312-manylinux_2_17_x86_64", "cp312-musllinux_1_0_x86_64"} {
		t.Run(fmt.Sprintf("%q", n), func(t *testing.T) {
			if _, err := Lookup(n); !errors.Is(err, refusal.PlatformUnsupported) {
				t.Errorf("Lookup(%q) = %v, want platform_unsupported", n, err)
			}
		})
	}
	p, _ := Lookup("cp311-win_amd64")
	if p.Markers["os_name"] != "nt" || p.Markers["sys_platform"] != "win32" || p.Markers["platform_machine"] != "AMD64" || p.LibDir != "Lib" {
		t.Errorf("windows markers: %v %s", p.Markers, p.LibDir)
	}
	p, _ = Lookup("cp312-manylinux_2_39_x86_64")
	want := map[string]string{
		"implementation_name": "cpython", "implementation_version": "3.12.0", "os_name": "posix",
		"platform_machine": "x86_64", "platform_python_implementation": "CPython", "platform_release": "",
		"platform_system": "Linux", "platform_version": "", "python_full_version": "3.12.0",
		"python_version": "3.12", "sys_platform": "linux",
	}
	if !reflect.DeepEqual(p.Markers, want) || p.LibDir != "lib/python3.12" || p.ABI != "cp312" {
		t.Errorf("linux preset: %v %s %s", p.Markers, p.LibDir, p.ABI)
	}
	if p.Tags[0].String() != "cp312-cp312-manylinux_2_39_x86_64" {
		t.Errorf("first tag %s", p.Tags[0])
	}
}

func TestWithLinuxTags(t *testing.T) {
	p, _ := Lookup("cp312-manylinux_2_17_x86_64")
	q := p.WithLinuxTags()
	n := 0
	for i, tg := range q.Tags {
		if tg.Platform == "linux_x86_64" {
			n++
			prev := q.Tags[i-1]
			if prev.Platform != "manylinux1_x86_64" || prev.Interpreter != tg.Interpreter || prev.ABI != tg.ABI {
				t.Fatalf("linux tag %s after %s", tg, prev)
			}
		}
	}
	if n != 27 || len(q.Tags) != len(p.Tags)+27 || q.ID() != p.ID() {
		t.Errorf("added %d tags, id %s", n, q.ID())
	}
	if q.WithLinuxTags() != q {
		t.Error("second WithLinuxTags changed the platform")
	}
	w, _ := Lookup("cp312-win_amd64")
	if w.WithLinuxTags() != w {
		t.Error("windows got linux tags")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, n := range []string{"cp312-manylinux_2_39_x86_64", "cp313-macosx_11_0_arm64", "cp39-win32", "cp310-musllinux_1_1_x86_64"} {
		t.Run(n, func(t *testing.T) {
			p, _ := Lookup(n)
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			q, err := ParseJSON(b)
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			if !reflect.DeepEqual(p, q) {
				t.Errorf("%s: round trip differs", n)
			}
			b2, _ := json.Marshal(q)
			if string(b) != string(b2) {
				t.Errorf("%s: canonical form not stable", n)
			}
			if !strings.HasPrefix(string(b), `{"abi":"`) || strings.Contains(string(b), "\n") {
				t.Errorf("%s: not canonical: %.80s", n, b)
			}
			wrapped, _ := json.Marshal(map[string]any{"schema": "cruxprov.platform.show/v1", "platform": json.RawMessage(b)})
			if _, err := ParseJSON(wrapped); err != nil {
				t.Errorf("wrapped: %v", err)
			}
		})
	}
}

func TestParseJSONRefusals(t *testing.T) {
	p, _ := Lookup("cp312-manylinux_2_39_x86_64")
	good, _ := json.Marshal(p)
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(good, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	for name, data := range map[string][]byte{
		"not json":        []byte("{"),
		"array":           []byte("[]"),
		"trailing":        append(append([]byte{}, good...), []byte(" {}")...),
		"a stray close":   append(append([]byte{}, good...), []byte(" }")...),
		"a key twice":     append([]byte(`{"abi":"cp312",`), good[1:]...),
		"a key, 2 cases":  append([]byte(`{"ABI":"cp312",`), good[1:]...),
		"type":            mutate(func(m map[string]any) { m["type"] = "cruxible.platform/v2" }),
		"unknown key":     mutate(func(m map[string]any) { m["extra"] = 1 }),
		"pypy":            mutate(func(m map[string]any) { m["implementation"] = "pp" }),
		"python version":  mutate(func(m map[string]any) { m["python_version"] = "3" }),
		"abi":             mutate(func(m map[string]any) { m["abi"] = "cp311" }),
		"marker missing":  mutate(func(m map[string]any) { delete(m["markers"].(map[string]any), "os_name") }),
		"marker extra":    mutate(func(m map[string]any) { m["markers"].(map[string]any)["extra"] = "x" }),
		"marker null":     mutate(func(m map[string]any) { m["markers"].(map[string]any)["os_name"] = nil }),
		"marker mismatch": mutate(func(m map[string]any) { m["markers"].(map[string]any)["python_version"] = "3.11" }),
		"lib_dir abs":     mutate(func(m map[string]any) { m["lib_dir"] = "/usr/lib" }),
		"lib_dir dotdot":  mutate(func(m map[string]any) { m["lib_dir"] = "../lib" }),
		"no tags":         mutate(func(m map[string]any) { m["tags"] = []string{} }),
		"bad tag":         mutate(func(m map[string]any) { m["tags"] = []string{"cp312-cp312-a/b"} }),
		"compressed tag":  mutate(func(m map[string]any) { m["tags"] = []string{"py2.py3-none-any"} }),
		"dup tag":         mutate(func(m map[string]any) { m["tags"] = []string{"py3-none-any", "py3-none-any"} }),
		"id":              mutate(func(m map[string]any) { m["id"] = "cp312-manylinux_2_17_x86_64" }),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseJSON(data); !errors.Is(err, refusal.PlatformUnsupported) {
				t.Errorf("%s: got %v, want platform_unsupported", name, err)
			}
		})
	}
}

// TestParseJSONWrongTypeSaysWhatJSON: a value of the wrong JSON type is
// refused in the file's terms (the key, the JSON it has, the JSON it
// wants); the refusal named Go types ("into Go value of type struct {
// platform.jsonForm; Markers map[string]*string …}").
func TestParseJSONWrongTypeSaysWhatJSON(t *testing.T) {
	p, _ := Lookup("cp312-manylinux_2_39_x86_64")
	good, _ := json.Marshal(p)
	set := func(key string, v any) []byte {
		var m map[string]any
		_ = json.Unmarshal(good, &m)
		m[key] = v
		b, _ := json.Marshal(m)
		return b
	}
	for _, tc := range []struct {
		data []byte
		want string
	}{
		{[]byte("[]"), "the document is a JSON array, not an object"},
		{[]byte(`"x"`), "the document is a JSON string, not an object"},
		{set("tags", "cp312-cp312-win_amd64"), `"tags" is a JSON string, not an array`},
		{set("tags", []int{1}), `"tags" is a JSON number, not a string`},
		{set("markers", []string{}), `"markers" is a JSON array, not an object`},
		{set("abi", 312), `"abi" is a JSON number, not a string`},
		{set("markers", map[string]any{"os_name": 1}), `a value of "markers" is a JSON number, not a string`},
	} {
		_, err := ParseJSONFile("host.plat", tc.data)
		if !errors.Is(err, refusal.PlatformUnsupported) || !strings.Contains(err.Error(), "platform file host.plat: not a platform object: "+tc.want+" (") ||
			strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "json:") || strings.Contains(err.Error(), "jsonForm") {
			t.Errorf("%.60s…: %v, want %q", tc.data, err, tc.want)
		}
	}
	if _, err := ParseJSON(set("idd", 1)); err == nil || !strings.Contains(err.Error(), `platform file: not a platform object: unknown key "idd"`) {
		t.Errorf("unknown key: %v", err)
	}
}

const realPython = "/root/.pyenv/versions/3.11.7/bin/python3.11"

// TestHostMatchesPip compares Host's tag list with the interpreter's own
// pip: exactly the list pip installs by (get_supported), and, in the same
// order, every tag of its vendored pypa/packaging's sys_tags. (pip 23
// vendors packaging 21.3, whose sys_tags lacks the cpXY-none-any tag that
// pip's get_supported and packaging >= 22 list; both rank linux_<arch>
// last.)
func TestHostMatchesPip(t *testing.T) {
	for _, py := range []string{"python3", realPython, "/usr/bin/python3.11"} {
		t.Run(py, func(t *testing.T) {
			if _, err := exec.LookPath(py); err != nil {
				t.Logf("skip %s: %v", py, err)
				return
			}
			out, err := exec.Command(py, "-I", "-c", "import json; from pip._vendor.packaging import tags; from pip._internal.utils.compatibility_tags import get_supported; print(json.dumps([[str(t) for t in get_supported()], [str(t) for t in tags.sys_tags()]]))").Output()
			if err != nil {
				t.Logf("skip %s: no pip: %v", py, err)
				return
			}
			var oracle [2][]string
			if err := json.Unmarshal(out, &oracle); err != nil {
				t.Fatal(err)
			}
			want, sysTags := oracle[0], oracle[1]
			p, err := Host(context.Background(), py)
			if err != nil {
				t.Fatalf("Host(%s): %v", py, err)
			}
			if got := tagStrings(p.Tags); !reflect.DeepEqual(got, want) {
				t.Errorf("Host(%s) vs pip get_supported: %s", py, firstDiff(got, want))
			}
			var sub []string
			for _, tg := range p.Tags {
				if tg.ABI != "none" || tg.Platform != "any" || !strings.HasPrefix(tg.Interpreter, "cp") {
					sub = append(sub, tg.String())
				}
			}
			if !reflect.DeepEqual(sub, sysTags) {
				t.Errorf("Host(%s) vs packaging sys_tags: %s", py, firstDiff(sub, sysTags))
			}
			if strings.Contains(p.Interpreter, "shims") || !strings.HasPrefix(p.Interpreter, "/") {
				t.Errorf("interpreter %q is not a real path", p.Interpreter)
			}
			if p.Markers["python_version"] != p.PythonVersion || p.LibDir != "lib/python"+p.PythonVersion {
				t.Errorf("layout %s %s %v", p.PythonVersion, p.LibDir, p.Markers)
			}
			b, _ := json.Marshal(p)
			if q, err := ParseJSON(b); err != nil || q.ID() != p.ID() {
				t.Errorf("host JSON round trip: %v", err)
			}
			t.Logf("%s: %s (%d tags)", py, p.ID(), len(p.Tags))
		})
	}
}

func TestHostRefusals(t *testing.T) {
	// What they say: no empty "()" where the program said nothing, and a
	// program that says nothing is named as not Python (it was
	// "unreadable probe output: unexpected end of JSON input").
	if _, err := Host(context.Background(), "/nonexistent/python"); !errors.Is(err, refusal.PlatformUnsupported) || strings.Contains(err.Error(), "()") {
		t.Errorf("missing interpreter: %v", err)
	}
	if _, err := Host(context.Background(), "/bin/false"); !errors.Is(err, refusal.PlatformUnsupported) || strings.Contains(err.Error(), "()") {
		t.Errorf("failing interpreter: %v", err)
	}
	if _, err := Host(context.Background(), "/bin/true"); !errors.Is(err, refusal.PlatformUnsupported) || !strings.Contains(err.Error(), "/bin/true answered nothing to the probe") {
		t.Errorf("a program that is not Python: %v", err)
	}
	if _, err := Host(context.Background(), "/bin/sh"); !errors.Is(err, refusal.PlatformUnsupported) || !strings.Contains(err.Error(), "failed (/bin/sh: ") {
		t.Errorf("a program that says why it fails, its last line: %v", err)
	}
	// Each says to name another interpreter, and carries the remedy
	// that does (it said --python before issue 12 item 5, then nothing
	// the CLI could render).
	for _, python := range []string{"/nonexistent/python", "/bin/false", "/bin/true"} {
		if _, err := Host(context.Background(), python); refusal.RemedyOf(err) == nil || refusal.RemedyOf(err).Action != refusal.ActionNamePython {
			t.Errorf("%s: %v: remedy %+v, want %s", python, err, refusal.RemedyOf(err), refusal.ActionNamePython)
		}
	}
	for name, out := range map[string]string{
		"garbage": "not json",
		"pypy":    `{"implementation_name":"pypy"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := hostFromProbe(context.Background(), []byte(out)); !errors.Is(err, refusal.PlatformUnsupported) {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
}

func FuzzParsePlatformJSON(f *testing.F) {
	for _, n := range []string{"cp312-manylinux_2_39_x86_64", "cp311-win_amd64"} {
		p, _ := Lookup(n)
		b, _ := json.Marshal(p)
		f.Add(b)
	}
	f.Add([]byte(`{"type":"cruxible.platform/v1"}`))
	f.Add([]byte(`{"schema":"x","platform":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseJSON(data)
		if err != nil {
			if refusal.CodeOf(err) != refusal.PlatformUnsupported {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParseJSON(b)
		if err != nil || q.ID() != p.ID() {
			t.Fatalf("re-parse: %v", err)
		}
	})
}

func FuzzParseTag(f *testing.F) {
	for _, s := range []string{"py3-none-any", "py2.py3-none-any", "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64", "-", "a-b-c.d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tags, err := ParseTag(s)
		if err != nil {
			return
		}
		for _, tg := range tags {
			again, err := ParseTag(tg.String())
			if err != nil || len(again) != 1 || again[0] != tg {
				t.Fatalf("%q: tag %s does not round-trip", s, tg)
			}
		}
	})
}

func contains(xs []string, x string) bool { return indexOf(xs, x) >= 0 }

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// TestPresetsOrder: platform list reads as a person counts, not as bytes.
func TestPresetsOrder(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"cp39-manylinux_2_17_x86_64", "cp310-manylinux_2_17_x86_64", -1},
		{"cp311-macosx_10_9_x86_64", "cp311-macosx_10_10_x86_64", -1},
		{"cp311-macosx_11_0_arm64", "cp311-macosx_11_0_x86_64", -1},
		{"cp311-win32", "cp311-win_amd64", -1},
		{"a07", "a7", -1},
		{"x", "x", 0},
		{"x1", "x", 1},
	} {
		t.Run(c.a+" "+c.b, func(t *testing.T) {
			if got := naturalCompare(c.a, c.b); got != c.want {
				t.Errorf("got %d, want %d", got, c.want)
			}
			if got := naturalCompare(c.b, c.a); got != -c.want {
				t.Errorf("reversed: got %d, want %d", got, -c.want)
			}
		})
	}
	p := Presets()
	if !slices.IsSortedFunc(p, naturalCompare) || slices.Index(p, "cp39-manylinux_2_17_x86_64") > slices.Index(p, "cp310-manylinux_2_17_x86_64") {
		t.Errorf("presets out of order: %v…", p[:5])
	}
}
