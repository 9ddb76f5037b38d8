package marker

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/pep440"
)

// Env is a marker environment: the PEP 508 variables of one platform plus
// the evaluation context. Build it once (NewEnv, then WithExtra or
// WithLockFile) and share it: an Env is immutable and safe for concurrent
// use. It holds exactly the values given (it never probes the host); a
// marker naming an absent variable fails with UndefinedEnvironmentName.
type Env struct {
	slots         [numVars]slot
	other         map[string]string // keys that are not PEP 508 variables
	extraExplicit bool
}

// slot is one variable's value, laid out together for evaluation.
type slot struct {
	val   string
	canon string    // NormalizeExtra(val) for extras/dependency_groups given as strings
	set   []string  // extras, dependency_groups in the lock-file context (normalized)
	vt    *verTable // version variables only; immutable, shared by copies
	has   bool
	isSet bool
}

// NewEnv returns a metadata-context environment (pypa/packaging's default
// context: `extra` is "" unless vars sets it) holding vars, keyed by PEP 508
// variable name ("python_version", "sys_platform", ...). Keys that are not
// PEP 508 variables are kept too (pypa/packaging allows them). A
// python_full_version ending in "+" (an untagged CPython build) is read as
// "<version>+local", as pypa/packaging does. Values must be valid UTF-8.
func NewEnv(vars map[string]string) (*Env, error) {
	e := &Env{}
	for k, v := range vars {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, &EvalError{Kind: InvalidEnvironment, Name: k, Detail: "environment key or value is not valid UTF-8"}
		}
		i := varIndex(k)
		if i < 0 {
			if e.other == nil {
				e.other = map[string]string{}
			}
			e.other[k] = v
			continue
		}
		e.setString(i, v)
	}
	if e.slots[vExtra].has {
		e.extraExplicit = true
	} else {
		e.setString(vExtra, "")
	}
	return e, nil
}

// setString stores a string value, normalizing as pypa/packaging does.
func (e *Env) setString(i int, v string) {
	switch i {
	case vExtra:
		if v != "" {
			v = NormalizeExtra(v)
		}
	case vPythonFullVersion:
		if strings.HasSuffix(v, "+") {
			v += "local"
		}
	}
	sl := slot{val: v, has: true}
	if isSetVar(i) {
		sl.canon = NormalizeExtra(v)
	}
	if isVersionVar(i) {
		t := &verTable{}
		if pv, err := pep440.Parse(v); err == nil {
			t.ver, t.verOK = pv, true
		}
		for op := opLT; op <= opArbitrary; op++ {
			sp, err := pep440.ParseSpecifier(opText[op] + v)
			t.rspec[op], t.rspecOK[op] = sp, err == nil
		}
		sl.vt = t
	}
	e.slots[i] = sl
}

// verTable is what evaluation needs of a version variable's value: the
// value as a version, and <op><value> as a specifier for each operator
// (pypa/packaging builds Specifier(op + value) when the variable is on the
// right).
type verTable struct {
	ver     pep440.Version
	verOK   bool
	rspec   [numOps]pep440.Specifier
	rspecOK [numOps]bool
}

// WithExtra returns a copy in the metadata context with `extra` set
// (normalized; "" means no extra is being installed).
func (e *Env) WithExtra(extra string) *Env {
	c := *e
	c.setString(vExtra, extra)
	c.extraExplicit = true
	return &c
}

// WithLockFile returns a copy in the PEP 751 lock-file context: `extras`
// and `dependency_groups` are the given sets (names normalized; nil means
// empty), and `extra` is undefined unless NewEnv was given one.
func (e *Env) WithLockFile(extras, dependencyGroups []string) *Env {
	c := *e
	if !c.extraExplicit {
		c.slots[vExtra] = slot{}
	}
	c.putSet(vExtras, extras)
	c.putSet(vDependencyGroups, dependencyGroups)
	return &c
}

func (e *Env) putSet(i int, names []string) {
	s := make([]string, 0, len(names))
	for _, n := range names {
		s = append(s, NormalizeExtra(n))
	}
	e.slots[i] = slot{set: s, has: true, isSet: true}
}

// Get returns a variable's value and whether it is defined; a set-valued
// variable (lock-file context) reads as its members joined by ",".
func (e *Env) Get(name string) (string, bool) {
	i := varIndex(name)
	if i < 0 {
		v, ok := e.other[name]
		return v, ok
	}
	sl := &e.slots[i]
	if sl.isSet {
		return strings.Join(sl.set, ","), true
	}
	return sl.val, sl.has
}

// EvalErrorKind says why a marker could not be evaluated.
type EvalErrorKind int

const (
	// UndefinedComparison: the operator is not defined for the operands
	// (~= or === on strings that are not versions, a set-valued variable on
	// the left, ...); pypa/packaging's UndefinedComparison.
	UndefinedComparison EvalErrorKind = iota + 1
	// UndefinedEnvironmentName: the marker names a variable the environment
	// does not define; pypa/packaging's UndefinedEnvironmentName.
	UndefinedEnvironmentName
	// InvalidEnvironment: NewEnv was given a value it cannot hold.
	InvalidEnvironment
)

// String names the kind as pypa/packaging names the exception.
func (k EvalErrorKind) String() string {
	switch k {
	case UndefinedComparison:
		return "UndefinedComparison"
	case UndefinedEnvironmentName:
		return "UndefinedEnvironmentName"
	case InvalidEnvironment:
		return "InvalidEnvironment"
	}
	return "EvalErrorKind(" + strconv.Itoa(int(k)) + ")"
}

// EvalError reports a marker that cannot be evaluated in an environment.
type EvalError struct {
	Kind   EvalErrorKind
	Name   string // the environment variable concerned
	Detail string
}

// Error renders "marker: <Kind>: <detail>".
func (e *EvalError) Error() string {
	return "marker: " + e.Kind.String() + ": " + e.Detail
}
