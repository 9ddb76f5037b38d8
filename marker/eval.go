package marker

import (
	"strconv"
	"strings"

	"github.com/cruxible/cruxprov/pep440"
)

// Evaluate reports whether the marker holds in env. As pypa/packaging
// does, every comparison is evaluated (no short-circuit), so a marker that
// names an undefined variable or makes an undefined comparison fails with
// an *EvalError even when the rest would decide the result. Version
// variables (python_version, python_full_version, implementation_version,
// platform_release) compare as PEP 440 versions when the operator and the
// other side form a valid specifier, pre-releases allowed; otherwise, and
// for every other variable, == and != compare strings, <= and >= mean
// equality, < and > are false, in / not in test substrings (set
// membership for the lock-file sets), and ~= / === are undefined.
// It does not allocate unless it returns an error.
// A nil env is an environment that defines nothing.
func (m Marker) Evaluate(env *Env) (bool, error) {
	if m.root == nil {
		return true, nil
	}
	if env == nil {
		env = &emptyEnv
	}
	return evalGroup(m.root, env)
}

var emptyEnv Env

func evalGroup(g *group, env *Env) (bool, error) {
	result, cur := false, true
	for i := range g.items {
		it := &g.items[i]
		var v bool
		var err error
		if it.sub != nil {
			v, err = evalGroup(it.sub, env)
		} else {
			v, err = it.leaf.eval(env)
		}
		if err != nil {
			return false, err
		}
		cur = cur && v
		if i < len(g.or) && g.or[i] {
			result = result || cur
			cur = true
		}
	}
	return result || cur, nil
}

func undefinedName(name string) error {
	return &EvalError{Kind: UndefinedEnvironmentName, Name: name, Detail: "the environment does not define " + strconv.Quote(name)}
}

func (l *leaf) undefinedComparison(name, lhs, rhs string) error {
	return &EvalError{Kind: UndefinedComparison, Name: name,
		Detail: "operator " + opText[l.op] + " is undefined for " + strconv.Quote(lhs) + " and " + strconv.Quote(rhs)}
}

func (l *leaf) eval(env *Env) (bool, error) {
	switch l.form {
	case formVarLeft:
		k := l.k
		sl := &env.slots[k]
		if !sl.has {
			return false, undefinedName(varNames[k])
		}
		if sl.isSet {
			return false, &EvalError{Kind: UndefinedComparison, Name: varNames[k],
				Detail: varNames[k] + " is a set in the lock-file context; write \"name\" in " + varNames[k]}
		}
		lhs := sl.val
		switch {
		case isSetVar(k):
			return l.stringOp(varNames[k], sl.canon, l.litCanon)
		case isVersionVar(k) && l.specOK:
			if l.op == opArbitrary {
				return l.spec.Match(lhs, pep440.PrereleasesAllow), nil
			}
			t := sl.vt
			return t.verOK && l.spec.Contains(t.ver, true), nil
		}
		return l.stringOp(varNames[k], lhs, l.lit)
	case formVarRight:
		k := l.k
		sl := &env.slots[k]
		if !sl.has {
			return false, undefinedName(varNames[k])
		}
		if sl.isSet {
			return l.setOp(varNames[k], l.litCanon, sl.set)
		}
		rhs := sl.val
		if isSetVar(k) {
			return l.stringOp(varNames[k], l.litCanon, sl.canon)
		}
		if isVersionVar(k) {
			if t := sl.vt; t.rspecOK[l.op] {
				sp := &t.rspec[l.op]
				if l.op == opArbitrary {
					return sp.Match(l.lit, pep440.PrereleasesAllow), nil
				}
				return l.litVerOK && sp.Contains(l.litVer, true), nil
			}
		}
		return l.stringOp(varNames[k], l.lit, rhs)
	default:
		rhs, ok := env.other[l.key]
		if !ok {
			return false, undefinedName(l.key)
		}
		return l.stringOp(l.key, l.lit, rhs)
	}
}

// stringOp applies the operator to two strings, as pypa/packaging does
// when no version comparison applies.
func (l *leaf) stringOp(name, lhs, rhs string) (bool, error) {
	switch l.op {
	case opIn:
		return strings.Contains(rhs, lhs), nil
	case opNotIn:
		return !strings.Contains(rhs, lhs), nil
	case opLT, opGT:
		return false, nil
	case opLE, opGE, opEQ:
		return lhs == rhs, nil
	case opNE:
		return lhs != rhs, nil
	}
	return false, l.undefinedComparison(name, lhs, rhs)
}

// setOp applies the operator to a string and a set (the lock-file
// context's extras and dependency_groups).
func (l *leaf) setOp(name, lhs string, set []string) (bool, error) {
	member := false
	for _, s := range set {
		if s == lhs {
			member = true
			break
		}
	}
	switch l.op {
	case opIn:
		return member, nil
	case opNotIn:
		return !member, nil
	case opNE:
		return true, nil
	case opLT, opGT, opLE, opGE, opEQ:
		return false, nil
	}
	return false, l.undefinedComparison(name, lhs, strings.Join(set, ","))
}
