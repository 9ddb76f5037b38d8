package invoke_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
	pyrt "github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/shim"
)

var benchSecrets = map[string]string{"acme/alpha": "a-token", "acme/beta": "b-token"}

// BenchmarkInvokeSubprocess is what an executor pays per call through the
// Go API: fast seal verify (the Verify hook), the intent and outcome
// synced to a ledger, and the spawn with every §10 obligation. Its peer is
// BenchmarkBareSpawn.
func BenchmarkInvokeSubprocess(b *testing.B) {
	f := fixture(b)
	l, err := receipts.Open(context.Background(), filepath.Join(b.TempDir(), "r.jsonl"), receipts.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: b.TempDir()}
	c := f.Call("probe", nil, benchSecrets)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := ex.Run(ctx, c)
		if err != nil || res.Status != invoke.StatusOK {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkBareSpawn spawns the env's python with the harness directly on
// the same request, the secret bundle on fd 3 through a pipe: the floor.
func BenchmarkBareSpawn(b *testing.B) {
	f := fixture(b)
	c := f.Call("probe", nil, benchSecrets)
	line, err := invoke.Request(c, "bench-run", invoke.Budgets{TimeoutMS: 30000, OutputBytes: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	bundle := []byte(`{"acme/alpha":"a-token","acme/beta":"b-token"}`)
	py := filepath.Join(f.Env, f.Python)
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(py, "-I", "-m", pyrt.HarnessModule)
		cmd.Stdin = bytes.NewReader(line)
		cmd.Dir = dir
		cmd.Env = []string{}
		var out bytes.Buffer
		cmd.Stdout = &out
		extra := make([]*os.File, shim.SecretFD-2)
		extra[shim.SecretFD-3] = r
		cmd.ExtraFiles = extra
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		r.Close()
		w.Write(bundle)
		w.Close()
		if err := cmd.Wait(); err != nil || !bytes.Contains(out.Bytes(), []byte(`"status":"ok"`)) {
			b.Fatal(err, out.String())
		}
	}
}
