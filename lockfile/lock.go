// Package lockfile owns PEP 751 lock files (pylock.toml): strict parsing,
// the compatibility rules of DESIGN §4, and resolution of a lock for an
// explicit platform into a Resolution, one wheel per package.
//
// It does not fetch anything (index/ and fetch/ do), install anything
// (materialize/ does), or decide where a lock comes from. PEP 440 versions
// and PEP 508 markers live in its subpackages pep440/ and marker/.
package lockfile

import (
	"errors"
	"fmt"
	"net/url"
	pathpkg "path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pep440"
	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/wheel"
)

// Lock is a parsed, validated PEP 751 lock file. Names are PEP 503
// normalized and versions PEP 440 normalized; everything else is as
// written.
type Lock struct {
	LockVersion      string   // "1.0"
	Environments     []string // markers; empty = every environment
	RequiresPython   string   // a specifier set; "" = any
	Extras           []string // normalized
	DependencyGroups []string // normalized
	DefaultGroups    []string // normalized
	CreatedBy        string
	Packages         []Package

	env       []compiledMarker
	reqPython *compiledSpec
	markers   []compiledMarker // distinct package markers
	tags      []platform.Tag   // distinct wheel tags; wheels refer to them by index
	orderOnce sync.Once
	order     [][]int // package indexes grouped by name, names sorted (byName)
}

// Package is one [[packages]] entry.
type Package struct {
	Name           string // PEP 503 normalized
	Version        string // PEP 440 normalized; "" when the lock gives none
	Marker         string // "" = always
	RequiresPython string
	Dependencies   []map[string]any
	Index          string
	VCS            *VCS
	Directory      *Directory
	Archive        *File
	Sdist          *File
	Wheels         []File
	// AttestationIdentities are recorded as written; cruxprov does not
	// verify attestations.
	AttestationIdentities []map[string]any

	marker    int32 // index into Lock.markers; -1 = none
	reqPython *compiledSpec
}

// File is a wheel, sdist or archive entry.
type File struct {
	// Name is the file name: the lock's name, else the percent-decoded
	// last segment of url, else the last element of path.
	Name         string
	URL          string
	Path         string
	Size         *int64
	UploadTime   *time.Time
	Hashes       map[string]string // algorithm → lowercase hex
	Subdirectory string            // archives only

	sha256 digest.Digest  // Hashes["sha256"] parsed
	parsed wheel.Filename // wheels only
	tags   []int32        // wheels only: indexes into Lock.tags
}

// SHA256 returns the file's sha256 hash as lowercase hex, "" when absent.
func (f *File) SHA256() string { return f.Hashes["sha256"] }

// VCS is a packages.vcs source.
type VCS struct {
	Type, URL, Path, RequestedRevision, CommitID, Subdirectory string
}

// Directory is a packages.directory source.
type Directory struct {
	Path         string
	Editable     bool
	Subdirectory string
}

// Warning is something a reader should know but that does not stop the
// lock from being used: an unknown key, a newer minor lock-version.
type Warning struct {
	Key    string // the TOML key, e.g. "packages.foo"
	Detail string
}

func (w Warning) String() string { return w.Key + ": " + w.Detail }

// MarshalText is String: in JSON a warning is the one line "KEY: DETAIL",
// the shape of every --json document's warnings (inspect's and lock
// resolve's alike), not an object of Go field names.
func (w Warning) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// UnmarshalText reads what MarshalText wrote: the key up to the first
// ": ", the detail after it.
func (w *Warning) UnmarshalText(b []byte) error {
	k, d, ok := strings.Cut(string(b), ": ")
	if !ok {
		return fmt.Errorf("lock warning %q is not KEY: DETAIL", b)
	}
	*w = Warning{Key: k, Detail: d}
	return nil
}

// maxLock bounds a lock file; the largest real ones are a few MiB.
const maxLock = 64 << 20

func invalid(format string, args ...any) *refusal.Error {
	return refusal.New(refusal.LockInvalid, format, args...)
}

// Parse reads a PEP 751 lock file strictly (DESIGN §4). lock-version 1.x is
// read (a minor above 0 adds a warning); another major is
// refusal.LockVersionUnsupported. Unknown keys are warnings (one per key,
// not per occurrence), [tool] and packages.tool are ignored. Keys match as
// PEP 751 spells them, case and all. Anything malformed — bad TOML, a
// wrong type, a missing required key, an unparsable version, marker or
// specifier, a package with both wheels or an sdist and an archive, VCS or
// directory source, a wheel file name that does not parse or does not
// match its package — is refusal.LockInvalid naming the key and package,
// then what to do (fixAdvice, where the detail says no other).
func Parse(data []byte) (*Lock, []Warning, error) {
	l, warns, err := parse(data)
	if err != nil {
		return nil, nil, advised(err)
	}
	return l, warns, nil
}

// fixAdvice is what a lock_invalid refusal of Parse ends with where its
// detail says nothing else to do.
const fixAdvice = "fix it in the lock, or regenerate the lock with a PEP 751 locker (docs/lockfile.md)"

// advised ends a lock_invalid refusal's detail with fixAdvice, after its
// cause (said once: the detail quotes it, so the message does not repeat
// it), unless the detail already says to regenerate or relock. Most
// details named the fault alone ("created-by missing", "lock-version "1"
// is not MAJOR.MINOR"), with no next step.
func advised(err error) error {
	r, ok := err.(*refusal.Error)
	if !ok || r.Code != refusal.LockInvalid || strings.Contains(r.Detail, "regenerate") || strings.Contains(r.Detail, "relock") {
		return err
	}
	n := *r
	n.Detail = r.Message() + "; " + fixAdvice
	return &n
}

func parse(data []byte) (*Lock, []Warning, error) {
	if len(data) > maxLock {
		return nil, nil, invalid("lock file of %d bytes exceeds %d", len(data), maxLock)
	}
	doc, err := decodeTOML(string(data))
	if err != nil {
		return nil, nil, refusal.Wrap(refusal.LockInvalid, tomlError(err), "not a valid pylock.toml; regenerate it with a PEP 751 locker")
	}
	w := &walker{}
	// Each key to its slot first, no value read: lock-version is checked
	// before any is (a lock of another major may not have our shape). The
	// keys no case takes are stray: a missing required key's refusal names
	// them (one may be its misspelling), so the keys PEP 751 defines are
	// listed here, as the cases, and nowhere else.
	var lv, createdBy, requiresPython, environments, packages any
	var lists [3]any
	var stray []string
	for _, e := range doc.kv {
		k, v := e.k, e.v
		switch k {
		case "lock-version":
			lv = v
		case "tool":
		case "created-by":
			createdBy = v
		case "requires-python":
			requiresPython = v
		case "environments":
			environments = v
		case "extras":
			lists[0] = v
		case "dependency-groups":
			lists[1] = v
		case "default-groups":
			lists[2] = v
		case "packages":
			packages = v
		default:
			stray = append(stray, k)
		}
	}
	if lv == nil {
		return nil, nil, invalid("lock-version missing%s; a PEP 751 lock starts with lock-version = \"1.0\"", strayKeys(stray, "the lock"))
	}
	version, err := asString("lock-version", lv)
	if err != nil {
		return nil, nil, err
	}
	major, minor, ok := splitLockVersion(version)
	if !ok {
		return nil, nil, invalid("lock-version %q is not MAJOR.MINOR", version)
	}
	if major != "1" {
		return nil, nil, unsupported(version)
	}
	if minor > 0 {
		w.warns = append(w.warns, Warning{"lock-version", fmt.Sprintf("lock-version %s is newer than 1.0; read as 1.0, keys it adds are ignored", version)})
	}
	for _, k := range stray {
		w.unknown("", k)
	}
	l := &Lock{LockVersion: version}
	if environments != nil {
		if l.Environments, err = asStrings("environments", environments); err != nil {
			return nil, nil, err
		}
	}
	if createdBy == nil {
		return nil, nil, invalid("created-by missing%s", strayKeys(stray, "the lock"))
	}
	if l.CreatedBy, err = asString("created-by", createdBy); err != nil {
		return nil, nil, err
	}
	if packages == nil {
		return nil, nil, invalid("packages missing%s; a lock with no packages says packages = []", strayKeys(stray, "the lock"))
	}
	pkgs, err := asTables("packages", packages)
	if err != nil {
		return nil, nil, err
	}
	for i, e := range l.Environments {
		cm, err := compileMarker(e)
		if err != nil {
			return nil, nil, refusal.Wrap(refusal.LockInvalid, err, "environments[%d] %q is not a PEP 508 marker", i, e)
		}
		l.env = append(l.env, cm)
	}
	if requiresPython != nil {
		if l.RequiresPython, err = asString("requires-python", requiresPython); err != nil {
			return nil, nil, err
		}
		cs, err := compileSpec(l.RequiresPython)
		if err != nil {
			return nil, nil, refusal.Wrap(refusal.LockInvalid, err, "requires-python %q is not a PEP 440 specifier set", l.RequiresPython)
		}
		l.reqPython = cs
	}
	for n, list := range []struct {
		key string
		out *[]string
	}{{"extras", &l.Extras}, {"dependency-groups", &l.DependencyGroups}, {"default-groups", &l.DefaultGroups}} {
		if lists[n] == nil {
			continue
		}
		in, err := asStrings(list.key, lists[n])
		if err != nil {
			return nil, nil, err
		}
		for i, s := range in {
			if !validName(s) {
				return nil, nil, invalid("%s[%d] %q is not a valid name", list.key, i, s)
			}
			*list.out = append(*list.out, pep503.Normalize(s))
		}
	}
	w.markerIndex = map[string]int32{}
	w.tagIndex = map[platform.Tag]int32{}
	l.Packages = make([]Package, len(pkgs))
	for i, t := range pkgs {
		if err := w.addPackage(l, i, t); err != nil {
			return nil, nil, err
		}
	}
	return l, w.warns, nil
}

// splitLockVersion splits MAJOR.MINOR, each one to nine digits.
func splitLockVersion(v string) (major string, minor int, ok bool) {
	a, b, found := strings.Cut(v, ".")
	if !found || !digits(a, 9) || !digits(b, 9) {
		return "", 0, false
	}
	minor, _ = strconv.Atoi(b)
	return a, minor, true
}

func digits(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// walker carries what reading the document builds up besides the Lock.
type walker struct {
	tagSlab     []int32 // wheels' tag indexes are carved from here
	sizeSlab    []int64 // and files' sizes, which File holds by pointer
	warns       []Warning
	warned      map[string]bool
	markerIndex map[string]int32
	tagIndex    map[platform.Tag]int32
}

// size returns a pointer to n carved from a shared slab: a lock's
// thousands of files do not allocate an int64 each.
func (w *walker) size(n int64) *int64 {
	if len(w.sizeSlab) == 0 {
		w.sizeSlab = make([]int64, 512)
	}
	p := &w.sizeSlab[0]
	w.sizeSlab = w.sizeSlab[1:]
	*p = n
	return p
}

// tagSlice returns n tag indexes carved from a shared slab, so a lock of
// thousands of wheels does not allocate thousands of tiny slices.
func (w *walker) tagSlice(n int) []int32 {
	if n > len(w.tagSlab) {
		w.tagSlab = make([]int32, max(n, 1024))
	}
	s := w.tagSlab[:n:n]
	w.tagSlab = w.tagSlab[n:]
	return s
}

// strayKeys names, for the refusal of a required key a table lacks, the
// keys of the table that no case of its parse took (stray): a
// misspelling of the missing key ("lock-verison", "NAME") is one, and the
// refusal named only the key missing, the warning about the stray key
// being lost with it.
func strayKeys(stray []string, where string) string {
	quoted := make([]string, len(stray))
	for i, k := range stray {
		quoted[i] = toml.Key{k}.String()
	}
	switch len(quoted) {
	case 0:
		return ""
	case 1:
		return " (" + where + " has an unknown key, " + quoted[0] + ": a misspelling?)"
	}
	return " (" + where + " has unknown keys, " + strings.Join(quoted, ", ") + ": a misspelling?)"
}

// unknown records an unknown key once, however often it occurs.
func (w *walker) unknown(prefix, k string) {
	key := toml.Key{k}.String()
	if prefix != "" {
		key = prefix + "." + key
	}
	if w.warned[key] {
		return
	}
	if w.warned == nil {
		w.warned = map[string]bool{}
	}
	w.warned[key] = true
	w.warns = append(w.warns, Warning{key, "unknown key ignored"})
}

// typeName names a TOML value's type in a message.
func typeName(v any) string {
	switch v.(type) {
	case *string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case time.Time:
		return "datetime"
	case *tTable:
		return "table"
	case *tArray:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

func wrongType(where string, v any, want string) error {
	return invalid("%s is a %s, not %s", where, typeName(v), want)
}

func asString(where string, v any) (string, error) {
	s, ok := tString(v)
	if !ok {
		return "", wrongType(where, v, "a string")
	}
	return s, nil
}

func asStrings(where string, v any) ([]string, error) {
	a, ok := v.(*tArray)
	if !ok {
		return nil, wrongType(where, v, "an array of strings")
	}
	out := make([]string, len(a.elems))
	for i, e := range a.elems {
		s, ok := tString(e)
		if !ok {
			return nil, wrongType(fmt.Sprintf("%s[%d]", where, i), e, "a string")
		}
		out[i] = s
	}
	return out, nil
}

func asTable(where string, v any) (*tTable, error) {
	t, ok := v.(*tTable)
	if !ok {
		return nil, wrongType(where, v, "a table")
	}
	return t, nil
}

func asTables(where string, v any) ([]*tTable, error) {
	a, ok := v.(*tArray)
	if !ok {
		return nil, wrongType(where, v, "an array of tables")
	}
	out := make([]*tTable, len(a.elems))
	for i, e := range a.elems {
		t, ok := e.(*tTable)
		if !ok {
			return nil, wrongType(fmt.Sprintf("%s[%d]", where, i), e, "a table")
		}
		out[i] = t
	}
	return out, nil
}

// toMap turns a free-form table (dependencies, attestation identities)
// into plain Go values: map[string]any, []any, and the scalars.
func toMap(t *tTable) map[string]any {
	m := make(map[string]any, len(t.kv))
	for _, e := range t.kv {
		m[e.k] = plain(e.v)
	}
	return m
}

func plain(v any) any {
	switch v := v.(type) {
	case *tTable:
		return toMap(v)
	case *tArray:
		out := make([]any, len(v.elems))
		for i, e := range v.elems {
			out[i] = plain(e)
		}
		return out
	case *string:
		return *v
	}
	return v
}

// freeTables reads an array of free-form tables.
func freeTables(where string, v any) ([]map[string]any, error) {
	ts, err := asTables(where, v)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(ts))
	for i, t := range ts {
		out[i] = toMap(t)
	}
	return out, nil
}

func unsupported(v string) error {
	return refusal.New(refusal.LockVersionUnsupported, "lock-version %s: cruxprov reads lock-version 1.x; relock with a PEP 751 (1.0) locker or upgrade cruxprov", v)
}

// tomlError keeps the TOML library's message (it names the key and line)
// but drops its multi-line context.
func tomlError(err error) error {
	if pe, ok := err.(toml.ParseError); ok {
		return fmt.Errorf("line %d: %s", pe.Position.Line, pe.Message)
	}
	return err
}

// validName reports whether s is a valid package, extra or group name:
// ASCII letters and digits, with '.', '_' and '-' inside.
func validName(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c)
}

// rawPackage is one [[packages]] table split by key, types not yet checked.
type rawPackage struct {
	name, version, marker, requiresPython, index any
	dependencies, attestations                   any
	vcs, directory, archive, sdist, wheels       any
}

func (w *walker) addPackage(l *Lock, i int, t *tTable) error {
	var rp rawPackage
	var stray []string // the keys no case takes, for a missing name's refusal
	for _, e := range t.kv {
		k, v := e.k, e.v
		switch k {
		case "name":
			rp.name = v
		case "version":
			rp.version = v
		case "marker":
			rp.marker = v
		case "requires-python":
			rp.requiresPython = v
		case "dependencies":
			rp.dependencies = v
		case "index":
			rp.index = v
		case "vcs":
			rp.vcs = v
		case "directory":
			rp.directory = v
		case "archive":
			rp.archive = v
		case "sdist":
			rp.sdist = v
		case "wheels":
			rp.wheels = v
		case "attestation-identities":
			rp.attestations = v
		case "tool":
		default:
			w.unknown("packages", k)
			stray = append(stray, k)
		}
	}
	if rp.name == nil {
		return invalid("packages[%d].name missing%s", i, strayKeys(stray, "the package"))
	}
	name, ok := tString(rp.name)
	if !ok {
		return wrongType(fmt.Sprintf("packages[%d].name", i), rp.name, "a string")
	}
	if !validName(name) {
		return invalid("packages[%d].name %q is not a valid package name", i, name)
	}
	p := &l.Packages[i]
	p.Name = pep503.Normalize(name)
	where := "packages[" + strconv.Itoa(i) + "] (" + p.Name + ")"
	asString := func(key string, v any) (string, error) {
		if s, ok := tString(v); ok {
			return s, nil
		}
		return "", wrongType(where+key, v, "a string")
	}
	var pkgVersion pep440.Version
	var rawVersion string
	var err error
	if rp.version != nil {
		if rawVersion, err = asString(".version", rp.version); err != nil {
			return err
		}
		v, err := pep440.Parse(rawVersion)
		if err != nil {
			return refusal.Wrap(refusal.LockInvalid, err, "%s.version %q is not a PEP 440 version", where, rawVersion)
		}
		p.Version = v.String()
		pkgVersion = v
	}
	p.marker = -1
	if rp.marker != nil {
		if p.Marker, err = asString(".marker", rp.marker); err != nil {
			return err
		}
		idx, ok := w.markerIndex[p.Marker]
		if !ok {
			cm, err := compileMarker(p.Marker)
			if err != nil {
				return refusal.Wrap(refusal.LockInvalid, err, "%s.marker %q is not a PEP 508 marker", where, p.Marker)
			}
			idx = int32(len(l.markers))
			l.markers = append(l.markers, cm)
			w.markerIndex[p.Marker] = idx
		}
		p.marker = idx
	}
	if rp.requiresPython != nil {
		if p.RequiresPython, err = asString(".requires-python", rp.requiresPython); err != nil {
			return err
		}
		cs, err := compileSpec(p.RequiresPython)
		if err != nil {
			return refusal.Wrap(refusal.LockInvalid, err, "%s.requires-python %q is not a PEP 440 specifier set", where, p.RequiresPython)
		}
		p.reqPython = cs
	}
	if rp.dependencies != nil {
		if p.Dependencies, err = freeTables(where+".dependencies", rp.dependencies); err != nil {
			return err
		}
	}
	if rp.attestations != nil {
		if p.AttestationIdentities, err = freeTables(where+".attestation-identities", rp.attestations); err != nil {
			return err
		}
	}
	for j, a := range p.AttestationIdentities {
		if k, ok := a["kind"].(string); !ok || k == "" {
			return invalid("%s.attestation-identities[%d].kind missing", where, j)
		}
	}
	if rp.index != nil {
		if p.Index, err = asString(".index", rp.index); err != nil {
			return err
		}
		if _, err := parseURL(where+".index", p.Index); err != nil {
			return err
		}
	}
	var kinds []string
	if rp.vcs != nil {
		kinds = append(kinds, "vcs")
	}
	if rp.directory != nil {
		kinds = append(kinds, "directory")
	}
	if rp.archive != nil {
		kinds = append(kinds, "archive")
	}
	if rp.sdist != nil || rp.wheels != nil {
		kinds = append(kinds, "sdist/wheels")
	}
	if len(kinds) > 1 {
		return invalid("%s has several sources (%s); a package has exactly one of vcs, directory, archive, or sdist and wheels", where, strings.Join(kinds, ", "))
	}
	if rp.vcs != nil {
		if p.VCS, err = w.vcs(where+".vcs", rp.vcs); err != nil {
			return err
		}
	}
	if rp.directory != nil {
		if p.Directory, err = w.directory(where+".directory", rp.directory); err != nil {
			return err
		}
	}
	if rp.archive != nil {
		f, err := w.file(where, ".archive", -1, rp.archive, true)
		if err != nil {
			return err
		}
		p.Archive = &f
	}
	if rp.sdist != nil {
		f, err := w.file(where, ".sdist", -1, rp.sdist, false)
		if err != nil {
			return err
		}
		p.Sdist = &f
	}
	if rp.wheels == nil {
		return nil
	}
	wheels, err := asTables(where+".wheels", rp.wheels)
	if err != nil {
		return err
	}
	if len(wheels) > 0 {
		p.Wheels = make([]File, len(wheels))
	}
	for j, wt := range wheels {
		f, err := w.file(where, ".wheels", j, wt, false)
		if err != nil {
			return err
		}
		fn, err := wheel.ParseFilename(f.Name)
		if err != nil {
			return refusal.Wrap(refusal.LockInvalid, err, "%s name %q is not a wheel file name", wheelWhere(where, j), f.Name)
		}
		if fn.Name != p.Name {
			return invalid("%s %q is a wheel of %s, not %s", wheelWhere(where, j), f.Name, fn.Name, p.Name)
		}
		// Most wheels spell the version as the package does: the same
		// string parses to the same version, so parse it once.
		if p.Version == "" || fn.Version != rawVersion {
			fv, err := pep440.Parse(fn.Version)
			if err != nil {
				return refusal.Wrap(refusal.LockInvalid, err, "%s %q has an invalid version", wheelWhere(where, j), f.Name)
			}
			if p.Version == "" {
				p.Version, pkgVersion, rawVersion = fv.String(), fv, fn.Version
			} else if !fv.Equal(pkgVersion) {
				return invalid("%s %q is version %s, the package is %s", wheelWhere(where, j), f.Name, fv.String(), p.Version)
			}
		}
		f.parsed = fn
		f.tags = w.tagSlice(len(fn.Tags))
		for k, t := range fn.Tags {
			id, ok := w.tagIndex[t]
			if !ok {
				id = int32(len(l.tags))
				l.tags = append(l.tags, t)
				w.tagIndex[t] = id
			}
			f.tags[k] = id
		}
		p.Wheels[j] = f
	}
	return nil
}

func wheelWhere(where string, j int) string {
	return where + ".wheels[" + strconv.Itoa(j) + "]"
}

func (w *walker) vcs(where string, v any) (*VCS, error) {
	t, err := asTable(where, v)
	if err != nil {
		return nil, err
	}
	var typ, url, path, commit *string
	out := &VCS{}
	for _, e := range t.kv {
		k := e.k
		var dst *string
		switch k {
		case "type":
			dst, typ = &out.Type, &out.Type
		case "url":
			dst, url = &out.URL, &out.URL
		case "path":
			dst, path = &out.Path, &out.Path
		case "requested-revision":
			dst = &out.RequestedRevision
		case "commit-id":
			dst, commit = &out.CommitID, &out.CommitID
		case "subdirectory":
			dst = &out.Subdirectory
		default:
			w.unknown("packages.vcs", k)
			continue
		}
		if *dst, err = asString(where+"."+k, e.v); err != nil {
			return nil, err
		}
	}
	if typ == nil || *typ == "" {
		return nil, invalid("%s.type missing", where)
	}
	if url == nil && path == nil {
		return nil, invalid("%s needs url or path", where)
	}
	if commit == nil || *commit == "" {
		return nil, invalid("%s.commit-id missing", where)
	}
	return out, nil
}

func (w *walker) directory(where string, v any) (*Directory, error) {
	t, err := asTable(where, v)
	if err != nil {
		return nil, err
	}
	out := &Directory{}
	for _, e := range t.kv {
		k, v := e.k, e.v
		switch k {
		case "path":
			out.Path, err = asString(where+".path", v)
		case "subdirectory":
			out.Subdirectory, err = asString(where+".subdirectory", v)
		case "editable":
			b, ok := v.(bool)
			if !ok {
				err = wrongType(where+".editable", v, "a boolean")
			}
			out.Editable = b
		default:
			w.unknown("packages.directory", k)
		}
		if err != nil {
			return nil, err
		}
	}
	if out.Path == "" {
		return nil, invalid("%s.path missing", where)
	}
	return out, nil
}

// file validates a wheel, sdist or archive table (the key part of where,
// j its index among wheels or -1) and derives its name. Only an archive
// has a subdirectory.
func (w *walker) file(pkgWhere, part string, j int, v any, archive bool) (File, error) {
	at := func() string {
		if j < 0 {
			return pkgWhere + part
		}
		return wheelWhere(pkgWhere, j)
	}
	atURL := func() string { return at() + ".url" }
	t, ok := v.(*tTable)
	if !ok {
		return File{}, wrongType(at(), v, "a table")
	}
	var f File
	var name string
	var hasName, hasURL, hasPath bool
	var hashes *tTable
	for _, e := range t.kv {
		k, v := e.k, e.v
		switch k {
		case "name", "url", "path", "subdirectory":
			s, ok := tString(v)
			if !ok {
				return File{}, wrongType(at()+"."+k, v, "a string")
			}
			switch k {
			case "name":
				name, hasName = s, true
			case "url":
				f.URL, hasURL = s, true
			case "path":
				f.Path, hasPath = s, true
			case "subdirectory":
				if !archive {
					return File{}, invalid("%s.subdirectory is not a PEP 751 key", at())
				}
				f.Subdirectory = s
			}
		case "size":
			n, ok := v.(int64)
			if !ok {
				return File{}, wrongType(at()+".size", v, "an integer")
			}
			if n < 0 {
				return File{}, invalid("%s.size %d is negative", at(), n)
			}
			f.Size = w.size(n)
		case "upload-time":
			var tm time.Time
			switch v := v.(type) {
			case time.Time:
				tm = v
			case *string: // as encoding.TextUnmarshaler reads one
				if err := tm.UnmarshalText([]byte(*v)); err != nil {
					return File{}, refusal.Wrap(refusal.LockInvalid, err, "%s.upload-time %q is not a date-time", at(), *v)
				}
			default:
				return File{}, wrongType(at()+".upload-time", v, "a date-time")
			}
			f.UploadTime = &tm
		case "hashes":
			if hashes, ok = v.(*tTable); !ok {
				return File{}, wrongType(at()+".hashes", v, "a table")
			}
		default:
			w.unknown("packages"+part, k)
		}
	}
	if !hasURL && !hasPath {
		return File{}, invalid("%s needs url or path", at())
	}
	if hashes != nil && len(hashes.kv) > 0 {
		f.Hashes = make(map[string]string, len(hashes.kv))
		kv := hashes.kv
		if len(kv) > 1 { // check in a stable order, so the same fault is named
			kv = slices.Clone(kv)
			slices.SortFunc(kv, func(a, b tkv) int { return strings.Compare(a.k, b.k) })
		}
		for _, e := range kv {
			a := e.k
			h, ok := tString(e.v)
			if !ok || !isHexDigest(h) || a == "sha256" && len(h) != 64 {
				return File{}, invalid("%s.hashes.%s %q is not a hex digest", at(), a, h)
			}
			f.Hashes[a] = lowerHex(h)
		}
	}
	if h, ok := f.Hashes["sha256"]; ok {
		d, err := digest.ParseHex(h)
		if err != nil {
			return File{}, refusal.Wrap(refusal.LockInvalid, err, "%s.hashes.sha256 %q is not a sha256 digest", at(), h)
		}
		f.sha256 = d
	}
	var urlName string
	if hasURL {
		var err error
		if urlName, err = fileURLName(atURL, f.URL, !hasName); err != nil {
			return File{}, err
		}
	}
	switch {
	case hasName:
		f.Name = name
	case hasURL:
		f.Name = urlName
	default:
		f.Name = pathpkg.Base(strings.ReplaceAll(f.Path, "\\", "/"))
	}
	if f.Name == "" || strings.ContainsAny(f.Name, "/\\\x00") {
		return File{}, invalid("%s file name %q is empty or has a path separator", at(), f.Name)
	}
	return f, nil
}

// fileURLName checks the URL s of a file (parseURLAt) and, when
// wantName, returns the last segment of its path, unescaped: the file's
// name when the lock does not give it. A plain http(s) URL takes a fast
// path (simpleURLName) that gives the same answer as net/url without
// parsing, since a lock of thousands of wheels spent a sixth of its
// parse in url.Parse.
func fileURLName(where func() string, s string, wantName bool) (string, error) {
	if name, ok := simpleURLName(s); ok {
		return name, nil
	}
	u, err := parseURLAt(where, s)
	if err != nil || !wantName {
		return "", err
	}
	seg := u.EscapedPath()
	if u.Opaque != "" {
		seg = u.Opaque
	}
	seg = seg[strings.LastIndexByte(seg, '/')+1:]
	name, err := pathUnescape(seg)
	if err != nil {
		return "", refusal.Wrap(refusal.LockInvalid, err, "%s %q has a bad escape", where(), redactURL(s))
	}
	return name, nil
}

// simplePathByte holds the bytes a path of simpleURLName may have.
var simplePathByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c)) || strings.IndexByte("-._~/:", byte(c)) >= 0
	}
	return t
}()

// simpleURLName returns the last path segment of s when s is an
// "http://" or "https://" URL whose host is letters, digits, '.' and '-'
// with an optional numeric port, and whose path holds only letters,
// digits and "-._~/:" (nothing escaped, no query, fragment or user
// information): for such a URL url.Parse succeeds, the escaped path is
// the path as written, and nothing needs unescaping. Anything else is
// not ok and goes through url.Parse; FuzzSimpleURLName holds the two to
// the same answer.
func simpleURLName(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, "https://")
	if !ok {
		if rest, ok = strings.CutPrefix(s, "http://"); !ok {
			return "", false
		}
	}
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return "", false
	}
	host, path := rest[:slash], rest[slash:]
	if colon := strings.IndexByte(host, ':'); colon >= 0 {
		for i := colon + 1; i < len(host); i++ {
			if host[i] < '0' || host[i] > '9' {
				return "", false
			}
		}
		host = host[:colon]
	}
	if host == "" {
		return "", false
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; !isAlnum(c) && c != '.' && c != '-' {
			return "", false
		}
	}
	for i := 0; i < len(path); i++ {
		if !simplePathByte[path[i]] {
			return "", false
		}
	}
	return path[strings.LastIndexByte(path, '/')+1:], true
}

// pathUnescape is url.PathUnescape without the copy when there is nothing
// to unescape.
func pathUnescape(s string) (string, error) {
	if !strings.ContainsRune(s, '%') {
		return s, nil
	}
	return url.PathUnescape(s)
}

func isHexDigest(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

// lowerHex lowercases hex digits, without a copy when they already are.
func lowerHex(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'F' {
			return strings.ToLower(s)
		}
	}
	return s
}

// parseURL accepts the URLs a lock may point at: http, https and file.
func parseURL(where, s string) (*url.URL, error) {
	return parseURLAt(func() string { return where }, s)
}

// parseURLAt is parseURL naming the key only when it refuses.
func parseURLAt(where func() string, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // its message repeats the URL
			err = ue.Err
		}
		return nil, refusal.Wrap(refusal.LockInvalid, err, "%s %q is not a URL", where(), redactURL(s))
	}
	switch u.Scheme {
	case "http", "https", "file":
		return u, nil
	}
	return nil, invalid("%s %q: only http, https and file URLs are allowed", where(), redactURL(s))
}

// redactURL hides a credential a URL of the lock may carry (a private
// index's user:token@, a signed query) before it goes into a message.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || (u.Host == "" && u.User == nil) {
		if strings.Contains(s, "@") {
			return "<URL hidden: it may carry a credential>"
		}
		return s
	}
	if u.User != nil {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if u.RawQuery != "" {
		u.RawQuery = "REDACTED"
	}
	return u.String()
}
