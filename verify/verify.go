// Package verify is what an executor pays before every run (DESIGN §9):
// the accepted pin of a provider, checked against the registry, the
// verifier's own floor and what is on disk. One call, Verify, fails
// closed at the first difference with a typed refusal; the CLI's
// `cruxprov verify NAME` is a thin wrapper.
//
// It owns the composition only: the pin's signatures, threshold, expiry
// and floors are package registry's (VerifyPin), the env's seal, stat
// index and interpreter are package seal's (seal.Verify). It never writes
// to the store or the registry (only the floor in the caller's state
// directory, through registry.VerifyPin), never prints, and makes no
// network call.
//
// Linux only, as package seal, whose env checks it composes (seal's doc
// says why); the pin's own packages (registry, sign) build for macOS too.
package verify

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/buildinfo"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/wheel"
)

// Options is one verification.
type Options struct {
	// Entrypoint, when set, must be one of the pinned provider's.
	Entrypoint string
	// Platform picks the local materialization by platform id; "" takes
	// the only local one.
	Platform string
	// Deep rehashes every file; Explain collects every difference.
	Deep, Explain bool
	// Jobs bounds seal.Verify's parallelism.
	Jobs int
	// StateDir is the verifier's state directory, where its floors live
	// (beside its receipts ledger, DESIGN §10); "" keeps no floor. One
	// that is not an absolute path is refused ledger_write_failed.
	StateDir string
	// Now is the time expiry is checked at (zero: time.Now()).
	Now time.Time
	// RegistryID, when not zero, is the registry this verifier expects
	// (its first history entry's hash): another is registry_corrupt
	// (registry.VerifyPinFrom) instead of a fresh floor trusted on first
	// use.
	RegistryID digest.Digest
	// Store, when set, is the store (its home) whose registry reg is and
	// whose envs this verifier runs: a pinned env outside its envs/ is
	// pin_mismatch (InStore). pinned.Run sets it to Local.Home.
	Store string
}

// Report is a verified pin and env.
type Report struct {
	Provider   string               `json:"provider"`
	Revision   int64                `json:"revision"`
	Entrypoint *registry.Entrypoint `json:"entrypoint,omitempty"`
	// Materialization is the pinned local env that was verified.
	Materialization registry.Materialization `json:"materialization"`
	Env             string                   `json:"env"`
	// Seal is the env's seal report (differences with Explain).
	Seal *seal.Report  `json:"seal"`
	Pin  *registry.Pin `json:"-"`
	// Provider spec of the pin.
	Spec *registry.Provider `json:"-"`
	// ValidUntil is when the pin stops verifying by time alone (its
	// approvals expiring below the threshold); zero when it does not.
	// An executor that verifies once and then watches (package watch)
	// checks it on every call: an expiry changes no file (Unexpired).
	ValidUntil time.Time `json:"-"`
}

// Unexpired refuses pin_expired when the pin verified in r is past its
// ValidUntil at now: what a watched executor checks on every call,
// whatever the files say (docs/executor.md). Like registry.VerifyPin's
// pin_expired, it names the pin's change-set (r.Pin) and carries the
// remedy that renews its approvals (ActionRenewApproval): it carried
// none, so an executor that watched had no next step to pass on where
// one that verified on every call had.
func (r *Report) Unexpired(now time.Time) error {
	if r == nil || r.ValidUntil.IsZero() || now.Before(r.ValidUntil) {
		return nil
	}
	at := r.ValidUntil.UTC().Format(time.RFC3339)
	if r.Pin == nil || r.Pin.SpecDigest.IsZero() {
		return refusal.New(refusal.PinExpired, "provider %s revision %d: its approvals expired below the threshold at %s", r.Provider, r.Revision, at)
	}
	return refusal.New(refusal.PinExpired, "provider %s revision %d: its approvals expired below the threshold at %s; an approver whose approval expired renews it by approving the change-set (%s) again", r.Provider, r.Revision, at, r.Pin.SpecDigest).WithRemedy(refusal.ActionRenewApproval, r.Pin.SpecDigest.String())
}

// SealErr is nil when r names the seal its verification read, what a
// call or a sandbox preset of the env is built from (pinned.Call,
// pinned.Bwrap), and otherwise the refusal that says why it names none,
// with what to do: the seal of the env r names read again, its
// seal_missing or seal_invalid as Verify gives it (the rebuild from the
// pin's inputs, read access to the path that denied it); seal_missing
// without a remedy for a report that names no env (nil, or a
// verification refused at the pin, whose own refusal says what to do) or
// whose env's seal reads now (a verification refused before it read the
// seal, pin_mismatch say: verify again).
func (r *Report) SealErr() error {
	if r != nil && r.Seal != nil && r.Seal.Seal != nil {
		return nil
	}
	if r == nil || r.Env == "" {
		name := "the provider"
		if r != nil && r.Provider != "" {
			name = r.Provider
		}
		return refusal.New(refusal.SealMissing, "the verification of %s names no env, so no seal: it was refused before the pin named the env, and its refusal says what to do", name)
	}
	if _, err := seal.Load(r.Env); err != nil {
		err = pinnedEnvGone(err, r.Provider, r.Env)
		if r.Spec != nil {
			err = withRebuildInputs(err, r.Spec, r.Materialization)
		}
		return err
	}
	return refusal.New(refusal.SealMissing, "the verification of %s names the env %s without its seal: it was refused before it read the seal, and its refusal says what to do; verify the pin again", r.Provider, r.Env)
}

// Verify checks the accepted pin of provider name in reg and the local env
// it names, failing closed: the pin (registry.VerifyPin: present, signed by
// trusted approvers up to the threshold, not expired, not below the
// floor: pin_unapproved, signature_invalid, signer_untrusted, pin_expired,
// pin_rollback, registry_corrupt); the entrypoint is in it
// (entrypoint_unknown); its protocol range includes ours
// (protocol_unsupported); the env's seal names the pinned materialization
// digest and the seal content digest is the pinned one (pin_mismatch: an
// interpreter updated in place, say); the env matches its seal (seal.Verify:
// seal_missing, seal_invalid, env_drift, interpreter_drift); the installed
// manifest and lock hash to the pinned digests (manifest_drift,
// lock_drift). The Report is filled in as far as verification got. A nil
// reg is refused registry_corrupt (registry.VerifyPinFrom), not a panic.
func Verify(ctx context.Context, reg registry.Reader, name string, o Options) (*Report, error) {
	r := &Report{Provider: name}
	acc, err := CheckPin(ctx, reg, name, o)
	if acc != nil {
		r.Pin, r.Spec, r.Revision, r.Entrypoint, r.ValidUntil = acc.Pin, acc.Spec, acc.Pin.Revision, acc.Entrypoint, acc.ValidUntil
	}
	if err != nil {
		return r, err
	}
	spec := acc.Spec
	m, err := pick(spec, name, o.Platform)
	if err != nil {
		return r, err
	}
	r.Materialization = m
	env := filepath.Clean(m.Path)
	r.Env = env
	if filepath.Base(env) != m.Digest.Hex() {
		return r, refusal.New(refusal.PinMismatch, "the pin names env %s, whose name is not its materialization digest %s", env, m.Digest)
	}
	if err := InStore(env, o.Store); err != nil {
		return r, withPropose(err, name, spec, m)
	}
	rep, err := seal.Verify(ctx, env, seal.Options{Deep: o.Deep, Explain: o.Explain, Jobs: o.Jobs})
	r.Seal = rep
	if err != nil {
		return r, withRebuildInputs(pinnedEnvGone(err, name, env), spec, m)
	}
	// The env's name is the pinned digest (checked above) and seal.Verify
	// holds the seal's digest to the name: the materialization is the
	// pinned one. What the pin adds is the seal content digest.
	if rep.ContentDigest != m.Seal {
		return r, withPropose(refusal.New(refusal.PinMismatch, "the seal of %s has content digest %s, the pin records %s: the env was rebuilt differently or its interpreter changed in place; propose it again so that the change is approved", env, rep.ContentDigest, m.Seal), name, spec, m)
	}
	return r, checkProviderFiles(rep.Seal, env, spec)
}

// envsDir is where a store keeps its envs (DESIGN §6; store.EnvsDir,
// which verify does not import).
const envsDir = "envs"

// InStore refuses pin_mismatch when env, the directory of a pinned env,
// is not in the envs/ of the store at home ("" checks nothing). A pin
// names its env by absolute path, and a registry copied or moved with its
// store to another path still names the envs at the old one: there the
// verifier found the env "gone" and advised rebuilding it in the old
// store, and where the old store was still there it verified and ran that
// store's env, which this store's lock does not keep from its gc. An env
// cannot move with its store (its scripts, pyvenv.cfg and bytecode name
// the path it lives at, and the seal content digest with them:
// docs/digests.md), so the provider's env is built in this store and
// approved again. The same directory reached by another path (a symlink
// to the store) is the store's.
func InStore(env, home string) error {
	if home == "" {
		return nil
	}
	envs := filepath.Join(home, envsDir)
	if abs, err := filepath.Abs(envs); err == nil {
		envs = abs
	}
	dir := filepath.Dir(filepath.Clean(env))
	if dir == envs {
		return nil
	}
	if a, err := os.Stat(dir); err == nil {
		if b, err := os.Stat(envs); err == nil && os.SameFile(a, b) {
			return nil
		}
	}
	return refusal.New(refusal.PinMismatch, "the accepted pin names the env %s, which is not in this store (%s): the registry was copied or moved from the store at %s, and an env cannot move with it (its files name the path it lives at), so the provider's env is built in this store and approved again: propose it", env, filepath.Dir(envs), filepath.Dir(dir))
}

// withPropose advises err's proposal of name's pin again, with the pin's
// inputs (package, platforms, interpreter, images), for its env m: where
// the pin's envs point at several interpreters, the proposal with m's
// first, then with each other (registry.Provider.WithProposeChoices).
func withPropose(err error, name string, spec *registry.Provider, m registry.Materialization) error {
	var re *refusal.Error
	if !errors.As(err, &re) {
		return err
	}
	return spec.WithProposeChoices(re.WithRemedy(refusal.ActionPropose, spec.ProposeTarget(name)).WithImages(spec.Images()).WithProposePlatforms(spec.ProposePlatforms()).WithProposeNoBytecode(spec.ProposeNoBytecode()), nil, m.InterpreterPath())
}

// pinnedEnvGone turns seal.Verify's refusal of a path that is neither an
// env nor a seal (seal_missing advising the store's list of envs) into
// the rebuild of the env, where the path is env, the one the accepted
// pin of name names: the pin's inputs make that path an env again (its
// name is their digest). The list was advised, though the env was not
// mistyped but removed (by hand, or a gc under another pin), and the
// list no longer shows it.
func pinnedEnvGone(err error, name, env string) error {
	var re *refusal.Error
	if !errors.As(err, &re) || re.Code != refusal.SealMissing || re.Remedy == nil ||
		re.Remedy.Action != refusal.ActionListEnvs || re.Remedy.Target != env {
		return err
	}
	return refusal.New(refusal.SealMissing, "%s, the env the accepted pin of %s names, is gone (no such directory and no seal): rebuild it from the pin's inputs", env, name).WithRemedy(refusal.ActionRebuildEnv, env)
}

// withRebuildInputs gives a refusal advising to rebuild env m (a seal
// missing or not to be trusted: ActionRebuildEnv) the inputs it was made
// from, as the pin knows them: the root wheel's name, version and sha256,
// the platform and the interpreter. The advice named only placeholders,
// though the pin knew them. Whether the env was compiled the pin says
// through its digest (noBytecode).
func withRebuildInputs(err error, spec *registry.Provider, m registry.Materialization) error {
	var re *refusal.Error
	if !errors.As(err, &re) || re.Remedy == nil || re.Remedy.Action != refusal.ActionRebuildEnv || spec.Package == nil {
		return err
	}
	re.WithRebuildInputs(spec.ProposeTarget(""), m.Platform, m.InterpreterPath(), noBytecode(spec, m))
	return err
}

// noBytecode reports whether env m was made without bytecode, as the
// pin's digest says it (registry.Provider.WithoutBytecode).
func noBytecode(spec *registry.Provider, m registry.Materialization) bool {
	m.Backend = registry.BackendLocal // a pin's env, whatever an older pin called it
	return spec.WithoutBytecode(m)
}

// PinnedEnv is the directory of the local env the accepted pin of name
// names (o.Platform's, or the only local one: the materialization Verify
// picks), from the pin alone (CheckPin), without reading the env. An
// executor that stays up makes its watch.Verifier for that env before the
// first full verify, which the Verifier runs once its watches are placed:
// learning the env from a full verify made the Verifier's first call a
// second one (docs/executor.md, "Watching an env").
func PinnedEnv(ctx context.Context, reg registry.Reader, name string, o Options) (string, error) {
	acc, err := CheckPin(ctx, reg, name, o)
	if err != nil {
		return "", err
	}
	m, err := pick(acc.Spec, name, o.Platform)
	if err != nil {
		return "", err
	}
	if err := InStore(m.Path, o.Store); err != nil {
		return "", withPropose(err, name, acc.Spec, m)
	}
	return filepath.Clean(m.Path), nil
}

// Accepted is a provider's accepted pin, checked (CheckPin): the pin, the
// provider it pins, and the entrypoint the caller named (nil when none).
type Accepted struct {
	Pin        *registry.Pin
	Spec       *registry.Provider
	Entrypoint *registry.Entrypoint
	// ValidUntil is when the pin stops verifying by time alone; zero
	// when enough of its approvals never expire.
	ValidUntil time.Time
}

// CheckPin is the part of verification every backend shares: the pin
// (registry.VerifyPin: present, signed by trusted approvers up to the
// threshold, not expired, not below the floor), not retired, the named
// entrypoint in it (entrypoint_unknown), its protocol range including
// ours (protocol_unsupported, and so is a pin that names no range);
// before all, an o.Platform that can be a
// platform (platform.CheckID: platform_unsupported). The Accepted is
// returned as far as it got (nil when the pin itself failed).
func CheckPin(ctx context.Context, reg registry.Reader, name string, o Options) (*Accepted, error) {
	if o.Platform != "" {
		// A platform that cannot be one is refused before the pin is
		// read: refused pin_unapproved, it was advised proposing the
		// provider again for it.
		if err := platform.CheckID(o.Platform); err != nil {
			return nil, err
		}
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	pin, err := registry.VerifyPinFrom(ctx, reg, o.RegistryID, o.StateDir, name, now)
	if err != nil {
		return nil, err
	}
	acc := &Accepted{Pin: pin, Spec: pin.ProviderSpec()}
	if acc.ValidUntil, err = validUntil(ctx, reg, name, pin, now); err != nil {
		return acc, err
	}
	if acc.Spec == nil {
		return acc, refusal.New(refusal.PinUnapproved, "provider %s is retired", name)
	}
	if o.Entrypoint != "" {
		acc.Entrypoint = acc.Spec.Entrypoint(o.Entrypoint)
		if acc.Entrypoint == nil {
			return acc, UnknownEntrypoint(acc.Spec, name, pin.Revision, o.Entrypoint)
		}
	}
	p := acc.Spec.Protocol
	if len(p) != 2 {
		// A pin without a range (a change-set may leave protocol out;
		// install always records the manifest's) was taken for one that
		// includes ours, and verified with no protocol checked.
		e := refusal.New(refusal.ProtocolUnsupported, "provider %s (revision %d): its pin names no protocol range, so it cannot be said to include this cruxprov's protocol %d; propose the provider again (its manifest's protocol range is recorded in the pin) and approve it", name, pin.Revision, buildinfo.ProtocolVersion).WithRemedy(refusal.ActionPropose, acc.Spec.ProposeTarget(name)).WithImages(acc.Spec.Images()).WithProposePlatforms(acc.Spec.ProposePlatforms()).WithProposeNoBytecode(acc.Spec.ProposeNoBytecode())
		return acc, acc.Spec.WithProposeChoices(e, nil, "")
	}
	if buildinfo.ProtocolVersion < p[0] || buildinfo.ProtocolVersion > p[1] {
		return acc, refusal.New(refusal.ProtocolUnsupported, "provider %s speaks protocol %d..%d, this cruxprov %d", name, p[0], p[1], buildinfo.ProtocolVersion)
	}
	return acc, nil
}

// NoEntrypoint refuses a run of name, verified on its pin spec at
// revision, that names no entrypoint (entrypoint_unknown): a verification
// without Options.Entrypoint passes, and leaves nothing to run. Like an
// unknown entrypoint's, its detail names those the pin has.
func NoEntrypoint(spec *registry.Provider, name string, revision int64) *refusal.Error {
	return refusal.New(refusal.EntrypointUnknown, "provider %s (revision %d): the run names no entrypoint; give one of: %s", name, revision, entrypointNames(spec)).WithRemedy(refusal.ActionNameEntrypoint, "")
}

// UnknownEntrypoint refuses a run or verify of name's entrypoint ep,
// which its pin spec at revision does not have (entrypoint_unknown),
// naming those it has, with the remedy that names one of them; ep ""
// is NoEntrypoint's refusal.
func UnknownEntrypoint(spec *registry.Provider, name string, revision int64, ep string) *refusal.Error {
	if ep == "" {
		return NoEntrypoint(spec, name, revision)
	}
	return refusal.New(refusal.EntrypointUnknown, "provider %s (revision %d) has no entrypoint %q; give one of: %s", name, revision, ep, entrypointNames(spec)).WithRemedy(refusal.ActionNameEntrypoint, ep)
}

// entrypointNames lists spec's entrypoints, sorted, so that a refusal
// says what to give.
func entrypointNames(spec *registry.Provider) string {
	names := make([]string, 0, len(spec.Entrypoints))
	for _, e := range spec.Entrypoints {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// validUntil is the earliest approval expiry after now at which the pin,
// as the registry holds it, no longer verifies (registry.VerifyPin, its
// own count of distinct trusted approvals against the threshold, asked at
// that time without a floor, so nothing is written); zero when it still
// verifies past every expiry. Only time changes between the calls, and
// approvals only expire, so the first failure is found by bisection.
func validUntil(ctx context.Context, reg registry.Reader, name string, pin *registry.Pin, now time.Time) (time.Time, error) {
	var ts []time.Time
	for _, a := range pin.Approvals {
		if a.Expires != nil && a.Expires.After(now) {
			ts = append(ts, *a.Expires)
		}
	}
	if len(ts) == 0 {
		return time.Time{}, nil
	}
	slices.SortFunc(ts, time.Time.Compare)
	ts = slices.CompactFunc(ts, time.Time.Equal)
	lo, hi := 0, len(ts)
	for lo < hi {
		mid := (lo + hi) / 2
		if _, err := registry.VerifyPin(ctx, reg, "", name, ts[mid]); err != nil {
			if ctx.Err() != nil {
				return time.Time{}, ctx.Err()
			}
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo == len(ts) {
		return time.Time{}, nil
	}
	return ts[lo], nil
}

// pick is the pinned local materialization for platform ("" : the only
// local one).
func pick(spec *registry.Provider, name, platform string) (registry.Materialization, error) {
	var locals []registry.Materialization
	for _, m := range spec.Materializations {
		if m.Backend == registry.BackendLocal && (platform == "" || m.Platform == platform) {
			locals = append(locals, m)
		}
	}
	if len(locals) == 1 {
		return locals[0], nil
	}
	return registry.Materialization{}, Unpinned(spec, name, registry.BackendLocal, platform, len(locals))
}

// Unpinned refuses to verify or run name on backend (and platform, ""
// for any) where its accepted pin has no materialization for them
// (n == 0) or several (n > 1), naming those the pin has and what to
// give: it said only "has no accepted container materialization", or
// "name the platform" without the platforms, so a run --backend
// container of a provider pinned as a local env had no next step. Each
// carries a remedy: several, the platforms to name one of
// (ActionNamePlatform); none, the proposal that adds one (ActionPropose,
// for a container materialization with the image the operator names).
func Unpinned(spec *registry.Provider, name, backend, platform string, n int) *refusal.Error {
	var has, platforms []string
	for _, m := range spec.Materializations {
		if n == 0 || m.Backend == backend {
			has = append(has, m.Backend+" "+m.Platform)
		}
		if m.Backend == backend && !slices.Contains(platforms, m.Platform) {
			platforms = append(platforms, m.Platform)
		}
	}
	if n > 1 {
		// The command again for each platform the pin has, the first
		// first (the advice named a placeholder, PLATFORM, though the
		// pin knows them).
		e := refusal.New(refusal.PlatformUnsupported, "provider %s has %d %s materializations (%s); name the platform of one", name, n, backend, strings.Join(has, ", ")).WithRemedy(refusal.ActionNamePlatform, platforms[0]).WithPlatforms(platforms)
		for _, p := range platforms[1:] {
			e.OrRemedy(refusal.ActionNamePlatform, p)
		}
		return e
	}
	for_ := ""
	if platform != "" {
		for_ = " for " + platform
	}
	pinned := "none"
	if len(has) > 0 {
		pinned = strings.Join(has, ", ")
	}
	// The proposal's platforms are the pin's and the one asked for, its
	// interpreter the pin's envs': the advice named placeholders for
	// them, though the pin and the command line know them. Not where the
	// platform to add is not known (the operator names it), nor, for a
	// local env, the interpreter (a pin of images alone names none).
	plats, python := spec.ProposePlatforms()
	if plats != nil && !slices.Contains(plats, platform) {
		plats = append(slices.Clone(plats), platform)
	}
	// Where the pin's envs point at several interpreters (ProposePlatforms
	// gives neither), the proposal with each (WithProposeChoices), its
	// platforms the pin's and the one asked for.
	choices := func(e *refusal.Error) *refusal.Error {
		if platform == "" || plats != nil {
			return e
		}
		var all []string
		for _, m := range spec.Materializations {
			if !slices.Contains(all, m.Platform) {
				all = append(all, m.Platform)
			}
		}
		if !slices.Contains(all, platform) {
			all = append(all, platform)
		}
		return spec.WithProposeChoices(e, all, "")
	}
	if backend == registry.BackendContainer {
		// A container materialization names its image, which only the
		// operator knows: the remedy's install names the pin's images
		// and asks for the new one (Remedy.Backend).
		// Its envs made without bytecode are proposed so again: the
		// install without --no-compile proposed other envs beside the
		// image (their digests cover bytecode). Where the image's
		// platform is not known, the operator names the platforms, and
		// the detail says the pin's are among them, or the proposal
		// drops what the pin has there.
		keep := ""
		if platform == "" && len(spec.Materializations) > 0 {
			keep = ", naming the platforms its pin has (to keep what it has there) and the image's,"
		}
		e := refusal.New(refusal.PinUnapproved, "provider %s has no accepted %s materialization%s (its pin has: %s): name the backend and platform of one it has, or propose the provider again with a container materialization, the image built for it (REF@sha256:…; docs/operator.md)%s and approve it", name, backend, for_, pinned, keep).WithRemedy(refusal.ActionPropose, spec.ProposeTarget(name)).WithImages(spec.Images()).WithBackend(registry.BackendContainer).WithProposeNoBytecode(spec.ProposeNoBytecode())
		if platform != "" {
			e.WithProposePlatforms(plats, python)
		}
		return choices(e)
	}
	// A platform the pin holds the resolution of, and no env: the
	// interpreter it was proposed with does not run there (install
	// builds an env only for the platforms it runs; an image runs the
	// others). Proposing it again with that interpreter, as the advice
	// said, proposes the same pin ("it changes nothing"): name the
	// platform of an env it has.
	if locals := localPlatforms(spec); platform != "" && len(locals) > 0 && slices.ContainsFunc(spec.Materializations, func(m registry.Materialization) bool {
		return m.Backend == registry.BackendResolution && m.Platform == platform
	}) {
		e := refusal.New(refusal.PinUnapproved, "provider %s has no accepted %s materialization%s (its pin has: %s): its pin holds the resolution of %s alone (the interpreter it was proposed with does not run %s; an image built for it does), so proposing it again changes nothing: name the platform of an env it has", name, backend, for_, pinned, platform, platform).WithRemedy(refusal.ActionNamePlatform, locals[0]).WithPlatforms(locals)
		for _, p := range locals[1:] {
			e.OrRemedy(refusal.ActionNamePlatform, p)
		}
		return e
	}
	e := refusal.New(refusal.PinUnapproved, "provider %s has no accepted %s materialization%s (its pin has: %s): name the backend and platform of one it has, or propose the provider again for %s and approve it", name, backend, for_, pinned, cmp.Or(platform, "the platform")).WithRemedy(refusal.ActionPropose, spec.ProposeTarget(name)).WithImages(spec.Images()).WithProposeNoBytecode(spec.ProposeNoBytecode())
	if platform != "" && python != "" {
		e.WithProposePlatforms(plats, python)
	}
	return choices(e)
}

// localPlatforms are the platforms of the pin's local envs, in its order.
func localPlatforms(spec *registry.Provider) []string {
	var out []string
	for _, m := range spec.Materializations {
		if m.Backend == registry.BackendLocal && !slices.Contains(out, m.Platform) {
			out = append(out, m.Platform)
		}
	}
	return out
}

// checkProviderFiles holds the manifest and lock installed in the env's
// root dist-info to the pinned digests.
func checkProviderFiles(s *seal.Seal, env string, spec *registry.Provider) error {
	root := s.Resolution.Root
	if root == nil {
		return refusal.New(refusal.ManifestDrift, "%s has no root wheel in its seal", env)
	}
	fn, err := wheel.ParseFilename(root.Filename)
	if err != nil {
		return refusal.Wrap(refusal.SealInvalid, err, "%s: the seal's root wheel name", env)
	}
	di := filepath.Join(env, filepath.FromSlash(s.Env.SitePackages), fn.Distribution+"-"+fn.Version+".dist-info", "cruxible")
	for _, f := range []struct {
		name string
		want digest.Digest
		code refusal.Code
	}{{"provider.toml", spec.ManifestDigest, refusal.ManifestDrift}, {"pylock.toml", spec.LockDigest, refusal.LockDrift}} {
		// seal.ReadFile, not os.ReadFile: a FIFO put at the file's path
		// after the seal's check hung verify in open(2).
		b, err := seal.ReadFile(filepath.Join(di, f.name))
		if err != nil {
			return refusal.Wrap(f.code, err, "%s: cannot read the installed %s", env, f.name)
		}
		if got := digest.Sum(b); got != f.want {
			return refusal.New(f.code, "%s: the installed %s hashes to %s, the pin records %s", env, f.name, got, f.want)
		}
	}
	return nil
}
