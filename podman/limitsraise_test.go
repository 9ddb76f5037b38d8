package podman

import "testing"

// TestLimitsNeverRaised: DESIGN §10 gives a container run the seed
// executor's limits (Defaults: --memory 256m --cpus 1 --pids-limit 128,
// …), which the caller may lower, never raise. An Executor whose Limits
// ask for more gets Defaults, each field alone; one that asks for less
// gets that. And a container of an Executor that asks for more holds
// pids.max 128 (TestContainment's probe), as one that asks for nothing.
func TestLimitsNeverRaised(t *testing.T) {
	raised := Limits{Memory: Defaults.Memory * 64, CPUs: Defaults.CPUs * 64, Pids: Defaults.Pids * 64, NoFile: Defaults.NoFile * 64,
		NProc: Defaults.NProc * 64, WorkdirBytes: Defaults.WorkdirBytes * 64, ShmBytes: Defaults.ShmBytes * 64}
	if got := (&Executor{Limits: raised}).limits(); got != Defaults {
		t.Errorf("limits asked above Defaults: %+v, want Defaults %+v", got, Defaults)
	}
	lowered := Limits{Memory: Defaults.Memory / 2, CPUs: Defaults.CPUs / 2, Pids: Defaults.Pids / 2, NoFile: Defaults.NoFile / 2,
		NProc: Defaults.NProc / 2, WorkdirBytes: Defaults.WorkdirBytes / 2, ShmBytes: Defaults.ShmBytes / 2}
	if got := (&Executor{Limits: lowered}).limits(); got != lowered {
		t.Errorf("limits asked below Defaults: %+v, want %+v", got, lowered)
	}
	mixed := raised
	mixed.Pids = Defaults.Pids / 2
	want := Defaults
	want.Pids = Defaults.Pids / 2
	if got := (&Executor{Limits: mixed}).limits(); got != want {
		t.Errorf("limits one lowered, the rest raised: %+v, want %+v", got, want)
	}
	if testing.Short() {
		return
	}
	f := fixture(t)
	if !limitsApply(t) {
		t.Skip("this podman does not apply the cgroup limits (rootless on cgroups v1)")
	}
	containment(t, &Executor{Limits: raised}, f, true)
}
