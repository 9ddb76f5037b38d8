//go:build !linux

package kernelfs

// fsName is "" where there is no sysfs or procfs to be on.
func fsName(string) (string, error) { return "", nil }
