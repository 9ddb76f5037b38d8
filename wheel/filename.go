package wheel

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

// Filename is a parsed wheel file name,
// {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl.
type Filename struct {
	// Distribution is the distribution part as written in the file name.
	Distribution string
	// Name is Distribution normalized per PEP 503.
	Name string
	// Version is the version part as written (a valid PEP 440 version).
	Version string
	// Build is the optional build tag ("" when absent); it starts with a digit.
	Build string
	// Tags is the expanded compressed tag set in file-name order:
	// for each python tag, for each abi tag, for each platform tag.
	Tags []platform.Tag
}

// String renders the file name back from its parts as written.
func (f Filename) String() string {
	var py, abi, plat []string
	for _, t := range f.Tags {
		py = appendNew(py, t.Interpreter)
		abi = appendNew(abi, t.ABI)
		plat = appendNew(plat, t.Platform)
	}
	parts := []string{f.Distribution, f.Version}
	if f.Build != "" {
		parts = append(parts, f.Build)
	}
	parts = append(parts, strings.Join(py, "."), strings.Join(abi, "."), strings.Join(plat, "."))
	return strings.Join(parts, "-") + ".whl"
}

func appendNew(xs []string, s string) []string {
	for _, x := range xs {
		if x == s {
			return xs
		}
	}
	return append(xs, s)
}

// maxFilename bounds a wheel file name; real ones stay well below 255.
const maxFilename = 1024

var (
	buildRE   = regexp.MustCompile(`^[0-9][A-Za-z0-9_.]*$`)
	tagPartRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	// An interpreter tag is an ASCII Python identifier ("py3", "cp312",
	// "graalpy311"): "2.7.6" is a misplaced version, not the set {2, 7, 6}.
	interpRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ParseFilename parses a wheel file name (a base name, not a path or a
// URL: callers percent-decode a URL's last segment first).
//
// It is stricter than pypa/packaging where packaging and uv disagree,
// because the parts become paths: tag components may hold only ASCII
// letters, digits and underscores, and an interpreter tag must be an
// identifier (so "playlyfe-0.1.1-2.7.6-none-any.whl" is refused) (packaging accepts "/", ":", spaces and
// non-ASCII there; uv does not); a build tag must start with a digit and
// hold only ASCII letters, digits, "_" and "." (packaging accepts
// "1/../../target"); the distribution must be non-empty, made of Unicode
// letters, digits, "_" and ".", start and end with a letter or digit, and
// not contain "__" (PEP 427 escaping replaces runs of "-_." with "_").
// The version must be a valid PEP 440 version. Every fault is a
// refusal.WheelInvalid.
func ParseFilename(name string) (Filename, error) {
	bad := func(why string) (Filename, error) {
		return Filename{}, refusal.New(refusal.WheelInvalid, "wheel file name %q %s; use the file name its build wrote or its index published (NAME-VERSION[-BUILD]-PYTHON-ABI-PLATFORM.whl, PEP 427)", name, why)
	}
	if len(name) > maxFilename {
		return Filename{}, refusal.New(refusal.WheelInvalid, "wheel file name of %d bytes is too long", len(name))
	}
	if !utf8.ValidString(name) {
		return bad("is not valid UTF-8")
	}
	stem, ok := strings.CutSuffix(name, ".whl")
	if !ok {
		return bad("does not end in .whl")
	}
	var buf [6]string // the dash-separated parts, without a slice of them on the heap
	parts := buf[:0]
	for part := range strings.SplitSeq(stem, "-") {
		if len(parts) == len(buf) {
			return bad("does not have 5 or 6 dash-separated parts")
		}
		parts = append(parts, part)
	}
	if len(parts) != 5 && len(parts) != 6 {
		return bad("does not have 5 or 6 dash-separated parts")
	}
	f := Filename{Distribution: parts[0], Version: parts[1]}
	if !validDistribution(f.Distribution) {
		return bad("has an invalid distribution name")
	}
	f.Name = pep503.Normalize(f.Distribution)
	if err := checkVersion(f.Version); err != nil {
		return bad("has an invalid PEP 440 version")
	}
	if len(parts) == 6 {
		f.Build = parts[2]
		if !buildRE.MatchString(f.Build) {
			return bad("has an invalid build tag (must start with a digit; ASCII letters, digits, '_' and '.')")
		}
	}
	n := len(parts)
	// The sets are split into arrays on the stack (a set of up to four
	// components, as nearly every wheel has); only Tags is allocated.
	var pyBuf, abiBuf, platBuf [4]string
	pys, ok1 := splitTagSet(pyBuf[:0], parts[n-3], true)
	abis, ok2 := splitTagSet(abiBuf[:0], parts[n-2], false)
	plats, ok3 := splitTagSet(platBuf[:0], parts[n-1], false)
	if !ok1 || !ok2 || !ok3 {
		return bad("has an invalid tag (components are ASCII letters, digits and '_', sets joined by '.')")
	}
	f.Tags = make([]platform.Tag, 0, len(pys)*len(abis)*len(plats))
	for _, py := range pys {
		for _, abi := range abis {
			for _, plat := range plats {
				f.Tags = append(f.Tags, platform.Tag{Interpreter: py, ABI: abi, Platform: plat})
			}
		}
	}
	return f, nil
}

// splitTagSet splits a compressed tag set "a.b.c", refusing components
// that do not match interpRE (ident) or tagPartRE. It tests bytes, not the
// regexps, which took a third of parsing a 1,000-package lock. The
// components are appended to xs.
func splitTagSet(xs []string, s string, ident bool) ([]string, bool) {
	for x := range strings.SplitSeq(s, ".") {
		if !tagComponent(x, ident) {
			return nil, false
		}
		xs = appendNew(xs, x) // "py3.py3" is the set {py3}
	}
	return xs, true
}

// tagComponent matches tagPartRE, or interpRE when ident.
func tagComponent(x string, ident bool) bool {
	if x == "" {
		return false
	}
	for i := 0; i < len(x); i++ {
		c := x[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= '0' && c <= '9' && (i > 0 || !ident)) {
			return false
		}
	}
	return true
}

// validDistribution holds the distribution part of a wheel file name to
// PEP 427's escaped form (see ParseFilename).
func validDistribution(s string) bool {
	if s == "" || strings.Contains(s, "__") {
		return false
	}
	for _, r := range s {
		if r != '_' && r != '.' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return false
		}
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	return alnum(first) && alnum(last)
}

func alnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
