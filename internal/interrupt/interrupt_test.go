package interrupt

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestCaught: a SIGINT and a SIGTERM sent to the process arrive on
// Caught, in order, without anything but the package's init asking for
// them (Go's default would end the test binary).
func TestCaught(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-Caught():
			if got != sig {
				t.Fatalf("sent %v, caught %v", sig, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v not caught", sig)
		}
	}
}
