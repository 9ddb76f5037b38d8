package lockfile

import (
	"fmt"
	"strings"

	"github.com/cruxible/cruxprov/marker"
	"github.com/cruxible/cruxprov/pep440"
	"github.com/cruxible/cruxprov/pep508"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

// RelockAdvice is how a provider's author makes the lock a refusal asks
// for again, in words a refusal carries: uv's lock exported as PEP 751
// without the project itself, which uv export otherwise lists (as its
// directory, editable) and a provider's lock must not (DESIGN §3). The
// advice said "uv export --format pylock.toml", whose lock was refused in
// turn for listing the provider.
const RelockAdvice = "uv lock, then uv export --format pylock.toml --no-emit-project -o pylock.toml"

// checkRequires checks the root distribution's own requirements against
// the packages selected for p (rep.Packages): each requirement whose
// marker holds on p, in the metadata context with no extra being
// installed (so one that applies only with an extra does not apply), is
// met by a selected package of its name whose version its specifier
// allows, pre-releases included (the lock pinned one); a direct URL
// requirement by a selected package of its name. A package the lock
// selects but cannot install (its own refusal is reported) counts as
// present. The refusal is lock_invalid naming every requirement not met,
// and nil when all are.
func checkRequires(rep *Report, p *platform.Platform, opts Options) error {
	if len(opts.Requires) == 0 {
		return nil
	}
	env, err := marker.NewEnv(p.Markers)
	if err != nil {
		return refusal.Wrap(refusal.PlatformUnsupported, err, "platform %s: marker environment unusable", rep.Platform)
	}
	env = env.WithExtra("")
	root := opts.Root
	if root == "" {
		root = "the root distribution"
	}
	var unmet []string
	for _, req := range opts.Requires {
		ok, err := req.Marker.Evaluate(env)
		if err != nil {
			unmet = append(unmet, fmt.Sprintf("%q: its marker cannot be evaluated on %s (%v)", req.String(), rep.Platform, err))
			continue
		}
		if !ok {
			continue
		}
		if why := unmetBy(rep.Packages, req); why != "" {
			unmet = append(unmet, fmt.Sprintf("%q, but the lock %s for %s", req.String(), why, rep.Platform))
		}
	}
	if len(unmet) == 0 {
		return nil
	}
	err = refusal.New(refusal.LockInvalid,
		"%s requires (METADATA Requires-Dist) %s: the env would lack what the provider imports; re-lock the provider with its dependencies (%s) and embed the new lock in the provider's wheel",
		root, strings.Join(unmet, "; and "), RelockAdvice)
	if opts.RootWheel != "" {
		err = err.(*refusal.Error).WithRemedy(refusal.ActionEmbed, opts.RootWheel)
	}
	return err
}

// unmetBy says how the selected packages fail req ("has no httpx",
// "pins httpx 0.26.0"), "" when they meet it.
func unmetBy(pkgs []Outcome, req pep508.Requirement) string {
	key := req.Key()
	for _, o := range pkgs {
		if o.Name != key || !o.Selected {
			continue
		}
		if o.Wheel == nil || req.URL != "" || req.Specifier.Match(o.Wheel.Version, pep440.PrereleasesAllow) {
			return ""
		}
		return "pins " + key + " " + o.Wheel.Version
	}
	return "has no " + key
}
