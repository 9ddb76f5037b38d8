package invoke

import (
	"os"
	"testing"
)

// BenchmarkReadOnlyEnv is what a run started by root pays for its view of
// the env read-only (roThread) beside the run itself: a thread of its own,
// a mount namespace (a copy of the executor's mount table), the env's
// bind and its read-only remount, and the thread's end.
func BenchmarkReadOnlyEnv(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the read-only view is made for runs started by root only")
	}
	env := b.TempDir()
	for b.Loop() {
		t, err := readOnlyEnv(env)
		if err != nil {
			b.Fatal(err)
		}
		t.Release()
	}
}
