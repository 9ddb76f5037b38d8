//go:build !linux || cruxprov_nospread

package materialize

import "os"

// spreadStaging is false: the placement hints are for Linux's ext file
// systems only, and the tag cruxprov_nospread leaves them out there too.
var spreadStaging = false

// mkdirStaging creates the staging env directory path, without the
// placement hints.
func mkdirStaging(path string) (string, error) {
	return path, os.Mkdir(path, 0o755)
}
