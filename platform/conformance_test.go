package platform

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestConformanceTags runs every case of the pypa/packaging-derived
// vectors ($CRUXPROV_CONFORMANCE_DIR/pypa/tags.json).
func TestConformanceTags(t *testing.T) {
	dir := os.Getenv("CRUXPROV_CONFORMANCE_DIR")
	if dir == "" {
		t.Skip("CRUXPROV_CONFORMANCE_DIR unset")
	}
	data, err := os.ReadFile(filepath.Join(dir, "pypa", "tags.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Meta  map[string]any    `json:"meta"`
		Cases []json.RawMessage `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	type tcase struct {
		Kind           string   `json:"kind"`
		Tag            string   `json:"tag"`
		ValidateOrder  bool     `json:"validate_order"`
		ExpectedError  string   `json:"expected_error"`
		SupportedTags  []string `json:"supported_tags"`
		Candidates     []string `json:"candidates"`
		ExpectedOrder  []string `json:"expected_order"`
		MacOSVersion   [2]int   `json:"macos_version"`
		Arch           string   `json:"arch"`
		Glibc          [2]int   `json:"glibc"`
		Musl           [2]int   `json:"musl"`
		SystemGlibc    [2]int   `json:"system_glibc"`
		TagGlibc       [2]int   `json:"tag_glibc"`
		Output         string   `json:"output"`
		Implementation string   `json:"implementation"`
		Target         string   `json:"target"`
		PythonVersion  []int    `json:"python_version"`
		ABIs           []string `json:"abis"`
		Platforms      []string `json:"platforms"`
		Wheels         []string `json:"wheels"`
		Expected       any      `json:"expected"`
		Source         string   `json:"source"`
	}
	var cases []tcase
	supported := map[string][]string{}
	for _, raw := range doc.Cases {
		var c tcase
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
		if c.Kind == "supported_tags" {
			supported[c.Target] = strs(c.Expected)
		}
	}
	counts := map[string]int{}
	for i, c := range cases {
		counts[c.Kind]++
		fail := func(got, want any) {
			t.Helper()
			t.Errorf("case %d (%s, %s): got %v, want %v", i, c.Kind, c.Source, got, want)
		}
		switch c.Kind {
		case "parse_tag":
			tags, err := ParseTag(c.Tag)
			if err == nil && c.ValidateOrder && !tagPartsSorted(c.Tag) {
				err = errUnsorted
			}
			if c.ExpectedError != "" {
				if err == nil {
					fail(tags, c.ExpectedError)
				}
				continue
			}
			if err != nil {
				fail(err, c.Expected)
				continue
			}
			got := tagStrings(tags)
			sort.Strings(got)
			if want := strs(c.Expected); !reflect.DeepEqual(got, want) {
				fail(got, want)
			}
		case "select_ranked":
			var sup []Tag
			for _, s := range c.SupportedTags {
				ts, _ := ParseTag(s)
				sup = append(sup, ts...)
			}
			if got := selectRanked(NewRanking(sup), c.Candidates); !reflect.DeepEqual(got, nilIfEmpty(c.ExpectedOrder)) {
				fail(got, c.ExpectedOrder)
			}
		case "mac_binary_formats":
			if got := macBinaryFormats(c.MacOSVersion, c.Arch); !reflect.DeepEqual(got, nilIfEmpty(strs(c.Expected))) {
				fail(got, c.Expected)
			}
		case "mac_platforms":
			if got := macPlatforms(c.MacOSVersion, c.Arch); !reflect.DeepEqual(got, strs(c.Expected)) {
				fail(got, c.Expected)
			}
		case "manylinux_platforms":
			if got := manylinuxPlatforms(c.Glibc[0], c.Glibc[1], c.Arch); !reflect.DeepEqual(got, strs(c.Expected)) {
				fail(got, c.Expected)
			}
		case "musllinux_platforms":
			if got := musllinuxPlatforms(c.Musl[0], c.Musl[1], c.Arch); !reflect.DeepEqual(got, strs(c.Expected)) {
				fail(got, c.Expected)
			}
		case "manylinux_is_compatible":
			if got := !versionLess(c.SystemGlibc, c.TagGlibc); got != c.Expected.(bool) {
				fail(got, c.Expected)
			}
		case "parse_musl_loader_output":
			mj, mn, ok := parseMuslLoaderOutput(c.Output)
			var got any
			if ok {
				got = []any{float64(mj), float64(mn)}
			}
			if !reflect.DeepEqual(got, c.Expected) {
				fail(got, c.Expected)
			}
		case "interpreter_short_name":
			if got := interpreterShortName(c.Implementation); got != c.Expected {
				fail(got, c.Expected)
			}
		case "supported_tags":
			got := tagStrings(supportedTags(c.PythonVersion[0], c.PythonVersion[1], c.ABIs, c.Platforms))
			if want := strs(c.Expected); !reflect.DeepEqual(got, want) {
				fail(firstDiff(got, want), "equal lists")
			}
		case "select_wheel":
			sup, ok := supported[c.Target]
			if !ok {
				t.Fatalf("case %d: no supported_tags for target %q", i, c.Target)
			}
			var tags []Tag
			for _, s := range sup {
				ts, _ := ParseTag(s)
				tags = append(tags, ts...)
			}
			r := NewRanking(tags)
			var got any
			best := -1
			for _, w := range c.Wheels {
				ts, err := ParseTag(wheelTagPart(w))
				if err != nil {
					t.Fatalf("case %d: wheel %q: %v", i, w, err)
				}
				if rank, ok := r.Best(ts); ok && (best < 0 || rank < best) {
					best, got = rank, w
				}
			}
			if !reflect.DeepEqual(got, c.Expected) {
				fail(got, c.Expected)
			}
		default:
			t.Errorf("case %d: unknown kind %q (meta kinds: %v)", i, c.Kind, doc.Meta["kinds"])
		}
	}
	t.Logf("cases per kind: %v", counts)
}

type unsortedError struct{}

func (unsortedError) Error() string { return "tag parts not in sorted order" }

var errUnsorted = unsortedError{}

// tagPartsSorted is packaging's parse_tag(validate_order=True) check: each
// compressed part lists its components in sorted order.
func tagPartsSorted(s string) bool {
	for _, p := range strings.Split(s, "-") {
		c := strings.Split(p, ".")
		if !sort.StringsAreSorted(c) {
			return false
		}
	}
	return true
}

// selectRanked is packaging's create_compatible_tags_selector: candidates
// ranked by their best tag, unsupported ones dropped, ties kept in order.
func selectRanked(r Ranking, candidates []string) []string {
	type rc struct {
		s    string
		rank int
	}
	var out []rc
	for _, c := range candidates {
		ts, err := ParseTag(c)
		if err != nil {
			continue
		}
		if rank, ok := r.Best(ts); ok {
			out = append(out, rc{c, rank})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].rank < out[j].rank })
	var s []string
	for _, x := range out {
		s = append(s, x.s)
	}
	return s
}

func wheelTagPart(name string) string {
	parts := strings.Split(strings.TrimSuffix(name, ".whl"), "-")
	return strings.Join(parts[len(parts)-3:], "-")
}

func strs(v any) []string {
	xs, _ := v.([]any)
	var out []string
	for _, x := range xs {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func tagStrings(ts []Tag) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.String()
	}
	return out
}

func firstDiff(got, want []string) string {
	for i := 0; i < len(got) && i < len(want); i++ {
		if got[i] != want[i] {
			return "at " + strconv.Itoa(i) + ": " + got[i] + " != " + want[i]
		}
	}
	return "lengths " + strconv.Itoa(len(got)) + " vs " + strconv.Itoa(len(want))
}
