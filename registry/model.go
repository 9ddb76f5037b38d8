package registry

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/refusal"
)

// The apiVersion and kind of a change-set document, and the format
// versions of the registry's JSON files. A reader refuses another major.
const (
	APIVersion    = "cruxible.dev/v1"
	KindChangeSet = "ChangeSet"
	PinFormat     = "cruxible.pin/v1"
	TrustFormat   = "cruxible.trust/v1"
	IfaceFormat   = "cruxible.interfaces/v1"
	FloorFormat   = "cruxible.floor/v1"
	LogFormat     = 1
)

// Change actions. register, update and retire change a provider's pin;
// trust-key, untrust-key and set-policy change the trust state.
const (
	ActionRegister   = "register"
	ActionUpdate     = "update"
	ActionRetire     = "retire"
	ActionTrustKey   = "trust-key"
	ActionUntrustKey = "untrust-key"
	ActionSetPolicy  = "set-policy"
)

// Key roles: an approver's signature counts toward approvals, a builder's
// never does.
const (
	RoleApprover = "approver"
	RoleBuilder  = "builder"
)

// Change-set states.
const (
	StateProposed = "proposed"
	StateApproved = "approved"
	StateRejected = "rejected"
)

// TrustScope is the provider name an approval of a governance change-set
// (trust-key, untrust-key, set-policy) signs: no provider can have it,
// since provider names are normalized Python names.
const TrustScope = "@trust"

// ValidKeyName reports whether s may name a trusted key (validName).
func ValidKeyName(s string) bool { return validName(s) }

// checkProviderName refuses a provider name that is not one a pin can
// have: pins are named by the PEP 503 normalized name, so "Acme_Echo" or
// "acme..echo" is told the name to give (acme-echo), where the first was
// "not a provider name" with no next step and the second "has no
// accepted pin" though acme-echo had one.
func checkProviderName(provider string) error {
	if validName(provider) && pep503.Normalize(provider) == provider {
		return nil
	}
	if n := pep503.Normalize(provider); n != provider && validName(n) {
		return refusal.New(refusal.PinUnapproved, "%q is not a provider name: provider names are PEP 503 normalized; give %s", provider, n)
	}
	return refusal.New(refusal.PinUnapproved, "%q is not a provider name (1 to 128 of a-z, 0-9 and single '-', starting and ending with a letter or digit)", provider)
}

// validName reports whether s is a provider or key name: 1 to 128 of
// [a-z0-9._-], starting and ending with a letter or digit. (A compiled
// regexp of this shape cost 0.5 ms of every command's start.)
func validName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return alnum(s[0]) && alnum(s[len(s)-1])
}

// Interface is a registered interface: its id and the digest of its
// canonical schema.
type Interface struct {
	ID           string        `json:"id"`
	Digest       digest.Digest `json:"digest"`
	RegisteredAt time.Time     `json:"registeredAt"`
}

// Key is a trusted signer key.
type Key struct {
	Name string `json:"name" yaml:"name"`
	// Role is RoleApprover or RoleBuilder.
	Role string `json:"role" yaml:"role"`
	// PEM is the public key, one PEM "PUBLIC KEY" block.
	PEM string `json:"pem" yaml:"pem"`
	// Digest is the sha256 of the key's DER SubjectPublicKeyInfo.
	Digest digest.Digest `json:"digest" yaml:"digest"`
}

// Policy is the approval policy.
type Policy struct {
	// Threshold is how many distinct approver keys must sign (>= 1).
	Threshold int `json:"threshold" yaml:"threshold"`
}

// Package is a wheel by name, version, file name and sha256.
type Package struct {
	Name     string        `json:"name" yaml:"name"`
	Version  string        `json:"version" yaml:"version"`
	Filename string        `json:"filename" yaml:"filename"`
	SHA256   digest.Digest `json:"sha256" yaml:"sha256"`
}

// InterfaceRef names an interface by id and digest.
type InterfaceRef struct {
	ID     string        `json:"id" yaml:"id"`
	Digest digest.Digest `json:"digest" yaml:"digest"`
}

// Entrypoint is one entrypoint of a provider.
type Entrypoint struct {
	Name                 string        `json:"name" yaml:"name"`
	Object               string        `json:"object" yaml:"object"`
	Interface            InterfaceRef  `json:"interface" yaml:"interface"`
	ImplementationDigest digest.Digest `json:"implementationDigest" yaml:"implementationDigest"`
}

// The materialization backends.
const (
	// BackendLocal is a sealed local env.
	BackendLocal = "local"
	// BackendContainer is an image, by digest.
	BackendContainer = "container"
	// BackendResolution is the resolution alone, for a platform no
	// interpreter of the installing host runs (Digest is the resolution
	// digest); an image build materializes it later. Verify never accepts
	// it as something to run.
	BackendResolution = "resolution"
)

// Materialization is one environment pin: backend "local" (a sealed env:
// Digest is the materialization digest, Seal the seal content digest,
// Resolution the resolution digest, Packages the resolved wheels, Path
// where it was built) or "container" (Digest and Image the image manifest
// digest and reference).
type Materialization struct {
	Backend    string        `json:"backend" yaml:"backend"`
	Platform   string        `json:"platform" yaml:"platform"`
	Digest     digest.Digest `json:"digest" yaml:"digest"`
	Resolution digest.Digest `json:"resolution,omitempty" yaml:"resolution,omitempty"`
	Seal       digest.Digest `json:"seal,omitempty" yaml:"seal,omitempty"`
	Path       string        `json:"path,omitempty" yaml:"path,omitempty"`
	Image      string        `json:"image,omitempty" yaml:"image,omitempty"`
	// Base and Builder are a container image's base image digest and
	// builder id, as its verified provenance named them when it was
	// proposed: verify holds the provenance to them.
	Base    string `json:"base,omitempty" yaml:"base,omitempty"`
	Builder string `json:"builder,omitempty" yaml:"builder,omitempty"`
	// Interpreter is the interpreter identity the env points at ("PATH
	// VERSION sha256:HEX12", InterpreterLabel; "PATH VERSION" in pins made
	// before), shown by Diff; covered by Seal.
	Interpreter string    `json:"interpreter,omitempty" yaml:"interpreter,omitempty"`
	Packages    []Package `json:"packages,omitempty" yaml:"packages,omitempty"`
}

// Provider is what a register or update change pins.
type Provider struct {
	Name             string            `json:"name" yaml:"name"`
	Package          *Package          `json:"package,omitempty" yaml:"package,omitempty"`
	Protocol         []int             `json:"protocol,omitempty" yaml:"protocol,omitempty,flow"`
	ManifestDigest   digest.Digest     `json:"manifestDigest,omitempty" yaml:"manifestDigest,omitempty"`
	LockDigest       digest.Digest     `json:"lockDigest,omitempty" yaml:"lockDigest,omitempty"`
	Secrets          []string          `json:"secrets,omitempty" yaml:"secrets,omitempty"`
	Egress           []string          `json:"egress,omitempty" yaml:"egress,omitempty"`
	Budgets          map[string]int64  `json:"budgets,omitempty" yaml:"budgets,omitempty"`
	Entrypoints      []Entrypoint      `json:"entrypoints,omitempty" yaml:"entrypoints,omitempty"`
	Materializations []Materialization `json:"materializations,omitempty" yaml:"materializations,omitempty"`
}

// Entrypoint is p's entrypoint named name, nil when p has none so named
// (nil p included).
func (p *Provider) Entrypoint(name string) *Entrypoint {
	if p == nil {
		return nil
	}
	for i := range p.Entrypoints {
		if p.Entrypoints[i].Name == name {
			return &p.Entrypoints[i]
		}
	}
	return nil
}

// ProposeTarget is refusal.ActionPropose's target for p, provider
// name's spec: the package to propose again, "NAME==VERSION@sha256:HEX"
// (name when p names no package, nil p included).
func (p *Provider) ProposeTarget(name string) string {
	if p == nil || p.Package == nil {
		return name
	}
	return p.Package.Name + "==" + p.Package.Version + "@" + p.Package.SHA256.String()
}

// Images are the images (REF@sha256:…, each platform's) p pins, in its
// order; nil when it pins none (nil p included).
func (p *Provider) Images() []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, m := range p.Materializations {
		if m.Backend == BackendContainer && m.Image != "" {
			out = append(out, m.Image)
		}
	}
	return out
}

// ProposePlatforms are the platforms p pins (its local envs', its
// resolutions' and its images', once each, in its order) and the
// interpreter path its envs point at: what an install that proposes p
// again is given to propose the same envs and images (refusal.Remedy's
// Platforms and Python; its images are Images). A pin of images and no
// env gives its platforms and no interpreter (the install's own default
// builds no env the pin names). Nil and "" when p pins neither an env
// nor an image, or envs of more than one interpreter (an install takes
// one: WithProposeChoices advises the proposal with each). A pin with an
// image gave nil, and the install it advised named placeholders for
// platforms the pin knew.
func (p *Provider) ProposePlatforms() (platforms []string, python string) {
	platforms, pythons := p.proposeInputs()
	if len(pythons) > 1 {
		return nil, ""
	}
	if len(pythons) == 1 {
		python = pythons[0]
	}
	return platforms, python
}

// proposeInputs are what ProposePlatforms gives, with every interpreter
// path p's envs point at, once each, in its order (pythons). Nil
// platforms where p pins neither an env nor an image, or an env whose
// interpreter it does not record.
func (p *Provider) proposeInputs() (platforms, pythons []string) {
	if p == nil {
		return nil, nil
	}
	images := false
	for _, m := range p.Materializations {
		switch m.Backend {
		case BackendContainer:
			images = true
		case BackendLocal:
			path := interpreterPath(m.Interpreter)
			if path == "" {
				return nil, nil
			}
			if !slices.Contains(pythons, path) {
				pythons = append(pythons, path)
			}
		}
		if !slices.Contains(platforms, m.Platform) {
			platforms = append(platforms, m.Platform)
		}
	}
	if len(pythons) == 0 && !images {
		return nil, nil
	}
	return platforms, pythons
}

// WithProposeChoices completes e's proposal of p again (its remedy
// ActionPropose, with its package, images and bytecode set) where p's
// envs point at several interpreters, which ProposePlatforms gives none
// of (an install takes one): the advice named placeholders for the
// platforms and the interpreter, though the pin knows each env's. The
// proposal names the platforms (nil: p's own) and the interpreter prefer
// (where it is one of p's, else p's first); another remedy after it (e's
// Or, before those it had) names each other interpreter of p's; and e's
// detail names each env's platform and interpreter, a proposal making the
// envs of one. Nothing where p's envs point at one interpreter or none,
// or e's remedy is another.
func (p *Provider) WithProposeChoices(e *refusal.Error, platforms []string, prefer string) *refusal.Error {
	own, pythons := p.proposeInputs()
	if e == nil || e.Remedy == nil || e.Remedy.Action != refusal.ActionPropose || len(pythons) < 2 {
		return e
	}
	if platforms == nil {
		platforms = own
	}
	if i := slices.Index(pythons, prefer); i > 0 {
		pythons = append([]string{prefer}, slices.Delete(slices.Clone(pythons), i, i+1)...)
	}
	var envs []string
	for _, m := range p.Materializations {
		if m.Backend == BackendLocal {
			envs = append(envs, m.Platform+" on "+interpreterPath(m.Interpreter))
		}
	}
	first := e.Remedy
	rest := first.Or
	first.Platforms, first.Python = platforms, pythons[0]
	last := first
	for _, py := range pythons[1:] {
		r := *first
		r.Python, r.Or = py, nil
		last.Or = &r
		last = &r
	}
	last.Or = rest
	e.Detail += fmt.Sprintf(" (the pin's envs point at %d interpreters, %s; a proposal makes the envs of one, and only resolves the other platforms: the proposal with each is advised)", len(pythons), strings.Join(envs, ", "))
	return e
}

// WithoutBytecode reports whether m, a local env p pins, was made
// without bytecode (env create or install --no-compile). Bytecode is part
// of the materialization digest (docs/digests.md), so the pin's digest
// says it: the digest is computed from m's platform, interpreter and
// resolution and p's root wheel without bytecode, and is m's only for an
// env made so. Any other (one with bytecode, the default, or a digest
// these inputs do not give) is false.
func (p *Provider) WithoutBytecode(m Materialization) bool {
	if p == nil || p.Package == nil || m.Backend != BackendLocal {
		return false
	}
	path := m.InterpreterPath()
	version, _, _ := strings.Cut(strings.TrimPrefix(m.Interpreter, path+" "), " ")
	root := &digest.Root{Name: p.Package.Name, Version: p.Package.Version, SHA256: p.Package.SHA256}
	d, err := digest.LocalMaterializationDigest(m.Platform, digest.Interpreter{Path: path, Version: version}, m.Resolution, root, "")
	return err == nil && d == m.Digest
}

// ProposeNoBytecode reports whether every local env p pins was made
// without bytecode (WithoutBytecode): an install that proposes p again
// is given --no-compile to make the same envs (refusal.Remedy's
// NoBytecode), else it proposes envs with bytecode, other envs of other
// digests. False when p pins no local env (nil p included), or envs both
// with and without bytecode (an install makes them all one way).
func (p *Provider) ProposeNoBytecode() bool {
	n := 0
	for _, m := range p.materializations() {
		if m.Backend != BackendLocal {
			continue
		}
		if !p.WithoutBytecode(m) {
			return false
		}
		n++
	}
	return n > 0
}

// materializations are p's (none for a nil p).
func (p *Provider) materializations() []Materialization {
	if p == nil {
		return nil
	}
	return p.Materializations
}

// InterpreterLabel is a local materialization's Interpreter for the
// interpreter at path, of version and sha256 sum: "PATH VERSION
// sha256:HEX12" (interpreterPath reads the path back).
func InterpreterLabel(path, version string, sum digest.Digest) string {
	return path + " " + version + " sha256:" + sum.Hex()[:12]
}

// InterpreterPath is the path of the interpreter m's env points at (its
// Interpreter's), "" when m records none.
func (m Materialization) InterpreterPath() string { return interpreterPath(m.Interpreter) }

// interpreterPath is the path of a materialization's interpreter
// identity, "PATH VERSION sha256:HEX12" (or "PATH VERSION"), "" when it
// has none.
func interpreterPath(id string) string {
	if i := strings.LastIndexByte(id, ' '); i > 0 && strings.HasPrefix(id[i+1:], "sha256:") {
		id = id[:i]
	}
	if i := strings.LastIndexByte(id, ' '); i > 0 {
		return id[:i]
	}
	return ""
}

// Change is one change of a change-set: Provider for register, update and
// retire (retire needs only the name); Key for trust-key (name, role, PEM,
// digest) and untrust-key (name, digest); Policy for set-policy.
type Change struct {
	Action   string    `json:"action" yaml:"action"`
	Provider *Provider `json:"provider,omitempty" yaml:"provider,omitempty"`
	Key      *Key      `json:"key,omitempty" yaml:"key,omitempty"`
	Policy   *Policy   `json:"policy,omitempty" yaml:"policy,omitempty"`
}

// lacksProtocol reports a register or update that names no protocol
// range: one an older cruxprov proposed still decodes, but neither a new
// proposal nor an approval takes it (its pin would be refused
// protocol_unsupported by every verify).
func (c *Change) lacksProtocol() bool {
	return (c.Action == ActionRegister || c.Action == ActionUpdate) && c.Provider != nil && len(c.Provider.Protocol) == 0
}

// Spec is what a change-set proposes and what its id digests: the base it
// replaces (the accepted pin's spec digest, or the trust state's digest
// for a governance change; zero for a first registration), the revision it
// would be accepted at, and exactly one change.
type Spec struct {
	Base     digest.Digest `json:"base" yaml:"base"`
	Revision int64         `json:"revision" yaml:"revision"`
	Changes  []Change      `json:"changes" yaml:"changes"`
}

// Metadata identifies a change-set.
type Metadata struct {
	ID         digest.Digest `json:"id" yaml:"id"`
	ProposedAt time.Time     `json:"proposedAt" yaml:"proposedAt"`
	ProposedBy string        `json:"proposedBy" yaml:"proposedBy"`
}

// Approval is one signature over a change-set's approval payload
// (ApprovalPayload).
type Approval struct {
	// Signer is the signing key's digest (what distinctness counts).
	Signer digest.Digest `json:"signer" yaml:"signer"`
	// Name is the key's trusted name when it signed (informative).
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// Signature is the base64 (standard) ASN.1 DER ECDSA signature.
	Signature string     `json:"signature" yaml:"signature"`
	At        time.Time  `json:"at" yaml:"at"`
	Expires   *time.Time `json:"expires" yaml:"expires"`
}

// Status is a change-set's state and approvals.
type Status struct {
	State     string     `json:"state" yaml:"state"`
	Approvals []Approval `json:"approvals" yaml:"approvals"`
	Reason    string     `json:"reason,omitempty" yaml:"reason,omitempty"`
}

// ChangeSet is a proposal (DESIGN §8).
type ChangeSet struct {
	APIVersion string   `json:"apiVersion" yaml:"apiVersion"`
	Kind       string   `json:"kind" yaml:"kind"`
	Metadata   Metadata `json:"metadata" yaml:"metadata"`
	Spec       Spec     `json:"spec" yaml:"spec"`
	Status     Status   `json:"status" yaml:"status"`
}

// Scope is the provider name the change-set's approvals sign: the
// provider's, or TrustScope for a governance change.
func (c *ChangeSet) Scope() string { return c.Spec.scope() }

func (s *Spec) scope() string {
	if len(s.Changes) != 1 {
		return ""
	}
	ch := s.Changes[0]
	switch ch.Action {
	case ActionTrustKey, ActionUntrustKey, ActionSetPolicy:
		return TrustScope
	}
	if ch.Provider == nil {
		return ""
	}
	return ch.Provider.Name
}

// Pin is an accepted pin: the spec that was approved, its digest and
// revision, and the approvals that reached the threshold. A retired pin
// (Retired) keeps its revision so that revisions only go up.
type Pin struct {
	Format     string        `json:"format"`
	Provider   string        `json:"provider"`
	Revision   int64         `json:"revision"`
	SpecDigest digest.Digest `json:"specDigest"`
	Spec       Spec          `json:"spec"`
	Approvals  []Approval    `json:"approvals"`
	AcceptedAt time.Time     `json:"acceptedAt"`
	Retired    bool          `json:"retired,omitempty"`
}

// ProviderSpec returns the pinned provider (nil for a retired pin).
func (p *Pin) ProviderSpec() *Provider {
	if p.Retired || len(p.Spec.Changes) != 1 {
		return nil
	}
	return p.Spec.Changes[0].Provider
}

// Trust is the trust state: the keys, the policy, and the governance
// change-sets that made them from the root of trust, with their approvals,
// so that any verifier can replay them.
type Trust struct {
	Format   string `json:"format"`
	Revision int64  `json:"revision"`
	Root     Key    `json:"root"`
	Keys     []Key  `json:"keys"`
	Policy   Policy `json:"policy"`
	History  []Step `json:"history"`
}

// Step is one applied governance change-set in Trust.History.
type Step struct {
	SpecDigest digest.Digest `json:"specDigest"`
	Spec       Spec          `json:"spec"`
	Approvals  []Approval    `json:"approvals"`
}
