// Package refusal owns the typed refusals of cruxprov: the closed set of
// machine-readable codes of DESIGN §2 and the Error that carries one.
//
// Every unexpected condition on the pipeline, verify and run paths is
// reported as a *Error. Callers test for a code with errors.Is against a
// Code value, or errors.As to a *Error; never by comparing strings.
// This package does not print, map codes to exit statuses (cmd/ does), or
// know which component raised a code.
package refusal

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a refusal: a code from the closed set, a one-line human detail,
// and the cause it wraps (may be nil).
type Error struct {
	Code   Code
	Detail string
	Err    error
	// Remedy, when set, is what the operator can do about it; cmd/
	// renders it as a command line, so no library names a command or flag.
	Remedy *Remedy
}

// Action is a remedy an operator can take, named by what it does, not by
// the command line that does it (cmd/ renders each as one).
type Action string

// The remedies a refusal may carry.
const (
	// ActionReplaceEnv rebuilds a drifted env under its own digest,
	// from its seal (Target: the env).
	ActionReplaceEnv Action = "replace_env"
	// ActionRebuildEnv rebuilds an env whose seal is missing or cannot be
	// trusted to name its inputs (or that is gone, tree and seal, where an
	// accepted pin names it), under the same digest, from the wheel
	// (or lock), platform and interpreter that made it (Target: the env;
	// Package, Platforms, Python and NoBytecode, those inputs where an
	// accepted pin names the env).
	ActionRebuildEnv Action = "rebuild_env"
	// ActionListEnvs lists the envs of the store that holds Target (a
	// path that names no env: a mistyped digest, an env removed), or of
	// the command's store.
	ActionListEnvs Action = "list_envs"
	// ActionFetch runs the command again online: the wheels it needs are
	// fetched from the index (again, for a damaged blob that was removed).
	ActionFetch Action = "fetch"
	// ActionGC frees the store's space: it lists (a dry run first) the
	// sealed envs no accepted pin or open change-set names, and the blobs
	// nothing names, which gc --envs then removes. Envs are what fill a
	// store; the blobs nothing names alone are mostly the wheels the
	// refused command just fetched, which a retry fetches again.
	ActionGC Action = "gc"
	// ActionEmbed adds a manifest and a lock to a wheel (Target: the wheel).
	ActionEmbed Action = "embed"
	// ActionWheelFile runs the refused command again with the root
	// wheel given as its file, which the operator names, instead of by
	// name and version: offline, there is no index to fetch it from by
	// those (Target: the file's name, its tags elided, as
	// "acme_echo-1.0.0-….whl").
	ActionWheelFile Action = "wheel_file"
	// ActionNoBytecode runs the command again without compiling bytecode
	// (another env: bytecode is part of its identity).
	ActionNoBytecode Action = "no_bytecode"
	// ActionNoCache runs the command again without the store's caches:
	// for a damaged cache entry that could not be set aside, and for a
	// store short of the space the caches' new entries would take (the
	// command fits without them).
	ActionNoCache Action = "no_cache"
	// ActionPlatformList lists the platform presets.
	ActionPlatformList Action = "platform_list"
	// ActionNamePlatform runs the refused command again for one platform,
	// which the operator chooses among those the accepted pin has
	// materializations of for the backend asked (Remedy.Platforms).
	ActionNamePlatform Action = "name_platform"
	// ActionNamePython runs the refused command again with another
	// interpreter, which the operator names: one that runs (and, for a
	// platform, matches it), or, building an image, the interpreter's
	// path in the base image.
	ActionNamePython Action = "name_python"
	// ActionNameEntrypoint runs the refused command again for one of the
	// entrypoints the accepted pin has, which the detail names and the
	// operator chooses (Target: the entrypoint asked for, which it has
	// not).
	ActionNameEntrypoint Action = "name_entrypoint"
	// ActionReviewChangesets lists the open change-sets, the proposals
	// an approval would accept.
	ActionReviewChangesets Action = "review_changesets"
	// ActionPropose proposes the provider's package again (install), so
	// that what changed is reviewed and approved (Target: the package,
	// "NAME==VERSION@sha256:HEX", or the provider's name).
	ActionPropose Action = "propose"
	// ActionRenewApproval approves the accepted pin's change-set again
	// with an approver key whose approval expired: a new approval, with
	// its own expiry, that counts (Target: the change-set id).
	ActionRenewApproval Action = "renew_approval"
	// ActionRepairRegistry writes again, under the registry's lock, the
	// files the history says otherwise: a pin file lost or put back from
	// before (from the change-set the history accepted last), and
	// interfaces.json (from the history's registrations), and a
	// trust.json lost (from the history's governance steps and their
	// change-sets; Target: the root of trust's key digest, whose public
	// key the repair is given). Run by the registry's owner, it first
	// finishes a change left interrupted.
	ActionRepairRegistry Action = "repair_registry"
	// ActionScanLedger lists every bad line of a corrupt receipts ledger,
	// scanning on past them (Target: the ledger).
	ActionScanLedger Action = "scan_ledger"
	// ActionUnenforcedLimits runs a container again where a rootless
	// podman cannot apply the memory, CPU and pids limits, without them
	// (the network, file system, capability, user and ulimit confinement
	// still holds): the executor's explicit choice.
	ActionUnenforcedLimits Action = "unenforced_limits"
	// ActionSecretPipe runs a container run again with its secrets by
	// pipe (fd 3), where the path mode's private tmpfs cannot be made
	// (it needs root; the pipe mode does not).
	ActionSecretPipe Action = "secret_pipe"
	// ActionDisallowEnv runs a container run again without allowing the
	// variable that podman reads itself into the provider's environment
	// (Target: the variable's name).
	ActionDisallowEnv Action = "disallow_env"
	// ActionTrustKey trusts another public key in the registry: the
	// root of trust in a registry that trusts none yet, a change-set
	// the approvers approve after that (Target: the key's role,
	// "approver" or "builder"; Remedy.Name, when set, the name to
	// trust it under).
	ActionTrustKey Action = "trust_key"
	// ActionUntrustKey proposes untrusting the key the registry trusts
	// under a name (Target: the name).
	ActionUntrustKey Action = "untrust_key"
	// ActionListKeys lists the keys the registry trusts: their names,
	// roles and digests.
	ActionListKeys Action = "list_keys"
	// ActionSetThreshold proposes setting the number of distinct
	// approver keys a change-set needs (Target: the number).
	ActionSetThreshold Action = "set_threshold"
	// ActionRetire proposes retiring an accepted provider: it no
	// longer runs once that is approved (Target: the provider's name).
	ActionRetire Action = "retire"
	// ActionApprove approves a proposed change-set with an approver key
	// (Target: the change-set id).
	ActionApprove Action = "approve"
	// ActionRegisterInterface registers an interface's JSON schema in
	// the registry (Target: the interface id, or "" where there are
	// several, which the refusal names).
	ActionRegisterInterface Action = "register_interface"
	// ActionGrantRead has the owner of Target, a file or directory this
	// user was denied (a directory above what it read, which it may not
	// enter, or the file itself), make it readable, and a directory
	// enterable, by every user, as a store's files (0644) and
	// directories (0755) are for the executors that read them.
	ActionGrantRead Action = "grant_read"
	// ActionGrantWrite has this user give itself write access to Target,
	// a file or directory of its own whose mode denies it (a receipts
	// ledger kept read-only, a state directory of mode 0555).
	ActionGrantWrite Action = "grant_write"
	// ActionMoveAway moves Target, a file of this user's that stands
	// where a file of another kind must be (this host and user's own
	// receipts ledger path holding a directory, a FIFO, a socket or a
	// device; a file where a directory of that ledger's path must be),
	// aside to Target.moved, which keeps it for a look: the next run
	// makes what belongs there anew.
	ActionMoveAway Action = "move_away"
	// ActionRunAsOwner runs the refused command again as the user who
	// owns what it would change (Target: that user's uid), a registry
	// this user may not write: the store belongs to one operator, and an
	// executor only reads it.
	ActionRunAsOwner Action = "run_as_owner"
	// ActionNameNetrc runs the refused command again with the netrc
	// file named (NETRC): one this user can read that holds a machine
	// entry for the index's host (Target: the netrc file that could not
	// be read, or that holds no entry for the host, or "" when none was
	// named).
	ActionNameNetrc Action = "name_netrc"
	// ActionIndexCredentials runs the refused command again with the
	// right user and password in the index URL, for the operator to
	// fill in: the index refused those its URL gave.
	ActionIndexCredentials Action = "index_credentials"
	// ActionIndexScheme runs the refused command again with the index
	// URL's scheme Target ("https" or "http"), its port kept: the index's
	// port speaks TLS where the URL says http://, or plain HTTP where it
	// says https://.
	ActionIndexScheme Action = "index_scheme"
	// ActionCABundle runs the refused command again trusting, besides
	// the system pool, the CA certificates of a PEM file the operator
	// names: one with the authority that signed the certificate an index
	// (or the host its files are on) presented, which this host does not
	// trust.
	ActionCABundle Action = "ca_bundle"
	// ActionSetTempDir runs the refused command again with a temporary
	// directory (TMPDIR) that is writable and whose path podman takes as
	// an image name (lowercase letters, digits, '.', '_' and '-'): a
	// container run stages a layout there, and podman names the image by
	// its path.
	ActionSetTempDir Action = "set_tmpdir"
	// ActionOtherHome runs the refused env create again in a store on
	// another file system, one with room, which the operator names: the
	// advice where a store short of space holds no sealed env, so that
	// neither gc frees anything (the wheels the create fetched are
	// fetched again) and the room is taken by files outside the store.
	ActionOtherHome Action = "other_home"
	// ActionRestoreLayout puts back the OCI image layout an accepted pin
	// names at Target, its directory, which is gone or holds no layout:
	// the layout copied whole (oci-layout, index.json, blobs) from where
	// it was built or kept, or written there again from the registry it
	// was pushed to, with its signature and attestation tags. Its Or is
	// the proposal of another image instead.
	ActionRestoreLayout Action = "restore_layout"
	// ActionSetStateDir runs the refused command again with another
	// state directory for the verifier's floors, one this user can
	// write on a file system with room, which the operator names; or
	// has Target, where the write was refused (a directory this user
	// may not write, one on a read-only file system, or a full one),
	// made writable or given room. Without a Target it is also the
	// advice for a registry behind a floor that a copy of it raised
	// (a store copied whole, verified from the same state directory):
	// each copy is verified from a state directory of its own.
	ActionSetStateDir Action = "set_state_dir"
	// ActionNameSecret runs the refused run again with --secret
	// Target=@FILE, Target the secret reference the provider declares
	// that had no value (none given, a file that cannot be read, a
	// variable not set), FILE one holding its value, which only the
	// operator knows; a --secret given for Target is replaced.
	ActionNameSecret Action = "name_secret"
)

// Remedy is a typed piece of advice: an action and what it applies to.
type Remedy struct {
	Action Action `json:"action"`
	// Target is the object of the action (an env path, a wheel), or "".
	Target string `json:"target,omitempty"`
	// Images are, for ActionPropose, the images (REF@sha256:…) the
	// pin names: a proposal that does not name them again drops them.
	Images []string `json:"images,omitempty"`
	// Name is, for ActionTrustKey, the name to trust the key under ("":
	// the public key file's name, as key trust defaults it).
	Name string `json:"name,omitempty"`
	// Platforms are, for ActionNamePlatform, the platforms the pin has
	// materializations of for the backend asked, one of which to name
	// (the Target, each other an Or's); for ActionPropose, the platforms
	// the pin names (its envs', its resolutions' and its images') when
	// the pin has envs (with Python) or images: an install given them
	// proposes the envs and images the pin names (nil: the operator
	// names them); for ActionRebuildEnv with Package, the env's platform.
	Platforms []string `json:"platforms,omitempty"`
	// Python is, for ActionPropose with Platforms, the interpreter the
	// pin's envs point at ("" for a pin of images and no env: the install
	// names none; for envs of several interpreters, one, and an Or the
	// same proposal with each other); for ActionRebuildEnv with Package,
	// the interpreter the env points at.
	Python string `json:"python,omitempty"`
	// Package is, for ActionRebuildEnv, the root wheel the env was made
	// from, "NAME==VERSION@sha256:HEX", when the accepted pin that names
	// the env knows it (with Platforms, the env's one platform, Python
	// and NoBytecode): the rebuild names those inputs ("": the operator
	// names them).
	Package string `json:"package,omitempty"`
	// NoBytecode is, for ActionRebuildEnv with Package, that the env was
	// made without compiled bytecode (part of its identity); for
	// ActionPropose, that the pin's envs were (an install that proposes
	// them again makes them without it too, else it proposes other envs).
	// Its key is snake_case, as every other multi-word key of the
	// refusal's JSON and the remedy's action "no_bytecode" are: it was
	// "noBytecode", which the CLI's --json keeps beside it in its v1
	// documents (docs/refusals.md, Remedies).
	NoBytecode bool `json:"no_bytecode,omitempty"`
	// Backend is, for ActionPropose, a backend the proposal is to add a
	// materialization of: "container", whose image (REF@sha256:…, built
	// and signed for the package) only the operator knows.
	Backend string `json:"backend,omitempty"`
	// Or is another remedy that fixes it too, where there are several
	// (its own Or the next): a store short of space where the command
	// fits without the store's caches (ActionNoCache) or in the space
	// freed (ActionGC), or, where it ran out writing bytecode, without
	// bytecode (ActionNoBytecode). cmd/ renders each after the first, and
	// leaves out one the command cannot carry out (a command without the
	// caches to leave out).
	Or *Remedy `json:"or,omitempty"`
}

// WithRemedy sets e's remedy and returns e.
func (e *Error) WithRemedy(a Action, target string) *Error {
	e.Remedy = &Remedy{Action: a, Target: target}
	return e
}

// OrRemedy adds another remedy of e, which fixes it too, after those it
// has (the last one's Remedy.Or), and returns e; e's remedy is set first.
func (e *Error) OrRemedy(a Action, target string) *Error {
	if e.Remedy != nil {
		last := e.Remedy
		for last.Or != nil {
			last = last.Or
		}
		last.Or = &Remedy{Action: a, Target: target}
	}
	return e
}

// WithImages sets the images of e's remedy (Remedy.Images) and returns e.
func (e *Error) WithImages(images []string) *Error {
	if e.Remedy != nil && len(images) > 0 {
		e.Remedy.Images = images
	}
	return e
}

// WithPlatforms sets the platforms of e's remedy (Remedy.Platforms) and
// returns e.
func (e *Error) WithPlatforms(platforms []string) *Error {
	if e.Remedy != nil && len(platforms) > 0 {
		e.Remedy.Platforms = platforms
	}
	return e
}

// WithBackend sets the backend of e's remedy (Remedy.Backend) and
// returns e.
func (e *Error) WithBackend(backend string) *Error {
	if e.Remedy != nil {
		e.Remedy.Backend = backend
	}
	return e
}

// WithProposePlatforms sets the platforms and interpreter a propose
// remedy's install names (Remedy.Platforms, Remedy.Python: the pin's own;
// python "" where the pin has images and no env, whose install names
// none) and returns e; none where platforms is empty (the operator names
// them).
func (e *Error) WithProposePlatforms(platforms []string, python string) *Error {
	if e.Remedy != nil && len(platforms) > 0 {
		e.Remedy.Platforms, e.Remedy.Python = platforms, python
	}
	return e
}

// WithProposeNoBytecode sets, for an ActionPropose remedy, that the
// pin's envs were made without bytecode (Remedy.NoBytecode) and returns
// e; nothing for another remedy, or where noBytecode is false.
func (e *Error) WithProposeNoBytecode(noBytecode bool) *Error {
	if e.Remedy != nil && e.Remedy.Action == ActionPropose && noBytecode {
		e.Remedy.NoBytecode = true
	}
	return e
}

// WithRebuildInputs sets the inputs an ActionRebuildEnv remedy's rebuild
// names (Remedy.Package, Platforms, Python, NoBytecode: those the env was
// made from, as the accepted pin that names it knows them) and returns
// e; none where e's remedy is another, or pkg, platform or python is "".
func (e *Error) WithRebuildInputs(pkg, platform, python string, noBytecode bool) *Error {
	if e.Remedy != nil && e.Remedy.Action == ActionRebuildEnv && pkg != "" && platform != "" && python != "" {
		e.Remedy.Package, e.Remedy.Platforms, e.Remedy.Python, e.Remedy.NoBytecode = pkg, []string{platform}, python, noBytecode
	}
	return e
}

// RemedyOf returns the remedy of the first refusal in err's chain that
// carries one, or nil.
func RemedyOf(err error) *Remedy {
	for err != nil {
		if r, ok := err.(*Error); ok && r.Remedy != nil {
			return r.Remedy
		}
		err = errors.Unwrap(err)
	}
	return nil
}

// Message is the refusal's one-line message without its code: the
// detail and the cause, as Error renders them after "<code>: ". A detail
// that quotes its cause already (it put the cause after a ": " to say
// what to do after it) is not followed by it a second time.
func (e *Error) Message() string {
	if e.Err == nil {
		return e.Detail
	}
	cause := e.Err.Error()
	if cause == "" || quotes(e.Detail, cause) {
		// A detail that quotes its cause already (a registry's one line,
		// a transport's error) says it once.
		return e.Detail
	}
	return e.Detail + ": " + cause
}

// quotes reports whether detail quotes cause whole, as Message renders a
// cause: after ": " (or at its start) and followed by its end, ";",
// ")" or " (". A cause's text that is only part of the detail (a short
// cause such as "EOF" in a file name, or in "unexpected EOF") is not
// the cause said, and leaving it out would lose it.
func quotes(detail, cause string) bool {
	for i := 0; ; {
		j := strings.Index(detail[i:], cause)
		if j < 0 {
			return false
		}
		j += i
		before, after := detail[:j], detail[j+len(cause):]
		if (before == "" || strings.HasSuffix(before, ": ")) &&
			(after == "" || after[0] == ';' || after[0] == ')' || strings.HasPrefix(after, " (")) {
			return true
		}
		i = j + 1
	}
}

// New returns a refusal with a formatted detail and no cause.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Wrap returns a refusal with a formatted detail wrapping cause.
func Wrap(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...), Err: cause}
}

// Error renders "<code>: <detail>[: <cause>]".
func (e *Error) Error() string {
	return string(e.Code) + ": " + e.Message()
}

// Unwrap returns the wrapped cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is this refusal's Code, or a *Error with the
// same Code (a *Error target with an empty Code matches any refusal).
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return e.Code == t
	case *Error:
		return t.Code == "" || t.Code == e.Code
	}
	return false
}

// CodeOf returns the code of the first refusal in err's chain, or "" when
// err carries none.
func CodeOf(err error) Code {
	var r *Error
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}
