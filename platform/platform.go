package platform

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/cruxible/cruxprov/canonical"
	"github.com/cruxible/cruxprov/internal/strictjson"
	"github.com/cruxible/cruxprov/refusal"
)

// FormatType is the "type" of a platform's canonical JSON form; a reader
// refuses any other.
const FormatType = "cruxible.platform/v1"

// MarkerVariables are the PEP 508 environment marker variables, every one
// of which a Platform sets.
var MarkerVariables = []string{
	"implementation_name", "implementation_version", "os_name", "platform_machine",
	"platform_python_implementation", "platform_release", "platform_system",
	"platform_version", "python_full_version", "python_version", "sys_platform",
}

// Platform is an explicit target (DESIGN §4): the marker environment, the
// ordered supported tags, and the interpreter layout.
type Platform struct {
	// Implementation is the interpreter's tag prefix; cruxprov supports
	// CPython ("cp") only.
	Implementation string
	// PythonVersion is "X.Y".
	PythonVersion string
	// ABI is the interpreter's own ABI tag, e.g. "cp312" or "cp313t".
	ABI string
	// LibDir is the environment's library directory relative to its root:
	// "lib/pythonX.Y" on POSIX ("lib/pythonX.Yt" when free-threaded),
	// "Lib" on Windows.
	LibDir string
	// Markers holds every PEP 508 variable (MarkerVariables).
	Markers map[string]string
	// Tags are the supported tags, most preferred first.
	Tags []Tag
	// Interpreter is the real path of the probed interpreter (host only).
	Interpreter string
}

// Version returns the Python major and minor version.
func (p *Platform) Version() (major, minor int) {
	major, minor, _ = parseXY(p.PythonVersion)
	return major, minor
}

var xyRE = regexp.MustCompile(`^(\d{1,2})\.(\d{1,3})$`)

func parseXY(s string) (int, int, bool) {
	m := xyRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	return a, b, true
}

// ID returns the canonical id "<impl><major><minor>-<best platform tag>",
// e.g. cp311-manylinux_2_36_x86_64 (a free-threaded interpreter's id
// carries its "t": cp313t-…). The best platform tag is that of the first
// supported tag whose platform is not "any".
func (p *Platform) ID() string {
	impl := p.Implementation + strings.ReplaceAll(p.PythonVersion, ".", "")
	if isThreaded([]string{p.ABI}) {
		impl += "t"
	}
	best := "any"
	for _, t := range p.Tags {
		if t.Platform != "any" {
			best = t.Platform
			break
		}
	}
	return impl + "-" + best
}

// Ranking returns the platform's tag ranking.
func (p *Platform) Ranking() Ranking { return NewRanking(p.Tags) }

// WithLinuxTags returns a copy that also supports the local-build
// linux_<arch> tags of its manylinux or musllinux architecture, ranked
// after every portable platform tag of the same interpreter and ABI (the
// place pip and uv give them). A platform that is not Linux, or already
// lists them, comes back unchanged.
func (p *Platform) WithLinuxTags() *Platform {
	arch := ""
	for _, t := range p.Tags {
		if a := linuxArch(t.Platform); a != "" {
			arch = a
			break
		}
	}
	if arch == "" {
		return p
	}
	linux := "linux_" + arch
	for _, t := range p.Tags {
		if t.Platform == linux {
			return p
		}
	}
	q := *p
	q.Tags = make([]Tag, 0, len(p.Tags)+len(p.Tags)/8)
	for i, t := range p.Tags {
		q.Tags = append(q.Tags, t)
		if t.Platform == "any" {
			continue
		}
		// After the last platform of a run with one interpreter and ABI.
		if i+1 == len(p.Tags) || p.Tags[i+1].Interpreter != t.Interpreter || p.Tags[i+1].ABI != t.ABI || p.Tags[i+1].Platform == "any" {
			q.Tags = append(q.Tags, Tag{t.Interpreter, t.ABI, linux})
		}
	}
	return &q
}

var linuxArchRE = regexp.MustCompile(`^(?:manylinux_\d+_\d+|manylinux1|manylinux2010|manylinux2014|musllinux_\d+_\d+)_(.+)$`)

func linuxArch(plat string) string {
	if m := linuxArchRE.FindStringSubmatch(plat); m != nil {
		return m[1]
	}
	return ""
}

// jsonForm is the canonical JSON form's shape.
type jsonForm struct {
	ABI            string            `json:"abi"`
	ID             string            `json:"id"`
	Implementation string            `json:"implementation"`
	Interpreter    string            `json:"interpreter,omitempty"`
	LibDir         string            `json:"lib_dir"`
	Markers        map[string]string `json:"markers"`
	PythonVersion  string            `json:"python_version"`
	Tags           []string          `json:"tags"`
	Type           string            `json:"type"`
}

// MarshalJSON writes the canonical JSON form (RFC 8785, canonical.Marshal):
// an object with keys abi, id, implementation, interpreter (host only),
// lib_dir, markers, python_version, tags (strings, most preferred first)
// and type ("cruxible.platform/v1").
func (p *Platform) MarshalJSON() ([]byte, error) {
	f := jsonForm{
		ABI: p.ABI, ID: p.ID(), Implementation: p.Implementation, Interpreter: p.Interpreter,
		LibDir: p.LibDir, Markers: p.Markers, PythonVersion: p.PythonVersion, Type: FormatType,
		Tags: make([]string, len(p.Tags)),
	}
	for i, t := range p.Tags {
		f.Tags[i] = t.String()
	}
	return canonical.Marshal(f)
}

// maxPlatformJSON bounds a platform file; real ones are under 100 KiB.
const maxPlatformJSON = 4 << 20

// ParseJSON reads a platform from its canonical JSON form (what
// `cruxprov platform show --json` prints, whose "platform" member is
// accepted too) and validates it: the type, CPython, "X.Y" agreeing with
// the markers, exactly the PEP 508 variables, a safe relative lib_dir,
// distinct single tags, and an id equal to the one the content implies.
// Every fault is a refusal.PlatformUnsupported naming the field.
func ParseJSON(data []byte) (*Platform, error) { return ParseJSONFile("", data) }

// ParseJSONFile is ParseJSON of the contents of the file name, which each
// refusal names (with several platform files, "platform file: tags
// empty" did not say which).
func ParseJSONFile(name string, data []byte) (*Platform, error) {
	what := "platform file"
	if name != "" {
		what += " " + name
	}
	bad := func(format string, args ...any) (*Platform, error) {
		return nil, refusal.New(refusal.PlatformUnsupported, what+": "+format+" (a platform file is the canonical JSON of a platform: make it again from the JSON form of a preset or of host, then edit it)", args...).WithRemedy(refusal.ActionPlatformList, "")
	}
	if len(data) > maxPlatformJSON {
		return bad("%d bytes is too large", len(data))
	}
	var wrapper struct {
		Schema   string          `json:"schema"`
		Platform json.RawMessage `json:"platform"`
	}
	if err := json.Unmarshal(data, &wrapper); err == nil && wrapper.Schema != "" && len(wrapper.Platform) > 0 {
		data = wrapper.Platform
	}
	var f struct {
		jsonForm
		Markers map[string]*string `json:"markers"`
	}
	if err := strictjson.Decode(data, &f, false); errors.Is(err, strictjson.ErrTrailing) {
		return bad("trailing data after the object")
	} else if err != nil {
		return bad("not a platform object: %s", jsonFault(err))
	}
	if f.Type != FormatType {
		return bad("type %q is not %q", f.Type, FormatType)
	}
	if f.Implementation != "cp" {
		return bad("implementation %q: only CPython (\"cp\") is supported", f.Implementation)
	}
	major, minor, ok := parseXY(f.PythonVersion)
	if !ok || major != 3 {
		return bad("python_version %q is not 3.Y", f.PythonVersion)
	}
	if !regexp.MustCompile(`^cp` + strconv.Itoa(major) + strconv.Itoa(minor) + `[a-z]*$`).MatchString(f.ABI) {
		return bad("abi %q does not match python_version %s", f.ABI, f.PythonVersion)
	}
	if f.Markers == nil {
		return bad("markers missing")
	}
	markers := make(map[string]string, len(MarkerVariables))
	for _, k := range MarkerVariables {
		v, ok := f.Markers[k]
		if !ok || v == nil {
			return bad("marker variable %s missing", k)
		}
		markers[k] = *v
	}
	if len(f.Markers) != len(MarkerVariables) {
		var extra []string
		for k := range f.Markers {
			if _, ok := markers[k]; !ok {
				extra = append(extra, k)
			}
		}
		sort.Strings(extra)
		return bad("unknown marker variables %s", strings.Join(extra, ", "))
	}
	if markers["python_version"] != f.PythonVersion {
		return bad("markers python_version %q differs from python_version %q", markers["python_version"], f.PythonVersion)
	}
	if f.LibDir == "" || path.IsAbs(f.LibDir) || path.Clean(f.LibDir) != f.LibDir || f.LibDir == "." ||
		strings.HasPrefix(f.LibDir, "../") || f.LibDir == ".." || strings.ContainsAny(f.LibDir, "\\\x00") {
		return bad("lib_dir %q is not a clean relative path", f.LibDir)
	}
	if len(f.Tags) == 0 {
		return bad("tags empty")
	}
	p := &Platform{
		Implementation: f.Implementation, PythonVersion: f.PythonVersion, ABI: f.ABI,
		LibDir: f.LibDir, Markers: markers, Interpreter: f.Interpreter, Tags: make([]Tag, 0, len(f.Tags)),
	}
	seen := make(map[Tag]bool, len(f.Tags))
	for i, s := range f.Tags {
		ts, err := ParseTag(s)
		if err != nil || len(ts) != 1 || ts[0].String() != s {
			return bad("tags[%d] %q is not one valid tag", i, s)
		}
		if seen[ts[0]] {
			return bad("tags[%d] %q is listed twice", i, s)
		}
		seen[ts[0]] = true
		p.Tags = append(p.Tags, ts[0])
	}
	if f.ID != p.ID() {
		return bad("id %q differs from the id its tags imply, %q", f.ID, p.ID())
	}
	return p, nil
}

// String returns the canonical id.
func (p *Platform) String() string { return p.ID() }

// fullVersion is "X.Y.0", what presets use for python_full_version.
func fullVersion(major, minor int) string { return fmt.Sprintf("%d.%d.0", major, minor) }

// jsonFault says what decoding a platform file found wrong in the file's
// own terms: encoding/json's message for a value of the wrong type named
// the Go type it was decoding into ("cannot unmarshal array into Go value
// of type struct { platform.jsonForm; Markers map[string]*string … }").
func jsonFault(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		where := "the document"
		switch field := strings.TrimPrefix(te.Field, "jsonForm."); {
		case field == "markers" && te.Type.Kind() != reflect.Map:
			where = `a value of "markers"` // encoding/json names the map, not the key
		case field != "":
			where = strconv.Quote(field)
		}
		return fmt.Sprintf("%s is a JSON %s, not %s", where, te.Value, jsonKind(te.Type))
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return "unknown key " + name // a JSON document has keys
	}
	return msg
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem()) + " or null"
	default:
		return t.Kind().String()
	}
}
