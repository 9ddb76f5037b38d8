package invoke

import (
	"os/exec"
	"strings"
	"testing"
)

// TestKilledHarnessNamesTheSignal: a harness killed by a signal the
// executor did not send is harness_exited naming the signal. It said "the
// harness was killed by killed" before (the signal's strsignal text).
func TestKilledHarnessNamesTheSignal(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "kill -KILL $$")
	if err := cmd.Run(); err == nil {
		t.Fatal("the shell was not killed")
	}
	res := &Result{}
	parseResult(res, nil, "run-1", cmd.ProcessState)
	if res.Error == nil || res.Error.Code != CodeExited {
		t.Fatalf("result %+v, want %s", res, CodeExited)
	}
	if m := res.Error.Message; !strings.Contains(m, "SIGKILL") || strings.Contains(m, "by killed") {
		t.Fatalf("message %q, want one naming SIGKILL", m)
	}
}
