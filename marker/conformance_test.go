package marker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

func TestConformanceMarkers(t *testing.T) {
	dir := os.Getenv("CRUXPROV_CONFORMANCE_DIR")
	if dir == "" {
		t.Skip("CRUXPROV_CONFORMANCE_DIR is unset")
	}
	b, err := os.ReadFile(filepath.Join(dir, "pypa", "markers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Meta struct {
			GeneratedFrom string            `json:"generated_from"`
			FixedEnv      map[string]string `json:"FIXED_ENV"`
		} `json:"meta"`
		Cases []map[string]any `json:"cases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	t.Logf("markers: generated from %s", doc.Meta.GeneratedFrom)
	pass, fail := map[string]int{}, map[string]int{}
	defer func() {
		var kinds []string
		for k := range pass {
			kinds = append(kinds, k)
		}
		for k := range fail {
			if pass[k] == 0 {
				kinds = append(kinds, k)
			}
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			t.Logf("%-26s pass %4d  fail %d", k, pass[k], fail[k])
		}
	}()
	str := func(c map[string]any, k string) string { s, _ := c[k].(string); return s }
	for _, c := range doc.Cases {
		kind := str(c, "kind")
		check := func(ok bool, format string, args ...any) {
			t.Helper()
			if ok {
				pass[kind]++
				return
			}
			fail[kind]++
			t.Errorf("%s (%v) %q: %s", kind, c["source"], str(c, "marker"), fmt.Sprintf(format, args...))
		}
		switch kind {
		case "parse_invalid":
			_, err := Parse(str(c, "marker"))
			var pe *ParseError
			check(errors.As(err, &pe), "parsed (err %v)", err)
		case "normalize":
			m, err := Parse(str(c, "marker"))
			check(err == nil && m.String() == str(c, "normalized"), "got %q (%v), want %q", m.String(), err, str(c, "normalized"))
		case "not_equal":
			a, errA := Parse(str(c, "marker"))
			o, errB := Parse(str(c, "other"))
			check(errA == nil && errB == nil && (a.String() == o.String()) == c["expected"], "equal=%v", a.String() == o.String())
		case "parse_valid_then_evaluate", "evaluate":
			m, err := Parse(str(c, "marker"))
			if err != nil {
				check(false, "parse: %v", err)
				continue
			}
			if n, ok := c["normalized"].(string); ok && m.String() != n {
				check(false, "normalized %q, want %q", m.String(), n)
				continue
			}
			env := conformanceEnv(t, doc.Meta.FixedEnv, c)
			got, err := m.Evaluate(env)
			if want, ok := c["expected_error"].(string); ok {
				var ee *EvalError
				check(errors.As(err, &ee) && ee.Kind.String() == want, "got %v, %v; want %s", got, err, want)
				continue
			}
			check(err == nil && got == c["expected"], "got %v, %v; want %v", got, err, c["expected"])
		default:
			t.Errorf("unknown kind %q", kind)
		}
	}
}

// conformanceEnv builds the case's environment: FIXED_ENV overlaid with
// the case's values, in its context.
func conformanceEnv(t *testing.T, fixed map[string]string, c map[string]any) *Env {
	t.Helper()
	lock := c["context"] == "lock_file"
	vars := map[string]string{}
	for k, v := range fixed {
		if k == "extra" && lock {
			continue
		}
		vars[k] = v
	}
	var extras, groups []string
	hasSets := false
	if overlay, ok := c["environment"].(map[string]any); ok {
		for k, v := range overlay {
			switch v := v.(type) {
			case string:
				vars[k] = v
			case []any:
				hasSets = true
				for _, e := range v {
					if k == "extras" {
						extras = append(extras, e.(string))
					} else {
						groups = append(groups, e.(string))
					}
				}
			default:
				t.Fatalf("environment %s: %T", k, v)
			}
		}
	}
	env, err := NewEnv(vars)
	if err != nil {
		t.Fatal(err)
	}
	if lock || hasSets {
		env = env.WithLockFile(extras, groups)
	}
	return env
}
