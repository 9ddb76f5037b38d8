package invoke

import (
	"os/exec"
	"strings"
	"testing"
)

// TestKilledHarnessNamesTheSignal: a harness killed by a signal the
// executor did not send is harness_exited naming the signal, with the
// exit status 128+N, whether the executor saw the signal itself or a
// launcher in front (bwrap, the harness's init, podman) reported it as
// 128+N. It said "the harness was killed by killed" before (the signal's
// strsignal text), and "the harness exited 137" behind a launcher.
func TestKilledHarnessNamesTheSignal(t *testing.T) {
	for name, script := range map[string]string{
		"signaled": "kill -KILL $$",
		"reported": "exit 137",
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", script)
			if err := cmd.Run(); err == nil {
				t.Fatal("the shell ended 0")
			}
			res := &Result{ExitCode: exitStatus(cmd.ProcessState)}
			parseOutput(res, nil, "run-1")
			if res.Error == nil || res.Error.Code != CodeExited || res.ExitCode != 137 {
				t.Fatalf("result %+v %+v, want %s exit 137", res, res.Error, CodeExited)
			}
			if m := res.Error.Message; !strings.Contains(m, "killed by SIGKILL") || strings.Contains(m, "by killed") {
				t.Fatalf("message %q, want one naming SIGKILL", m)
			}
		})
	}
	res := &Result{ExitCode: 3}
	parseOutput(res, nil, "run-1")
	if res.Error == nil || res.Error.Message != "the harness exited 3" {
		t.Fatalf("exit 3: %+v", res.Error)
	}
}
