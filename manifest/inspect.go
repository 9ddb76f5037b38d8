package manifest

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/wheel"
)

// RuntimePackage is the normalized name of the runtime every provider's
// lock must include (DESIGN §10).
const RuntimePackage = "cruxible-provider-runtime"

// Report is what `cruxprov inspect` shows of a root wheel: its identity,
// its manifest, each entrypoint's implementation digest and a summary of
// its embedded lock.
type Report struct {
	Wheel       WheelIdentity      `json:"wheel"`
	Manifest    ManifestSummary    `json:"manifest"`
	Entrypoints []EntrypointPin    `json:"entrypoints"`
	Lock        LockSummary        `json:"lock"`
	Warnings    []lockfile.Warning `json:"warnings"`
}

// WheelIdentity identifies a wheel file.
type WheelIdentity struct {
	Filename string        `json:"filename"`
	Name     string        `json:"name"` // PEP 503 normalized
	Version  string        `json:"version"`
	SHA256   digest.Digest `json:"sha256"`
	Size     int64         `json:"size"`
	Tags     []string      `json:"tags"` // interpreter-abi-platform, file-name order
}

// ManifestSummary is the parsed manifest plus the digest of its bytes.
type ManifestSummary struct {
	Manifest
	Digest digest.Digest `json:"digest"` // sha256 of provider.toml as embedded
}

// EntrypointPin is an entrypoint with its implementation digest (§5).
type EntrypointPin struct {
	Entrypoint
	ImplementationDigest digest.Digest `json:"implementation_digest"`
}

// LockSummary summarizes the embedded pylock.toml.
type LockSummary struct {
	Digest         digest.Digest    `json:"digest"` // sha256 of pylock.toml as embedded
	LockVersion    string           `json:"lock_version"`
	RequiresPython string           `json:"requires_python,omitempty"`
	Packages       []PackageSummary `json:"packages"`
	Wheels         int              `json:"wheels"`
	// Platforms are the distinct platform tags the lock's wheels cover
	// ("any" for pure wheels), sorted.
	Platforms []string `json:"platforms"`
}

// PackageSummary is one locked package.
type PackageSummary struct {
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	Marker    string   `json:"marker,omitempty"`
	Wheels    int      `json:"wheels"`
	Sdist     bool     `json:"sdist,omitempty"`
	Platforms []string `json:"platforms"` // distinct platform tags of its wheels, sorted
}

// Inspect opens the root wheel at path, verifies every member against its
// RECORD, and reports its identity, manifest, implementation digests and
// lock summary. A wheel without a manifest is refusal.ManifestMissing, one
// without a lock refusal.LockMissing; a broken wheel, manifest or lock is
// refused with its own code.
func Inspect(ctx context.Context, path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, refusal.Wrap(refusal.WheelInvalid, err, "cannot open wheel %s", path)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, refusal.New(refusal.WheelInvalid, "wheel %s is not a readable regular file", path)
	}
	// The sha256 and the verification read the same open file.
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return nil, refusal.Wrap(refusal.WheelInvalid, err, "cannot read %s", path)
	}
	sum := digest.FromBytes(h.Sum(nil))
	w, err := wheel.OpenReader(f, size, filepath.Base(path))
	if err != nil {
		return nil, err
	}
	if err := w.Verify(ctx); err != nil {
		return nil, err
	}
	fn := w.Filename()
	r := &Report{Wheel: WheelIdentity{Filename: filepath.Base(path), Name: fn.Name, Version: fn.Version, SHA256: sum, Size: size, Tags: []string{}}}
	for _, t := range fn.Tags {
		r.Wheel.Tags = append(r.Wheel.Tags, t.Interpreter+"-"+t.ABI+"-"+t.Platform)
	}
	m, raw, err := FromWheel(w)
	if err != nil {
		return nil, err
	}
	r.Manifest = ManifestSummary{Manifest: *m, Digest: digest.Sum(raw)}
	for _, e := range m.Entrypoints {
		d, err := e.ImplementationDigest(sum)
		if err != nil {
			return nil, err
		}
		r.Entrypoints = append(r.Entrypoints, EntrypointPin{Entrypoint: e, ImplementationDigest: d})
	}
	lockRaw, err := LockFromWheel(w)
	if err != nil {
		return nil, err
	}
	l, warns, err := lockfile.Parse(lockRaw)
	if err != nil {
		return nil, err
	}
	reqs, err := Requires(w)
	if err != nil {
		return nil, err
	}
	if err := checkLock(m, l, reqs); err != nil {
		return nil, err
	}
	r.Warnings = append([]lockfile.Warning{}, warns...)
	if !slices.ContainsFunc(l.Packages, func(p lockfile.Package) bool { return p.Name == RuntimePackage }) {
		r.Warnings = append(r.Warnings, lockfile.Warning{Key: "packages", Detail: "no " + RuntimePackage + " in the lock: an env made from it has no harness, and runs are refused runtime_missing"})
	}
	if found := credentialKeys(l); len(found) > 0 {
		// Embedding refuses such a lock; a wheel embedded otherwise (by
		// hand, by an older cruxprov) is reported, without the secret.
		r.Warnings = append(r.Warnings, lockfile.Warning{Key: found[0], Detail: "a URL with credentials (user information before its host" + moreURLs(found) + "): the wheel carries them to everyone who gets it; its author takes them out of the lock and embeds it again"})
	}
	r.Lock = summarizeLock(l, digest.Sum(lockRaw))
	return r, nil
}

func summarizeLock(l *lockfile.Lock, d digest.Digest) LockSummary {
	s := LockSummary{Digest: d, LockVersion: l.LockVersion, RequiresPython: l.RequiresPython, Packages: []PackageSummary{}, Platforms: []string{}}
	all := map[string]bool{}
	for _, p := range l.Packages {
		ps := PackageSummary{Name: p.Name, Version: p.Version, Marker: p.Marker, Wheels: len(p.Wheels), Sdist: p.Sdist != nil, Platforms: []string{}}
		seen := map[string]bool{}
		for _, f := range p.Wheels {
			fn, err := wheel.ParseFilename(f.Name)
			if err != nil {
				continue // lockfile.Parse accepted it; nothing to add
			}
			for _, t := range fn.Tags {
				if !seen[t.Platform] {
					seen[t.Platform] = true
					ps.Platforms = append(ps.Platforms, t.Platform)
				}
				all[t.Platform] = true
			}
		}
		sort.Strings(ps.Platforms)
		s.Wheels += ps.Wheels
		s.Packages = append(s.Packages, ps)
	}
	sort.Slice(s.Packages, func(i, j int) bool { return s.Packages[i].Name < s.Packages[j].Name })
	for p := range all {
		s.Platforms = append(s.Platforms, p)
	}
	sort.Strings(s.Platforms)
	return s
}
