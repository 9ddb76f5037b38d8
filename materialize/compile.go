package materialize

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cruxible/cruxprov/refusal"
)

// compileScript compiles site-packages with unchecked-hash invalidation,
// recording the final env path (not the staging path) in code objects.
// Files that do not compile (Python 2 test data in some wheels) are
// skipped, as pip skips them.
const compileScript = `import compileall, py_compile, sys
compileall.compile_dir(sys.argv[1], quiet=1, workers=int(sys.argv[2]),
    stripdir=sys.argv[3], prependdir=sys.argv[4],
    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
`

// compileBytecode runs the env's own interpreter (bin/python in the
// staging dir) over site-packages. It runs with -S (no site: a wheel's .pth
// file does not run at install time) and PYTHONHASHSEED=0 so that the
// bytecode is reproducible.
func compileBytecode(ctx context.Context, staging, final string, l Layout, jobs int) error {
	sp := filepath.Join(staging, filepath.FromSlash(l.SitePackages))
	cmd := exec.CommandContext(ctx, filepath.Join(staging, filepath.FromSlash(l.Python)), "-S", "-s", "-c", compileScript,
		sp, strconv.Itoa(max(jobs, 1)), staging, final)
	cmd.Env = []string{"PYTHONHASHSEED=0", "LC_ALL=C.UTF-8"}
	cmd.Dir = staging
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// the workers of compileall's process pool share the group
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return refusal.Wrap(refusal.MaterializeFailed, err, "compiling bytecode with %s failed (%s); retry with --no-compile to skip it", l.Python, firstLine(lastLines(out.String())))
	}
	return nil
}

func lastLines(s string) string {
	b := []byte(s)
	if len(b) > 400 {
		b = b[len(b)-400:]
	}
	return string(bytes.ReplaceAll(b, []byte("\n"), []byte(" | ")))
}
