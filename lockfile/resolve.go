package lockfile

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/cruxible/cruxprov/pep440"
	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/pep508"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

// Options select what of a lock is installed.
type Options struct {
	// Extras is the set of the lock's extras to install (the marker
	// variable `extras`); nil means none, the PEP 751 default.
	Extras []string
	// Groups is the set of dependency groups to install (the marker
	// variable `dependency_groups`); nil means the lock's default-groups.
	Groups []string
	// AllowLinuxTags also accepts linux_<arch> wheels (local builds) on a
	// Linux platform, ranked after every portable tag
	// (platform.WithLinuxTags).
	AllowLinuxTags bool
	// Requires are the root distribution's own requirements (its
	// METADATA's Requires-Dist, manifest.Requires), which the lock was
	// made to satisfy; Root names it ("acme-web-fetch 1.0.0") in
	// refusals. Each that applies to the platform must be met by the
	// packages the lock selects there (Report.Requires).
	Requires []pep508.Requirement
	Root     string
	// RootWheel is the root's wheel file name: where it is known, the
	// refusal of an unmet requirement carries the remedy that embeds a
	// new lock in it (refusal.ActionEmbed).
	RootWheel string
}

// Outcome is what resolution decided for one package name on one
// platform: a wheel, a refusal, or nothing because no entry's marker
// applies (Selected false).
type Outcome struct {
	Name     string
	Selected bool
	Wheel    *ResolvedWheel
	Err      error
}

// Report is a lock resolved for one platform, filled in even when some
// packages are refused, so an operator sees every gap at once. Err is the
// platform-level refusal (requires-python, environments); when it is set,
// Packages is empty.
type Report struct {
	Platform string
	Err      error
	Packages []Outcome // one per package name in the lock, sorted by name
	// Requires is the refusal (lock_invalid) of Options.Requires the
	// packages selected do not meet: a requirement whose marker holds on
	// the platform with no extra, and that no selected package of its
	// name and an allowed version (any, for a direct URL) meets. Nil when
	// all are met, or Err is set.
	Requires error
}

// Resolution returns the report's resolution, or its first refusal: the
// platform-level one, else the first package's in name order, else the
// root's requirements'.
func (r *Report) Resolution() (Resolution, error) {
	if err := r.FirstErr(); err != nil {
		return Resolution{}, err
	}
	res := Resolution{Platform: r.Platform, Packages: make([]ResolvedWheel, 0, len(r.Packages))}
	for _, o := range r.Packages {
		if o.Wheel != nil {
			res.Packages = append(res.Packages, *o.Wheel)
		}
	}
	return res, nil
}

// FirstErr returns the report's first refusal: the platform-level one,
// else the first package's in name order, else Requires; nil when the
// platform resolves.
func (r *Report) FirstErr() error {
	if r.Err != nil {
		return r.Err
	}
	for _, o := range r.Packages {
		if o.Err != nil {
			return o.Err
		}
	}
	return r.Requires
}

// Resolve resolves the lock for one platform (DESIGN §4) and returns the
// Resolution or the first refusal: platform_unsupported (requires-python
// or environments exclude the platform, or a selected package's
// requires-python does), duplicate_package, no_compatible_wheel,
// sdist_not_allowed, source_not_allowed or hash_missing, or lock_invalid
// (a package's marker cannot be evaluated, or opts.Requires are not met).
func Resolve(l *Lock, p *platform.Platform, opts Options) (Resolution, error) {
	r, err := check(l, p, opts)
	if err != nil {
		return Resolution{}, err
	}
	return r.Resolution()
}

// ResolveAll resolves the lock for every platform and returns one Report
// each, in the order given. The error is the first refusal across them
// (nil when every platform resolves), or an error in opts.
func ResolveAll(l *Lock, ps []*platform.Platform, opts Options) ([]Report, error) {
	out := make([]Report, 0, len(ps))
	var first error
	for _, p := range ps {
		r, err := check(l, p, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		if err := r.FirstErr(); err != nil && first == nil {
			first = err
		}
	}
	return out, first
}

// CheckSelection reports whether extras and groups name only what the
// lock offers (its extras and dependency-groups lists). It is an error in
// the caller's request, not a refusal of the lock.
func (l *Lock) CheckSelection(extras, groups []string) error {
	var bad []string
	for _, e := range extras {
		if !containsName(l.Extras, pep503.Normalize(e)) {
			bad = append(bad, fmt.Sprintf("extra %q (the lock offers: %s)", e, listOrNone(l.Extras)))
		}
	}
	for _, g := range groups {
		if !containsName(l.DependencyGroups, pep503.Normalize(g)) && !containsName(l.DefaultGroups, pep503.Normalize(g)) {
			bad = append(bad, fmt.Sprintf("dependency group %q (the lock offers: %s)", g, listOrNone(l.DependencyGroups)))
		}
	}
	if len(bad) > 0 {
		return errors.New("the lock has no " + strings.Join(bad, "; no "))
	}
	return nil
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

func containsName(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func normalizeAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = pep503.Normalize(x)
	}
	return out
}

// check resolves every package for p; the error is for bad options only.
func check(l *Lock, p *platform.Platform, opts Options) (Report, error) {
	if err := l.CheckSelection(opts.Extras, opts.Groups); err != nil {
		return Report{}, err
	}
	if opts.AllowLinuxTags {
		p = p.WithLinuxTags()
	}
	id := p.ID()
	rep := Report{Platform: id}
	pyv, err := pep440.Parse(p.Markers["python_full_version"])
	if err != nil {
		rep.Err = refusal.Wrap(refusal.PlatformUnsupported, err, "platform %s has python_full_version %q, not a version", id, p.Markers["python_full_version"])
		return rep, nil
	}
	if l.reqPython != nil && !l.reqPython.contains(pyv) {
		rep.Err = refusal.New(refusal.PlatformUnsupported, "the lock's requires-python %q excludes platform %s (Python %s); pick a platform the lock covers or relock", l.RequiresPython, id, pyv)
		return rep, nil
	}
	groups := l.DefaultGroups
	if opts.Groups != nil {
		groups = normalizeAll(opts.Groups)
	}
	env, err := newEvalEnv(p.Markers, normalizeAll(opts.Extras), groups)
	if err != nil {
		rep.Err = refusal.Wrap(refusal.PlatformUnsupported, err, "platform %s: marker environment unusable", id)
		return rep, nil
	}
	if len(l.env) > 0 {
		ok := false
		for i, m := range l.env {
			v, err := m.eval(env)
			if err != nil {
				rep.Err = refusal.Wrap(refusal.LockInvalid, err, "environments[%d] %q cannot be evaluated on %s: %v; %s", i, l.Environments[i], id, err, markerAdvice)
				return rep, nil
			}
			ok = ok || v
		}
		if !ok {
			rep.Err = refusal.New(refusal.PlatformUnsupported, "the lock's environments (%s) exclude platform %s; pick a platform the lock covers or relock", strings.Join(l.Environments, " | "), id)
			return rep, nil
		}
	}
	// Each distinct marker once per platform.
	markerOK := make([]bool, len(l.markers))
	markerErr := make([]error, len(l.markers))
	for i, m := range l.markers {
		markerOK[i], markerErr[i] = m.eval(env)
	}
	// Rank of each distinct lock tag on this platform; -1 = unsupported.
	ranks := tagRanks(l, p)

	groupsByName := l.byName()
	rep.Packages = make([]Outcome, len(groupsByName))
	wheels := make([]ResolvedWheel, len(groupsByName)) // one allocation for every chosen wheel
	for k, entries := range groupsByName {
		rep.Packages[k] = l.resolveName(l.Packages[entries[0]].Name, entries, markerOK, markerErr, ranks, pyv, id, &wheels[k])
	}
	rep.Requires = checkRequires(&rep, p, opts)
	return rep, nil
}

// byName returns the package indexes grouped by name, names sorted, each
// group in lock order. It is computed once per lock.
func (l *Lock) byName() [][]int {
	l.orderOnce.Do(func() {
		idx := make([]int, len(l.Packages))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return l.Packages[idx[a]].Name < l.Packages[idx[b]].Name })
		for i := 0; i < len(idx); {
			j := i
			for j < len(idx) && l.Packages[idx[j]].Name == l.Packages[idx[i]].Name {
				j++
			}
			l.order = append(l.order, idx[i:j])
			i = j
		}
	})
	return l.order
}

func tagRanks(l *Lock, p *platform.Platform) []int32 {
	ranks := make([]int32, len(l.tags))
	for i := range ranks {
		ranks[i] = -1
	}
	if len(l.tags) == 0 {
		return ranks
	}
	index := make(map[platform.Tag]int32, len(l.tags))
	for i, t := range l.tags {
		index[t] = int32(i)
	}
	for r, t := range p.Tags {
		if id, ok := index[t]; ok && ranks[id] < 0 {
			ranks[id] = int32(r)
		}
	}
	return ranks
}

func (l *Lock) resolveName(name string, entries []int, markerOK []bool, markerErr []error, ranks []int32, pyv pep440.Version, id string, rw *ResolvedWheel) Outcome {
	out := Outcome{Name: name}
	sel := -1
	for _, e := range entries {
		pk := &l.Packages[e]
		if pk.marker >= 0 {
			if err := markerErr[pk.marker]; err != nil {
				out.Selected = true
				out.Err = refusal.Wrap(refusal.LockInvalid, err, "package %s: marker %q cannot be evaluated on %s: %v; %s", name, pk.Marker, id, err, markerAdvice)
				return out
			}
			if !markerOK[pk.marker] {
				continue
			}
		}
		if sel >= 0 {
			out.Selected = true
			out.Err = refusal.New(refusal.DuplicatePackage, "package %s: two lock entries apply on %s (versions %s and %s, markers %q and %q); fix the markers and relock",
				name, id, orNone(l.Packages[sel].Version), orNone(pk.Version), l.Packages[sel].Marker, pk.Marker)
			return out
		}
		sel = e
	}
	if sel < 0 {
		return out
	}
	out.Selected = true
	pk := &l.Packages[sel]
	if pk.reqPython != nil && !pk.reqPython.contains(pyv) {
		out.Err = refusal.New(refusal.PlatformUnsupported, "package %s %s requires Python %s, platform %s is Python %s; pick a platform the lock covers or relock", name, pk.Version, pk.RequiresPython, id, pyv)
		return out
	}
	switch {
	case pk.VCS != nil:
		src := pk.VCS.Path
		if pk.VCS.URL != "" {
			src = redactURL(pk.VCS.URL)
		}
		out.Err = refusal.New(refusal.SourceNotAllowed, "package %s comes from a %s repository (%s); cruxprov installs wheels only: lock a published wheel", name, pk.VCS.Type, src)
		return out
	case pk.Directory != nil:
		out.Err = refusal.New(refusal.SourceNotAllowed, "package %s comes from the directory %s; cruxprov installs wheels only: lock a published wheel", name, pk.Directory.Path)
		return out
	case pk.Archive != nil:
		out.Err = refusal.New(refusal.SourceNotAllowed, "package %s comes from the archive %s; cruxprov installs wheels from the pinned index only: lock it as a wheel", name, pk.Archive.Name)
		return out
	case len(pk.Wheels) == 0 && pk.Sdist != nil:
		out.Err = refusal.New(refusal.SdistNotAllowed, "package %s %s has only an sdist (%s); cruxprov never builds: lock a version with wheels for %s", name, pk.Version, pk.Sdist.Name, id)
		return out
	case len(pk.Wheels) == 0:
		out.Err = refusal.New(refusal.NoCompatibleWheel, "package %s %s offers no wheels; lock wheels for %s", name, pk.Version, id)
		return out
	}
	best, bestRank := -1, int32(-1)
	for k := range pk.Wheels {
		for _, t := range pk.Wheels[k].tags {
			if r := ranks[t]; r >= 0 && (bestRank < 0 || r < bestRank) {
				best, bestRank = k, r
			}
		}
	}
	if best < 0 {
		out.Err = refusal.New(refusal.NoCompatibleWheel, "package %s %s has no wheel for %s (offered tags: %s): lock a wheel of it for %s, or leave that platform out", name, pk.Version, id, offeredTags(pk), id)
		return out
	}
	w := &pk.Wheels[best]
	if w.sha256.IsZero() {
		// The algorithms it has are named: a misspelt key (sha265, SHA256)
		// read as "no sha256" with nothing to see why.
		has := ""
		if len(w.Hashes) > 0 {
			algs := make([]string, 0, len(w.Hashes))
			for a := range w.Hashes {
				algs = append(algs, strconv.Quote(a))
			}
			sort.Strings(algs)
			has = " (its hashes are " + strings.Join(algs, ", ") + " only)"
		}
		out.Err = refusal.New(refusal.HashMissing, "package %s wheel %s has no sha256 in the lock%s; relock with hashes", name, w.Name, has)
		return out
	}
	*rw = ResolvedWheel{Name: name, Version: pk.Version, Filename: w.Name, URL: w.URL, SHA256: w.sha256}
	if w.Size != nil {
		rw.Size = *w.Size
	}
	out.Wheel = rw
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// offeredTags lists the distinct compressed tag sets of a package's
// wheels, e.g. "cp312-cp312-macosx_11_0_arm64, py3-none-win_amd64".
func offeredTags(pk *Package) string {
	var out []string
	seen := map[string]bool{}
	for _, w := range pk.Wheels {
		parts := strings.Split(strings.TrimSuffix(w.Name, ".whl"), "-")
		s := strings.Join(parts[len(parts)-3:], "-")
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

// markerAdvice is what to do about a marker of the lock that parses but
// cannot be evaluated (an operator PEP 508 does not define for its
// operands, such as ~= between strings: a platform defines every marker
// variable, platform.ParseJSON refuses one that does not). These
// refusals named the fault alone.
const markerAdvice = "fix the marker in the lock, or regenerate the lock with a PEP 751 locker"
