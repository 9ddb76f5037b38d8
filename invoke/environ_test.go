package invoke

import (
	"slices"
	"testing"
)

// TestEnvironSetWins: the executor's own entries (the protocol channel's
// variable) replace what Environ or Inject gave for that name, once: a
// caller injecting CRUXIBLE_PROTOCOL_FD=1 must not point the harness at
// another descriptor than the channel's.
func TestEnvironSetWins(t *testing.T) {
	c := &Call{
		Environ: []string{"CRUXIBLE_PROTOCOL_FD=7", "LANG=C"},
		Allow:   []string{"CRUXIBLE_PROTOCOL_FD", "LANG"},
		Inject:  []string{"CRUXIBLE_PROTOCOL_FD=1"},
	}
	got := environ(c, "CRUXIBLE_PROTOCOL_FD=4")
	if want := []string{"CRUXIBLE_PROTOCOL_FD=4", "LANG=C"}; !slices.Equal(got, want) {
		t.Errorf("environ = %q, want %q", got, want)
	}
}
