package materialize

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/cruxible/cruxprov/refusal"
)

// compileScript compiles the NUL-separated source paths on stdin with
// unchecked-hash invalidation, recording the final env path (argv[2] in
// place of the staging prefix argv[1]) in code objects, exactly as
// compileall.compile_dir(stripdir=, prependdir=) does. Files that do not
// compile (Python 2 test data in some wheels) are skipped, as pip skips
// them; an I/O error fails the run.
const compileScript = `import py_compile, sys
strip, prepend = sys.argv[1], sys.argv[2]
mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
for f in sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\0"):
    if not f:
        continue
    try:
        py_compile.compile(f, dfile=prepend + f[len(strip):], doraise=True, invalidation_mode=mode)
    except (py_compile.PyCompileError, SyntaxError, UnicodeError, ValueError):
        pass
`

// compileBytecode compiles the .py files of site-packages (sources, paths
// relative to the env root) with the env's own interpreter (bin/python in
// the staging dir), split by size over compileProcs(jobs) processes that each compile
// their share in-process. It runs with -S (no site: a wheel's .pth file
// does not run at install time) and PYTHONHASHSEED=0 so that the bytecode
// is reproducible.
func compileBytecode(ctx context.Context, staging, final string, l Layout, sources []string, sizes map[string]int64, jobs int) error {
	if len(sources) == 0 {
		return nil
	}
	jobs = compileProcs(jobs, len(sources))
	// Largest first onto the lightest share.
	slices.SortFunc(sources, func(a, b string) int { return cmpInt64(sizes[b], sizes[a]) })
	shares := make([][]string, jobs)
	load := make([]int64, jobs)
	for _, s := range sources {
		k := slices.Index(load, slices.Min(load))
		shares[k] = append(shares[k], s)
		load[k] += sizes[s] + 4096
	}
	python := filepath.Join(staging, filepath.FromSlash(l.Python))
	errs := make([]error, jobs)
	var wg sync.WaitGroup
	for k, share := range shares {
		wg.Go(func() {
			var in bytes.Buffer
			for _, s := range share {
				in.WriteString(filepath.Join(staging, filepath.FromSlash(s)))
				in.WriteByte(0)
			}
			cmd := exec.CommandContext(ctx, python, "-S", "-s", "-c", compileScript, staging, final)
			cmd.Env = []string{"PYTHONHASHSEED=0", "LC_ALL=C.UTF-8"}
			cmd.Dir = staging
			cmd.Stdin = &in
			cmd.WaitDelay = 5 * time.Second
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				if ctx.Err() != nil {
					errs[k] = ctx.Err()
					return
				}
				errs[k] = refusal.Wrap(refusal.MaterializeFailed, err, "compiling bytecode with %s failed (%s); retry with --no-compile to skip it", l.Python, firstLine(lastLines(out.String())))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// compileProcs is how many compile processes to start for n sources and
// jobs: each is a CPU-bound Python, so more than the CPUs only costs
// memory and startup (--jobs 1000 would start 1000 interpreters), and
// never more than the sources.
func compileProcs(jobs, n int) int {
	return max(1, min(jobs, runtime.NumCPU(), n))
}

func lastLines(s string) string {
	b := []byte(s)
	if len(b) > 400 {
		b = b[len(b)-400:]
	}
	return string(bytes.ReplaceAll(b, []byte("\n"), []byte(" | ")))
}
