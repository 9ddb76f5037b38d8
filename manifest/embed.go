package manifest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/pep440"
	"github.com/cruxible/cruxprov/pep508"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/wheel"
)

// Embed writes src to w with <dist-info>/cruxible/provider.toml and
// <dist-info>/cruxible/pylock.toml added or replaced and RECORD
// regenerated (wheel.Rewrite: src is verified in full first, every other
// member keeps its bytes). The manifest must parse against src's name
// (refusal.ManifestInvalid) and the lock must parse (lockfile's refusals)
// and must not list the root distribution itself, nor lack a package
// src's METADATA requires on every platform, nor carry credentials in a
// URL (refusal.LockInvalid), nor hold a package no platform can install
// (checkInstallable).
func Embed(ctx context.Context, w io.Writer, src *wheel.Wheel, manifestTOML, lockTOML []byte) error {
	m, err := Parse(manifestTOML, src.Filename().Distribution)
	if err != nil {
		return err
	}
	l, _, err := lockfile.Parse(lockTOML)
	if err != nil {
		return err
	}
	if err := checkCredentials(l); err != nil {
		return err
	}
	reqs, err := Requires(src)
	if err != nil {
		return err
	}
	if err := checkLock(m, l, reqs); err != nil {
		return err
	}
	if err := checkInstallable(l); err != nil {
		return err
	}
	di := src.DistInfo() + "/"
	return wheel.Rewrite(ctx, w, src, map[string][]byte{
		di + ManifestPath: manifestTOML,
		di + LockPath:     lockTOML,
	})
}

// checkCredentials refuses a lock whose URLs carry credentials (user
// information: user:password@, or a token as the user): embedded, the
// lock ships inside the wheel to every operator and index it goes to. A
// URL of the lock is only a hint (wheels come from the pinned index), so
// none needs them; the locker and the installer take them from netrc or
// the environment. They were embedded silently: only messages redact
// them.
func checkCredentials(l *lockfile.Lock) error {
	found := credentialKeys(l)
	if len(found) == 0 {
		return nil
	}
	return refusal.New(refusal.LockInvalid, "pylock.toml %s is a URL with credentials (user information before its host%s): embedded, the lock would ship them to everyone who gets the wheel; take the user and password (or token) out of the lock's URLs, giving them to the locker by netrc or the environment instead, and embed it again", found[0], moreURLs(found))
}

// moreURLs says how many keys of found there are after the first.
func moreURLs(found []string) string {
	if len(found) > 1 {
		return fmt.Sprintf("; and %d more URLs of the lock", len(found)-1)
	}
	return ""
}

// credentialKeys returns the key of every URL of l that carries user
// information (packages[0] (name).index, ….wheels[1].url), in order.
func credentialKeys(l *lockfile.Lock) []string {
	var found []string
	check := func(key, raw string) {
		if raw == "" {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || u.User == nil {
			return
		}
		found = append(found, key)
	}
	for i, p := range l.Packages {
		at := fmt.Sprintf("packages[%d] (%s)", i, p.Name)
		check(at+".index", p.Index)
		if p.VCS != nil {
			check(at+".vcs.url", p.VCS.URL)
		}
		if p.Archive != nil {
			check(at+".archive.url", p.Archive.URL)
		}
		if p.Sdist != nil {
			check(at+".sdist.url", p.Sdist.URL)
		}
		for j, w := range p.Wheels {
			check(fmt.Sprintf("%s.wheels[%d].url", at, j), w.URL)
		}
	}
	return found
}

// checkInstallable refuses a lock with a package no platform can
// install: one with no marker (so selected on every platform the lock
// admits) that has no wheel (only an sdist, an archive, a VCS or a
// directory source), or whose every wheel lacks a sha256. Resolution
// refuses such a lock on every platform, with the code given here
// (DESIGN §4); embedded, the wheel went to operators and failed at their
// install. One with a marker is left to resolution, which knows the
// platforms.
func checkInstallable(l *lockfile.Lock) error {
	for i, p := range l.Packages {
		if p.Marker != "" {
			continue
		}
		at := fmt.Sprintf("pylock.toml packages[%d] (%s)", i, p.Name)
		const wheelsOnly = "lock it again with wheels only (uv: --no-build; pip: --only-binary :all:) and embed the new lock"
		switch {
		case len(p.Wheels) > 0:
		case p.VCS != nil || p.Directory != nil || p.Archive != nil:
			return refusal.New(refusal.SourceNotAllowed, "%s has no marker and no wheel, only a source that is not a wheel from an index (a VCS, directory or archive): no platform can install it, as wheels come from the pinned index by name (DESIGN §4); %s", at, wheelsOnly)
		case p.Sdist != nil:
			return refusal.New(refusal.SdistNotAllowed, "%s has no marker and only an sdist: no platform can install it, as cruxprov installs wheels only (DESIGN §4); %s", at, wheelsOnly)
		default:
			return refusal.New(refusal.NoCompatibleWheel, "%s has no marker and no wheel: no platform can install it; %s", at, wheelsOnly)
		}
		hashed := false
		for _, w := range p.Wheels {
			if w.Hashes["sha256"] != "" {
				hashed = true
				break
			}
		}
		if !hashed {
			return refusal.New(refusal.HashMissing, "%s has no marker and none of its %d wheels has a sha256 hash: no platform can install it, as every wheel is checked against its sha256 (DESIGN §4); lock it again with sha256 hashes and embed the new lock", at, len(p.Wheels))
		}
	}
	return nil
}

// checkLock holds the lock to §3: the root distribution is not in its own
// lock, and the lock can meet the root's own requirements (reqs, its
// Requires-Dist). Without a platform only a requirement with no marker is
// checked here, one that applies on every platform: the lock must have an
// entry of its name at a version it allows (any, for a direct URL). One
// with a marker is checked per platform when the lock is resolved
// (lockfile.Options.Requires), as every requirement is.
func checkLock(m *Manifest, l *lockfile.Lock, reqs []pep508.Requirement) error {
	if err := CheckNotInOwnLock(m.Name, l); err != nil {
		return err
	}
	var unmet []string
	for _, r := range reqs {
		if r.Marker.String() != "" {
			continue
		}
		key := r.Key()
		var pinned []string
		met := false
		for _, p := range l.Packages {
			if p.Name != key {
				continue
			}
			if r.URL != "" || r.Specifier.Match(p.Version, pep440.PrereleasesAllow) {
				met = true
				break
			}
			pinned = append(pinned, p.Version)
		}
		switch {
		case met:
		case len(pinned) == 0:
			unmet = append(unmet, fmt.Sprintf("%q, but the lock has no %s", r.String(), key))
		default:
			unmet = append(unmet, fmt.Sprintf("%q, but the lock pins %s %s", r.String(), key, strings.Join(pinned, ", ")))
		}
	}
	if len(unmet) > 0 {
		return refusal.New(refusal.LockInvalid, "%s requires (METADATA Requires-Dist, with no marker: on every platform) %s: the env would lack what the provider imports; re-lock the provider with its dependencies (%s) and embed the new lock in the provider's wheel",
			m.Name, strings.Join(unmet, "; and "), lockfile.RelockAdvice)
	}
	return nil
}

// CheckNotInOwnLock refuses (lock_invalid) a provider's lock l that lists
// the provider itself, named name (normalized): DESIGN §3, the root
// distribution is not in its own lock. Embedding and inspect refuse such
// a lock through checkLock; the pipeline and lock resolve --wheel call it
// on the lock of every root wheel they resolve, as a wheel embedded by
// hand (or by an older tool) reaches them unchecked: the root then
// resolved as one of its own dependencies.
func CheckNotInOwnLock(name string, l *lockfile.Lock) error {
	for _, p := range l.Packages {
		if p.Name == name {
			return refusal.New(refusal.LockInvalid, "pylock.toml lists %s, the provider itself; a provider's lock holds only its dependencies (DESIGN §3): export it without the project (%s) and embed that lock in the provider's wheel", name, lockfile.RelockAdvice)
		}
	}
	return nil
}

// EmbedFile embeds manifestTOML and lockTOML into the wheel at srcPath
// (see Embed) and writes the result to outPath, whose base name must be a
// wheel file name for the same distribution, version and tags. The result
// is written into a fresh directory beside outPath, checked with Inspect,
// fsynced and only then renamed into place: a failure leaves nothing at
// outPath (and an existing file there untouched); one to write there is
// an *OutputError. It returns the Inspect report of the result.
func EmbedFile(ctx context.Context, srcPath, outPath string, manifestTOML, lockTOML []byte) (*Report, error) {
	src, err := wheel.Open(srcPath)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	base := filepath.Base(outPath)
	on, err := wheel.ParseFilename(base)
	if err != nil {
		return nil, err
	}
	sn := src.Filename()
	if on.Name != sn.Name || on.Version != sn.Version || !slices.Equal(on.Tags, sn.Tags) {
		return nil, refusal.New(refusal.WheelInvalid, "output name %s does not name the same wheel as %s (same distribution, version and tags); write it into a directory to keep the name", base, filepath.Base(srcPath))
	}
	dir := filepath.Dir(outPath)
	stage, err := os.MkdirTemp(dir, ".cruxprov-embed-")
	if err != nil {
		return nil, &OutputError{Dir: dir, Err: pathless(err)}
	}
	defer os.RemoveAll(stage)
	tmp := filepath.Join(stage, base)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, &OutputError{Dir: dir, Err: pathless(err)}
	}
	err = Embed(ctx, f, src, manifestTOML, lockTOML)
	if err == nil {
		if err = f.Sync(); err != nil {
			err = &OutputError{Dir: dir, Err: pathless(err)}
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = &OutputError{Dir: dir, Err: pathless(cerr)}
	}
	if err != nil {
		var pe *fs.PathError
		if refusal.CodeOf(err) == "" && errors.As(err, &pe) && pe.Path == tmp {
			err = &OutputError{Dir: dir, Err: pe.Err} // a full disk, say
		}
		return nil, err
	}
	r, err := Inspect(ctx, tmp)
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, outPath); err != nil {
		return nil, &OutputError{Dir: dir, Err: pathless(err)}
	}
	if d, err := os.Open(filepath.Dir(outPath)); err == nil {
		d.Sync()
		d.Close()
	}
	return r, nil
}

// OutputError is the directory of EmbedFile's outPath that could not be
// written (no permission, no space): the caller's to fix, not the
// wheel's. Err is the system's error, without the name of the temporary
// file it happened to.
type OutputError struct {
	Dir string
	Err error
}

// Error says which directory could not be written, and why.
func (e *OutputError) Error() string {
	return fmt.Sprintf("cannot write the embedded wheel into %s: %v", e.Dir, e.Err)
}

// Unwrap is the system's error.
func (e *OutputError) Unwrap() error { return e.Err }

// pathless drops the path an *fs.PathError or *os.LinkError names (a
// temporary one, meaningless to the caller).
func pathless(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}
