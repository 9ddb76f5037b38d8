package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistryRepairWithoutAStore: registry repair with a --home that
// names nothing says there is no store there (exit 1), as registry log
// does, and makes nothing: it made <home>/registry and answered "nothing
// to repair", exit 0, for a mistyped --home.
func TestRegistryRepairWithoutAStore(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-home")
	for _, args := range [][]string{{"registry", "repair"}, {"registry", "repair", "--json"}} {
		r := cruxprov(t, append([]string{"--home", missing}, args...)...)
		if r.code != exitFailure || !strings.Contains(r.stderr, "there is no store at "+missing+"; check --home (or CRUXPROV_HOME)") || strings.Contains(r.stdout, "nothing to repair") {
			t.Errorf("%v with --home naming nothing: %+v", args, r)
		}
		if _, err := os.Lstat(missing); err == nil {
			t.Fatalf("%v made %s", args, missing)
		}
	}
}
