// Package lockfile owns PEP 751 lock files (pylock.toml): strict parsing,
// the compatibility rules of DESIGN §4, and resolution of a lock for an
// explicit platform into a Resolution, one wheel per package.
//
// It does not fetch anything (index/ and fetch/ do), install anything
// (materialize/ does), or decide where a lock comes from. PEP 440 versions
// and PEP 508 markers live in its subpackages pep440/ and marker/.
package lockfile

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/lockfile/pep440"
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

// The TOML shape, decoded strictly (wrong types are errors).
type rawFile struct {
	Name         *string    `toml:"name"`
	UploadTime   *time.Time `toml:"upload-time"`
	URL          *string    `toml:"url"`
	Path         *string    `toml:"path"`
	Size         *int64     `toml:"size"`
	Hashes       any        `toml:"hashes"` // a table of strings: checked by hand, see tables
	Subdirectory *string    `toml:"subdirectory"`
}

type rawVCS struct {
	Type              *string `toml:"type"`
	URL               *string `toml:"url"`
	Path              *string `toml:"path"`
	RequestedRevision *string `toml:"requested-revision"`
	CommitID          *string `toml:"commit-id"`
	Subdirectory      *string `toml:"subdirectory"`
}

type rawDirectory struct {
	Path         *string `toml:"path"`
	Editable     bool    `toml:"editable"`
	Subdirectory *string `toml:"subdirectory"`
}

type rawPackage struct {
	Name                  *string       `toml:"name"`
	Version               *string       `toml:"version"`
	Marker                *string       `toml:"marker"`
	RequiresPython        *string       `toml:"requires-python"`
	Dependencies          []any         `toml:"dependencies"`
	Index                 *string       `toml:"index"`
	VCS                   *rawVCS       `toml:"vcs"`
	Directory             *rawDirectory `toml:"directory"`
	Archive               *rawFile      `toml:"archive"`
	Sdist                 *rawFile      `toml:"sdist"`
	Wheels                []rawFile     `toml:"wheels"`
	AttestationIdentities []any         `toml:"attestation-identities"`
	Tool                  any           `toml:"tool"`
}

type rawLock struct {
	LockVersion      *string      `toml:"lock-version"`
	Environments     []string     `toml:"environments"`
	RequiresPython   *string      `toml:"requires-python"`
	Extras           []string     `toml:"extras"`
	DependencyGroups []string     `toml:"dependency-groups"`
	DefaultGroups    []string     `toml:"default-groups"`
	CreatedBy        *string      `toml:"created-by"`
	Packages         []rawPackage `toml:"packages"`
	Tool             any          `toml:"tool"`
}

// tables checks that every element of a TOML array is a table. The TOML
// library silently drops a non-table value decoded into a Go map, so map
// shaped fields are decoded as any and checked here.
func tables(where string, xs []any) ([]map[string]any, error) {
	if xs == nil {
		return nil, nil
	}
	out := make([]map[string]any, len(xs))
	for i, x := range xs {
		m, ok := x.(map[string]any)
		if !ok {
			return nil, invalid("%s[%d] is a %T, not a table", where, i, x)
		}
		out[i] = m
	}
	return out, nil
}

// maxLock bounds a lock file; the largest real ones are a few MiB.
const maxLock = 64 << 20

var lockVersionRE = regexp.MustCompile(`^(\d{1,9})\.(\d{1,9})$`)

func invalid(format string, args ...any) *refusal.Error {
	return refusal.New(refusal.LockInvalid, format, args...)
}

// Parse reads a PEP 751 lock file strictly (DESIGN §4). lock-version 1.x is
// read (a minor above 0 adds a warning); another major is
// refusal.LockVersionUnsupported. Unknown keys are warnings, [tool] and
// packages.tool are ignored. Anything malformed — bad TOML, a wrong type,
// a missing required key, an unparsable version, marker or specifier, a
// package with both wheels or an sdist and an archive, VCS or directory
// source, a wheel file name that does not parse or does not match its
// package — is refusal.LockInvalid naming the key and package.
func Parse(data []byte) (*Lock, []Warning, error) {
	if len(data) > maxLock {
		return nil, nil, invalid("lock file of %d bytes exceeds %d", len(data), maxLock)
	}
	var raw rawLock
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&raw)
	if err != nil {
		// A lock of another major may not even have our shape: say so first.
		var v struct {
			LockVersion string `toml:"lock-version"`
		}
		if _, verr := toml.NewDecoder(bytes.NewReader(data)).Decode(&v); verr == nil {
			if m := lockVersionRE.FindStringSubmatch(v.LockVersion); m != nil && m[1] != "1" {
				return nil, nil, unsupported(v.LockVersion)
			}
		}
		return nil, nil, refusal.Wrap(refusal.LockInvalid, tomlError(err), "not a valid pylock.toml; regenerate it with a PEP 751 locker")
	}
	var warns []Warning
	if raw.LockVersion == nil {
		return nil, nil, invalid("lock-version missing; a PEP 751 lock starts with lock-version = \"1.0\"")
	}
	m := lockVersionRE.FindStringSubmatch(*raw.LockVersion)
	if m == nil {
		return nil, nil, invalid("lock-version %q is not MAJOR.MINOR", *raw.LockVersion)
	}
	if m[1] != "1" {
		return nil, nil, unsupported(*raw.LockVersion)
	}
	if minor, _ := strconv.Atoi(m[2]); minor > 0 {
		warns = append(warns, Warning{"lock-version", fmt.Sprintf("lock-version %s is newer than 1.0; read as 1.0, keys it adds are ignored", *raw.LockVersion)})
	}
	for _, k := range md.Undecoded() {
		if opaqueKey(k) {
			continue
		}
		warns = append(warns, Warning{k.String(), "unknown key ignored"})
	}
	if raw.CreatedBy == nil {
		return nil, nil, invalid("created-by missing")
	}
	if !md.IsDefined("packages") {
		return nil, nil, invalid("packages missing; a lock with no packages says packages = []")
	}
	l := &Lock{LockVersion: *raw.LockVersion, CreatedBy: *raw.CreatedBy, Environments: raw.Environments}
	for i, e := range raw.Environments {
		cm, err := compileMarker(e)
		if err != nil {
			return nil, nil, refusal.Wrap(refusal.LockInvalid, err, "environments[%d] %q is not a PEP 508 marker", i, e)
		}
		l.env = append(l.env, cm)
	}
	if raw.RequiresPython != nil {
		l.RequiresPython = *raw.RequiresPython
		cs, err := compileSpec(l.RequiresPython)
		if err != nil {
			return nil, nil, refusal.Wrap(refusal.LockInvalid, err, "requires-python %q is not a PEP 440 specifier set", l.RequiresPython)
		}
		l.reqPython = cs
	}
	for _, list := range []struct {
		key string
		in  []string
		out *[]string
	}{{"extras", raw.Extras, &l.Extras}, {"dependency-groups", raw.DependencyGroups, &l.DependencyGroups}, {"default-groups", raw.DefaultGroups, &l.DefaultGroups}} {
		for i, s := range list.in {
			if !nameRE.MatchString(s) {
				return nil, nil, invalid("%s[%d] %q is not a valid name", list.key, i, s)
			}
			*list.out = append(*list.out, wheel.NormalizeName(s))
		}
	}
	markerIndex := map[string]int32{}
	tagIndex := map[platform.Tag]int32{}
	l.Packages = make([]Package, len(raw.Packages))
	for i := range raw.Packages {
		if err := l.addPackage(i, &raw.Packages[i], markerIndex, tagIndex); err != nil {
			return nil, nil, err
		}
	}
	return l, warns, nil
}

// opaqueKeys are the keys whose contents are free-form (tool tables) or
// decoded as any and checked by hand (hashes, dependencies, attestation
// identities), so the TOML library reports their members as undecoded.
var opaqueKeys = [][]string{
	{"tool"}, {"packages", "tool"}, {"packages", "dependencies"}, {"packages", "attestation-identities"},
	{"packages", "wheels", "hashes"}, {"packages", "sdist", "hashes"}, {"packages", "archive", "hashes"},
}

func opaqueKey(k toml.Key) bool {
	for _, o := range opaqueKeys {
		if len(k) > len(o) && slices.Equal(k[:len(o)], o) {
			return true
		}
	}
	return false
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

var nameRE = regexp.MustCompile(`^(?i:[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$`)

func (l *Lock) addPackage(i int, rp *rawPackage, markerIndex map[string]int32, tagIndex map[platform.Tag]int32) error {
	if rp.Name == nil {
		return invalid("packages[%d].name missing", i)
	}
	if !nameRE.MatchString(*rp.Name) {
		return invalid("packages[%d].name %q is not a valid package name", i, *rp.Name)
	}
	p := &l.Packages[i]
	p.Name = wheel.NormalizeName(*rp.Name)
	where := fmt.Sprintf("packages[%d] (%s)", i, p.Name)
	var pkgVersion pep440.Version
	if rp.Version != nil {
		v, err := pep440.Parse(*rp.Version)
		if err != nil {
			return refusal.Wrap(refusal.LockInvalid, err, "%s.version %q is not a PEP 440 version", where, *rp.Version)
		}
		p.Version = v.String()
		pkgVersion = v
	}
	p.marker = -1
	if rp.Marker != nil {
		p.Marker = *rp.Marker
		idx, ok := markerIndex[p.Marker]
		if !ok {
			cm, err := compileMarker(p.Marker)
			if err != nil {
				return refusal.Wrap(refusal.LockInvalid, err, "%s.marker %q is not a PEP 508 marker", where, p.Marker)
			}
			idx = int32(len(l.markers))
			l.markers = append(l.markers, cm)
			markerIndex[p.Marker] = idx
		}
		p.marker = idx
	}
	if rp.RequiresPython != nil {
		p.RequiresPython = *rp.RequiresPython
		cs, err := compileSpec(p.RequiresPython)
		if err != nil {
			return refusal.Wrap(refusal.LockInvalid, err, "%s.requires-python %q is not a PEP 440 specifier set", where, p.RequiresPython)
		}
		p.reqPython = cs
	}
	var err error
	if p.Dependencies, err = tables(where+".dependencies", rp.Dependencies); err != nil {
		return err
	}
	if p.AttestationIdentities, err = tables(where+".attestation-identities", rp.AttestationIdentities); err != nil {
		return err
	}
	for j, a := range p.AttestationIdentities {
		if k, ok := a["kind"].(string); !ok || k == "" {
			return invalid("%s.attestation-identities[%d].kind missing", where, j)
		}
	}
	if rp.Index != nil {
		if _, err := parseURL(where+".index", *rp.Index); err != nil {
			return err
		}
		p.Index = *rp.Index
	}
	var kinds []string
	if rp.VCS != nil {
		kinds = append(kinds, "vcs")
	}
	if rp.Directory != nil {
		kinds = append(kinds, "directory")
	}
	if rp.Archive != nil {
		kinds = append(kinds, "archive")
	}
	if rp.Sdist != nil || rp.Wheels != nil {
		kinds = append(kinds, "sdist/wheels")
	}
	if len(kinds) > 1 {
		return invalid("%s has several sources (%s); a package has exactly one of vcs, directory, archive, or sdist and wheels", where, strings.Join(kinds, ", "))
	}
	if v := rp.VCS; v != nil {
		if v.Type == nil || *v.Type == "" {
			return invalid("%s.vcs.type missing", where)
		}
		if v.URL == nil && v.Path == nil {
			return invalid("%s.vcs needs url or path", where)
		}
		if v.CommitID == nil || *v.CommitID == "" {
			return invalid("%s.vcs.commit-id missing", where)
		}
		p.VCS = &VCS{Type: *v.Type, URL: str(v.URL), Path: str(v.Path), RequestedRevision: str(v.RequestedRevision), CommitID: *v.CommitID, Subdirectory: str(v.Subdirectory)}
	}
	if d := rp.Directory; d != nil {
		if d.Path == nil || *d.Path == "" {
			return invalid("%s.directory.path missing", where)
		}
		p.Directory = &Directory{Path: *d.Path, Editable: d.Editable, Subdirectory: str(d.Subdirectory)}
	}
	if rp.Archive != nil {
		if p.Archive, err = file(where+".archive", rp.Archive); err != nil {
			return err
		}
	}
	if rp.Sdist != nil {
		if rp.Sdist.Subdirectory != nil {
			return invalid("%s.sdist.subdirectory is not a PEP 751 key", where)
		}
		if p.Sdist, err = file(where+".sdist", rp.Sdist); err != nil {
			return err
		}
	}
	if len(rp.Wheels) > 0 {
		p.Wheels = make([]File, len(rp.Wheels))
	}
	for j := range rp.Wheels {
		w := fmt.Sprintf("%s.wheels[%d]", where, j)
		if rp.Wheels[j].Subdirectory != nil {
			return invalid("%s.subdirectory is not a PEP 751 key", w)
		}
		f, err := file(w, &rp.Wheels[j])
		if err != nil {
			return err
		}
		fn, err := wheel.ParseFilename(f.Name)
		if err != nil {
			return refusal.Wrap(refusal.LockInvalid, err, "%s name %q is not a wheel file name", w, f.Name)
		}
		if fn.Name != p.Name {
			return invalid("%s %q is a wheel of %s, not %s", w, f.Name, fn.Name, p.Name)
		}
		fv, err := pep440.Parse(fn.Version)
		if err != nil {
			return refusal.Wrap(refusal.LockInvalid, err, "%s %q has an invalid version", w, f.Name)
		}
		if p.Version == "" {
			p.Version, pkgVersion = fv.String(), fv
		} else if !fv.Equal(pkgVersion) {
			return invalid("%s %q is version %s, the package is %s", w, f.Name, fv.String(), p.Version)
		}
		f.parsed = fn
		f.tags = make([]int32, len(fn.Tags))
		for k, t := range fn.Tags {
			id, ok := tagIndex[t]
			if !ok {
				id = int32(len(l.tags))
				l.tags = append(l.tags, t)
				tagIndex[t] = id
			}
			f.tags[k] = id
		}
		p.Wheels[j] = *f
	}
	return nil
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

var hexRE = regexp.MustCompile(`^[0-9a-fA-F]+$`)

// file validates a wheel, sdist or archive table and derives its name.
func file(where string, r *rawFile) (*File, error) {
	f := &File{URL: str(r.URL), Path: str(r.Path), Size: r.Size, UploadTime: r.UploadTime, Subdirectory: str(r.Subdirectory)}
	if r.URL == nil && r.Path == nil {
		return nil, invalid("%s needs url or path", where)
	}
	if f.Size != nil && *f.Size < 0 {
		return nil, invalid("%s.size %d is negative", where, *f.Size)
	}
	hashes, ok := r.Hashes.(map[string]any)
	if r.Hashes != nil && !ok {
		return nil, invalid("%s.hashes is a %T, not a table", where, r.Hashes)
	}
	if len(hashes) > 0 {
		f.Hashes = make(map[string]string, len(hashes))
	}
	algs := make([]string, 0, len(hashes))
	for a := range hashes {
		algs = append(algs, a)
	}
	sort.Strings(algs)
	for _, a := range algs {
		h, ok := hashes[a].(string)
		if !ok || !hexRE.MatchString(h) || a == "sha256" && len(h) != 64 {
			return nil, invalid("%s.hashes.%s %q is not a hex digest", where, a, h)
		}
		f.Hashes[a] = strings.ToLower(h)
	}
	if h, ok := f.Hashes["sha256"]; ok {
		d, err := digest.ParseHex(h)
		if err != nil {
			return nil, refusal.Wrap(refusal.LockInvalid, err, "%s.hashes.sha256 %q is not a sha256 digest", where, h)
		}
		f.sha256 = d
	}
	if r.URL != nil && r.Name != nil {
		if _, err := parseURL(where+".url", *r.URL); err != nil {
			return nil, err
		}
	}
	switch {
	case r.Name != nil:
		f.Name = *r.Name
	case r.URL != nil:
		u, err := parseURL(where+".url", *r.URL)
		if err != nil {
			return nil, err
		}
		seg := u.EscapedPath()
		if u.Opaque != "" {
			seg = u.Opaque
		}
		seg = seg[strings.LastIndexByte(seg, '/')+1:]
		name, err := url.PathUnescape(seg)
		if err != nil {
			return nil, refusal.Wrap(refusal.LockInvalid, err, "%s.url %q has a bad escape", where, redactURL(*r.URL))
		}
		f.Name = name
	default:
		f.Name = path.Base(strings.ReplaceAll(*r.Path, "\\", "/"))
	}
	if f.Name == "" || strings.ContainsAny(f.Name, "/\\\x00") {
		return nil, invalid("%s file name %q is empty or has a path separator", where, f.Name)
	}
	return f, nil
}

// parseURL accepts the URLs a lock may point at: http, https and file.
func parseURL(where, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // its message repeats the URL
			err = ue.Err
		}
		return nil, refusal.Wrap(refusal.LockInvalid, err, "%s %q is not a URL", where, redactURL(s))
	}
	switch u.Scheme {
	case "http", "https", "file":
		return u, nil
	}
	return nil, invalid("%s %q: only http, https and file URLs are allowed", where, redactURL(s))
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
