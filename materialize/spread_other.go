//go:build !linux

package materialize

import "os"

// mkdirStaging creates the staging env directory path; the placement hints
// are for Linux's ext file systems only.
func mkdirStaging(path string) (string, error) {
	return path, os.Mkdir(path, 0o755)
}
