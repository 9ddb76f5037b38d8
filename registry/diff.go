package registry

import (
	"sort"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pep440"
)

// Plan is what approving a change-set would change against the accepted
// pin, as `terraform plan` is for infrastructure: package by package,
// digests old → new, interpreter identity (the seal content digest),
// secrets and egress added or removed, budgets raised or lowered.
type Plan struct {
	// ID is the change-set's id, which the text plan's first line names.
	ID           digest.Digest `json:"id"`
	Provider     string        `json:"provider"`
	Action       string        `json:"action"`
	FromRevision int64         `json:"fromRevision"`
	ToRevision   int64         `json:"toRevision"`
	// Stale is true for a proposed change-set whose base is no longer
	// the accepted pin (or trust state): approving it is refused
	// (changeset_stale); it is proposed again.
	Stale       bool            `json:"stale"`
	Packages    []PackageChange `json:"packages"`
	Digests     []ValueChange   `json:"digests"`
	Entrypoints []ValueChange   `json:"entrypoints"`
	Secrets     SetChange       `json:"secrets"`
	Egress      SetChange       `json:"egress"`
	Budgets     []BudgetChange  `json:"budgets"`
	// Key is the key a trust-key change adds or an untrust-key change
	// removes (with every name it is trusted under), Policy the policy a
	// set-policy change sets; both are absent for a provider change.
	Key    *KeyChange `json:"key,omitempty"`
	Policy *Policy    `json:"policy,omitempty"`
}

// KeyChange is the key of a governance change: its name, role (empty
// for an untrust) and digest.
type KeyChange struct {
	Name   string        `json:"name"`
	Role   string        `json:"role,omitempty"`
	Digest digest.Digest `json:"digest"`
}

// PackageChange is one package of one materialization: Change is added,
// removed, upgraded, downgraded or hash-changed (same version, other
// wheel bytes or file).
type PackageChange struct {
	Platform string   `json:"platform"`
	Name     string   `json:"name"`
	Change   string   `json:"change"`
	Old      *Package `json:"old,omitempty"`
	New      *Package `json:"new,omitempty"`
}

// ValueChange is one named value old → new ("" when absent).
type ValueChange struct {
	What string `json:"what"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// SetChange lists what was added to and removed from a set.
type SetChange struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
}

// BudgetChange is one budget old → new (0 when absent); Raised says
// whether the new one allows more.
type BudgetChange struct {
	Name   string `json:"name"`
	Old    int64  `json:"old"`
	New    int64  `json:"new"`
	Raised bool   `json:"raised"`
}

// Diff compares a change-set with the accepted pin it would replace (nil
// or a retired pin: everything is added). A governance change-set gives
// a plan with only its action and revisions.
func Diff(old *Pin, cs *ChangeSet) *Plan {
	p := &Plan{ID: cs.Metadata.ID, Provider: cs.Scope(), ToRevision: cs.Spec.Revision,
		Packages: []PackageChange{}, Digests: []ValueChange{}, Entrypoints: []ValueChange{},
		Secrets: SetChange{Added: []string{}, Removed: []string{}}, Egress: SetChange{Added: []string{}, Removed: []string{}}, Budgets: []BudgetChange{}}
	if len(cs.Spec.Changes) == 1 {
		c := cs.Spec.Changes[0]
		p.Action = c.Action
		if c.Key != nil {
			p.Key = &KeyChange{Name: c.Key.Name, Role: c.Key.Role, Digest: c.Key.Digest}
		}
		if c.Policy != nil {
			pol := *c.Policy
			p.Policy = &pol
		}
	}
	var o, n *Provider
	if old != nil {
		p.FromRevision = old.Revision
		o = old.ProviderSpec()
	}
	if len(cs.Spec.Changes) == 1 && cs.Spec.Changes[0].Action != ActionRetire {
		n = cs.Spec.Changes[0].Provider
	}
	if o == nil {
		o = &Provider{}
	}
	if n == nil {
		n = &Provider{}
	}
	ds := func(what string, a, b digest.Digest) {
		if a != b {
			p.Digests = append(p.Digests, ValueChange{what, a.String(), b.String()})
		}
	}
	var op, np Package
	if o.Package != nil {
		op = *o.Package
	}
	if n.Package != nil {
		np = *n.Package
	}
	if op != np {
		p.Digests = append(p.Digests, ValueChange{"package", pkgText(op), pkgText(np)})
	}
	ds("manifest", o.ManifestDigest, n.ManifestDigest)
	ds("lock", o.LockDigest, n.LockDigest)
	oe, ne := map[string]Entrypoint{}, map[string]Entrypoint{}
	for _, e := range o.Entrypoints {
		oe[e.Name] = e
	}
	for _, e := range n.Entrypoints {
		ne[e.Name] = e
	}
	for _, name := range keys(oe, ne) {
		a, b := oe[name], ne[name]
		if a != b {
			p.Entrypoints = append(p.Entrypoints, ValueChange{name, epText(a), epText(b)})
		}
	}
	om, nm := map[string]Materialization{}, map[string]Materialization{}
	for _, m := range o.Materializations {
		om[m.Backend+" "+m.Platform] = m
	}
	for _, m := range n.Materializations {
		nm[m.Backend+" "+m.Platform] = m
	}
	for _, k := range keys(om, nm) {
		a, b := om[k], nm[k]
		ds(k+" materialization", a.Digest, b.Digest)
		ds(k+" resolution", a.Resolution, b.Resolution)
		ds(k+" seal content (interpreter identity)", a.Seal, b.Seal)
		if a.Interpreter != b.Interpreter {
			p.Digests = append(p.Digests, ValueChange{k + " interpreter", a.Interpreter, b.Interpreter})
		}
		if a.Image != b.Image {
			p.Digests = append(p.Digests, ValueChange{k + " image", a.Image, b.Image})
		}
		if a.Base != b.Base {
			p.Digests = append(p.Digests, ValueChange{k + " base image", a.Base, b.Base})
		}
		if a.Builder != b.Builder {
			p.Digests = append(p.Digests, ValueChange{k + " builder", a.Builder, b.Builder})
		}
		p.Packages = append(p.Packages, diffPackages(k, a.Packages, b.Packages)...)
	}
	p.Secrets = diffSet(o.Secrets, n.Secrets)
	p.Egress = diffSet(o.Egress, n.Egress)
	for _, k := range keys(o.Budgets, n.Budgets) {
		a, b := o.Budgets[k], n.Budgets[k]
		if a != b {
			p.Budgets = append(p.Budgets, BudgetChange{k, a, b, a != 0 && (b == 0 || b > a)})
		}
	}
	return p
}

func diffPackages(platform string, old, new []Package) []PackageChange {
	om, nm := map[string]Package{}, map[string]Package{}
	for _, x := range old {
		om[x.Name] = x
	}
	for _, x := range new {
		nm[x.Name] = x
	}
	var out []PackageChange
	for _, name := range keys(om, nm) {
		a, aok := om[name]
		b, bok := nm[name]
		c := PackageChange{Platform: platform, Name: name}
		switch {
		case !aok:
			c.Change, c.New = "added", &b
		case !bok:
			c.Change, c.Old = "removed", &a
		case a == b:
			continue
		case a.Version == b.Version:
			c.Change, c.Old, c.New = "hash-changed", &a, &b
		default:
			c.Change, c.Old, c.New = "upgraded", &a, &b
			va, ea := pep440.Parse(a.Version)
			vb, eb := pep440.Parse(b.Version)
			if ea == nil && eb == nil && pep440.Compare(va, vb) > 0 {
				c.Change = "downgraded"
			}
		}
		out = append(out, c)
	}
	return out
}

func diffSet(old, new []string) SetChange {
	in := func(xs []string, s string) bool {
		for _, x := range xs {
			if x == s {
				return true
			}
		}
		return false
	}
	c := SetChange{Added: []string{}, Removed: []string{}}
	for _, x := range new {
		if !in(old, x) {
			c.Added = append(c.Added, x)
		}
	}
	for _, x := range old {
		if !in(new, x) {
			c.Removed = append(c.Removed, x)
		}
	}
	sort.Strings(c.Added)
	sort.Strings(c.Removed)
	return c
}

func keys[V any](a, b map[string]V) []string {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func pkgText(p Package) string {
	if p.Name == "" {
		return ""
	}
	return p.Name + " " + p.Version + " " + p.SHA256.String()
}

func epText(e Entrypoint) string {
	if e.Name == "" {
		return ""
	}
	return e.Object + " " + e.Interface.ID + " " + e.ImplementationDigest.String()
}
