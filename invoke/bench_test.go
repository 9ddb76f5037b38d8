package invoke_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/invoke"
	pyrt "github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/shim"
	"github.com/cruxible/cruxprov/watch"
)

// corpusEnvVar names the sealed env of the medium bench corpus
// (bench/invoke.sh prepares it); without it the corpus benchmarks skip.
const corpusEnvVar = "CRUXPROV_BENCH_CORPUS_ENV"

// shimEnvVar names the cruxshim binary shim-pid1-spawn runs (say, one built
// from the commit before a change to the shim); without it the shim is built
// from this tree.
const shimEnvVar = "CRUXPROV_BENCH_SHIM"

var benchSecrets = map[string]string{"acme/alpha": "a-token", "acme/beta": "b-token"}

// BenchmarkInvoke is what an executor pays per call through the Go API,
// beside its floor, on the fixture env and on the medium corpus env
// (~3,900 files):
//
//   - bare-spawn: the env's python with the harness on the same request,
//     the secret bundle on fd 3 through a pipe, nothing else;
//   - shim-pid1-spawn: the same behind cruxshim as the first process of a
//     pid namespace of its own, as in a container (the shim at
//     $CRUXPROV_BENCH_SHIM, else built from this tree): what the init in
//     front of the harness costs, without the container's start;
//   - go-api-watched: invoke.Subprocess with the watch.Verifier around a
//     fast seal verify (one full verify, then O(1) while nothing changed),
//     the intent and outcome synced to a ledger, every §10 obligation;
//   - go-api-fast-verify: the same with a fast seal verify on every call
//     (what the CLI pays for verification).
func BenchmarkInvoke(b *testing.B) {
	b.Run("fixture", func(b *testing.B) {
		f := fixture(b)
		benchEnv(b, f.Call("probe", nil, benchSecrets), []byte(`{"acme/alpha":"a-token","acme/beta":"b-token"}`))
	})
	b.Run("corpus", func(b *testing.B) {
		env := os.Getenv(corpusEnvVar)
		if env == "" {
			b.Skipf("no corpus env: bench/invoke.sh builds the medium corpus and sets %s", corpusEnvVar)
		}
		s, err := seal.Load(env)
		if err != nil {
			b.Fatal(err)
		}
		sd, err := seal.ContentDigest(s)
		if err != nil {
			b.Fatal(err)
		}
		c := &invoke.Call{
			Env: env, Python: s.Env.Python, Provider: "bench-provider", Entrypoint: "echo", Object: "bench_provider.impl:Echo",
			ImplementationDigest: digest.Sum([]byte("bench_provider.impl:Echo")), MaterializationDigest: s.Materialization.Digest,
			SealDigest: sd, Platform: "host", Input: []byte(`{"hello":"world"}`), Runtime: pyrt.RuntimeOf(s.Resolution.Packages),
		}
		benchEnv(b, c, nil)
	})
}

func benchEnv(b *testing.B, c *invoke.Call, bundle []byte) {
	b.Run("bare-spawn", func(b *testing.B) { bareSpawn(b, c, bundle, nil) })
	b.Run("shim-pid1-spawn", func(b *testing.B) {
		sh := os.Getenv(shimEnvVar)
		if sh == "" {
			sh = imagetest.Shim(b)
		}
		argv := []string{sh}
		if bundle != nil { // as the container executor: the flag only with a secret to pass
			argv = append(argv, "--secret-pipe-fd", strconv.Itoa(shim.SecretFD))
		}
		bareSpawn(b, c, bundle, argv)
	})
	b.Run("go-api-watched", func(b *testing.B) {
		v := watch.NewVerifier(watch.Spec{Env: c.Env}, func(ctx context.Context) error {
			_, err := seal.Verify(ctx, c.Env, seal.Options{})
			return err
		})
		defer v.Close()
		// An executor that stays up pays the first full verify once, at
		// its start: the loop measures the calls after it.
		if err := v.Verify(context.Background()); err != nil {
			b.Fatal(err)
		}
		call := *c
		call.Verify = v.Verify
		goAPI(b, &call)
		if n := v.FullVerifies(); n != 1 {
			b.Errorf("%d full verifies, want 1 (something changed the env while it ran)", n)
		}
	})
	b.Run("go-api-fast-verify", func(b *testing.B) {
		call := *c
		call.Verify = func(ctx context.Context) error {
			_, err := seal.Verify(ctx, c.Env, seal.Options{})
			return err
		}
		goAPI(b, &call)
	})
}

func goAPI(b *testing.B, c *invoke.Call) {
	l, err := receipts.Open(context.Background(), filepath.Join(b.TempDir(), "r.jsonl"), receipts.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: b.TempDir()}
	ctx := context.Background()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		res, err := ex.Run(ctx, c)
		if err != nil || res.Status != invoke.StatusOK {
			b.Fatal(err, res)
		}
	}
	reportCPU(b, cpu)
}

// cpuTime is the CPU time (user and system) of this process and of its
// waited-for children: on a loaded machine it varies less than the wall
// clock.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// reportCPU reports the CPU time per call since start as cpu-ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// bareSpawn spawns the env's python with the harness directly on the same
// request, the bundle (if any) on fd 3 through a pipe: the floor. With a
// shim (its argv before the command) the spawn is the shim with the harness
// as its command, as the first process of a new pid namespace.
func bareSpawn(b *testing.B, c *invoke.Call, bundle []byte, shimArgv []string) {
	line, err := invoke.Request(c, "bench-run", invoke.Budgets{TimeoutMS: 30000, OutputBytes: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	py := filepath.Join(c.Env, c.Python)
	dir := b.TempDir()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		argv := append(append([]string(nil), shimArgv...), pyrt.Harness(py)...)
		cmd := exec.Command(argv[0], argv[1:]...)
		if shimArgv != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
			if os.Geteuid() != 0 {
				cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
				cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
				cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
			}
		}
		cmd.Stdin = bytes.NewReader(line)
		cmd.Dir = dir
		cmd.Env = []string{}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		var r, w *os.File
		if bundle != nil {
			if r, w, err = os.Pipe(); err != nil {
				b.Fatal(err)
			}
			extra := make([]*os.File, shim.SecretFD-2)
			extra[shim.SecretFD-3] = r
			cmd.ExtraFiles = extra
		}
		if err := cmd.Start(); err != nil {
			if shimArgv != nil && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL)) {
				b.Skipf("cannot make a pid namespace here: %v", err)
			}
			b.Fatal(err)
		}
		if r != nil {
			r.Close()
			w.Write(bundle)
			w.Close()
		}
		if err := cmd.Wait(); err != nil || !bytes.Contains(out.Bytes(), []byte(`"status":"ok"`)) {
			b.Fatal(err, out.String(), errOut.String())
		}
	}
	reportCPU(b, cpu)
}
