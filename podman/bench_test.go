package podman

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
)

// baseShimEnv names another cruxshim binary (say, one built from the commit
// before a change to the shim): BenchmarkRun then measures the fixture image
// built with it too, beside the one with the shim built from this tree.
const baseShimEnv = "CRUXPROV_BENCH_BASE_SHIM"

// podCPU is where a rootful podman on cgroups v1 with the cgroupfs manager
// puts its containers (libpod_parent/libpod-ID) and their conmons
// (libpod_parent/conmon); cpuacct charges every ancestor, so the parent's
// usage keeps the CPU of containers already removed.
const podCPU = "/sys/fs/cgroup/cpuacct/libpod_parent"

// containersCPU is the CPU (ns) every container of a rootful podman has
// spent, conmon's left out, or -1 where it cannot be read.
func containersCPU() int64 {
	all, err1 := readInt(filepath.Join(podCPU, "cpuacct.usage"))
	conmon, err2 := readInt(filepath.Join(podCPU, "conmon", "cpuacct.usage"))
	if err1 != nil || err2 != nil {
		return -1
	}
	return all - conmon
}

func readInt(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

var (
	baseFxOnce sync.Once
	baseFx     *invoketest.Container
	baseFxErr  error
	baseFxDir  string // removed by TestMain
)

// BenchmarkRun is one container run end to end through Executor.Run (the
// probe entrypoint, two secrets through the pipe), reporting the wall clock
// a run (ns/op) and, where podCPU is readable, the CPU the container spent
// (container-cpu-ms/op: the shim, the init, the harness, the provider).
// Sub-benchmark "shim=tree" is the fixture image with the shim built from
// this tree; "shim=base" the same image with the shim at $CRUXPROV_BENCH_BASE_SHIM.
// Nothing else may run containers meanwhile: the CPU is every container's.
func BenchmarkRun(b *testing.B) {
	f := fixture(b)
	run := func(b *testing.B, f *invoketest.Container) {
		e := &Executor{}
		c := f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
		if _, err := e.Run(context.Background(), c); err != nil { // the image's first start, uncounted
			b.Fatal(err)
		}
		cpu0, n := containersCPU(), 0
		for b.Loop() {
			res, err := e.Run(context.Background(), c)
			if err != nil || res.Status != invoke.StatusOK {
				b.Fatalf("%v %+v", err, res)
			}
			n++
		}
		if cpu1 := containersCPU(); cpu0 >= 0 && cpu1 >= 0 {
			b.ReportMetric(float64(cpu1-cpu0)/1e6/float64(n), "container-cpu-ms/op")
		}
	}
	b.Run("shim=tree", func(b *testing.B) { run(b, f) })
	b.Run("shim=base", func(b *testing.B) {
		p := os.Getenv(baseShimEnv)
		if p == "" {
			b.Skipf("no %s: only the shim of this tree is measured", baseShimEnv)
		}
		baseFxOnce.Do(func() {
			dir, h := imagetest.Base(b)
			if baseFxDir, baseFxErr = os.MkdirTemp("", "cruxprov-podman-basefx-"); baseFxErr != nil {
				return
			}
			baseFx, baseFxErr = invoketest.BuildContainer(context.Background(), baseFxDir, image.LayoutPrefix+dir+"@"+h.String(), p, imagetest.Platform)
		})
		if baseFxErr != nil {
			b.Fatal(baseFxErr)
		}
		run(b, baseFx)
	})
}
