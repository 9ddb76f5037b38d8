package podman

import "testing"

// setKillGroup replaces killGroup for t's duration.
func setKillGroup(t *testing.T, f func(pgid int)) {
	t.Helper()
	old := killGroup
	killGroup = f
	t.Cleanup(func() { killGroup = old })
}
