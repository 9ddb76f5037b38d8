package kernelfs

import (
	"os"
	"testing"
)

// TestOf: /sys and /proc, and paths not there under them, are the
// kernel's file systems; a temporary directory, and /proc/self/root/…
// (a link out of procfs, which statfs follows), are not.
func TestOf(t *testing.T) {
	if _, err := os.Stat("/sys/kernel"); err != nil {
		t.Skip("no sysfs at /sys here")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no procfs at /proc here")
	}
	tmp := t.TempDir()
	tmpFS, _ := Of("/tmp")
	for p, want := range map[string]string{
		"/sys":                     "sysfs",
		"/sys/kernel/no/such/dir":  "sysfs",
		"/proc":                    "procfs",
		"/proc/cruxprov-none/x":    "procfs",
		"/proc/self":               "procfs",
		tmp:                        "",
		tmp + "/not/there":         "",
		"/proc/self/root" + tmp:    "",
		"/proc/self/root/tmp/none": tmpFS,
	} {
		if got, _ := Of(p); got != want {
			t.Errorf("Of(%s) = %q, want %q", p, got, want)
		}
	}
	// at is what it was judged by: the nearest path there.
	if name, at := Of("/sys/kernel/no/such/dir"); name != "sysfs" || at != "/sys/kernel" {
		t.Errorf("Of(/sys/kernel/no/such/dir) = %q, %q; want sysfs, /sys/kernel", name, at)
	}
}
