package main

import (
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestFloorRemedyRenders: a verifier floor the file system refused
// carries set_state_dir (registry's TestFloorRemedy), rendered as the
// refused command again with --state-dir DIR (a --state-dir given
// replaced), none for a command without it; cmd/ alone knew what to do
// from the FloorError before, and a Go caller got no remedy.
func TestFloorRemedyRenders(t *testing.T) {
	rem := &refusal.Remedy{Action: refusal.ActionSetStateDir, Target: "/s/floors"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cruxprov", "verify", "acme-echo", "--json"}, "cruxprov verify acme-echo --state-dir DIR"},
		{[]string{"cruxprov", "verify", "acme-echo", "--state-dir", "/s"}, "cruxprov verify acme-echo --state-dir DIR"},
		{[]string{"cruxprov", "--home", "/h", "run", "acme-echo", "echo", "--state-dir=/s", "--input", "in.json"},
			"cruxprov --home /h run acme-echo echo --input in.json --state-dir DIR"},
		{[]string{"cruxprov", "env", "verify", "/h/envs/abc"}, ""},
	} {
		if got := renderRemedy(rem, tc.args); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
}
