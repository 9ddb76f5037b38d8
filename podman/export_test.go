package podman

import (
	"testing"
	"time"
)

// setKillGroup replaces killGroup for t's duration.
func setKillGroup(t *testing.T, f func(pgid int)) {
	t.Helper()
	old := killGroup
	killGroup = f
	t.Cleanup(func() { killGroup = old })
}

// setDrainLimit replaces drainLimit for t's duration.
func setDrainLimit(t *testing.T, d time.Duration) {
	t.Helper()
	old := drainLimit
	drainLimit = d
	t.Cleanup(func() { drainLimit = old })
}
