//go:build !linux

package shim

// deliver refuses on systems other than Linux: fstatfs magic numbers and
// memfd_create are Linux's, so a path cannot be verified to be memory
// (secret_path_unverifiable, as DESIGN §11 says) and there is no anonymous
// memory file to hold a pipe's bundle off disk (secret_read_failed).
func deliver(o options, argv, env []string) error {
	if o.mode == modePath {
		return refuse(codePathUnverifiable)
	}
	return refuse(codeReadFailed)
}
