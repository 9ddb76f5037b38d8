package lockfile

import "github.com/cruxible/cruxprov/marker"

// evalEnv is a platform's marker environment in the PEP 751 lock-file
// context (extras and dependency_groups are sets).
type evalEnv = marker.Env

func newEvalEnv(vars map[string]string, extras, groups []string) (*evalEnv, error) {
	e, err := marker.NewEnv(vars)
	if err != nil {
		return nil, err
	}
	if extras == nil {
		extras = []string{}
	}
	if groups == nil {
		groups = []string{}
	}
	return e.WithLockFile(extras, groups), nil
}

// compiledMarker is a parsed marker, evaluated once per platform.
type compiledMarker struct{ m marker.Marker }

func compileMarker(s string) (compiledMarker, error) {
	m, err := marker.Parse(s)
	return compiledMarker{m}, err
}

func (c compiledMarker) eval(e *evalEnv) (bool, error) { return c.m.Evaluate(e) }
