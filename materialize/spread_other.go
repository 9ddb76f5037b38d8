//go:build !linux

package materialize

// spreadChildren is a placement hint for Linux's ext file systems only.
func spreadChildren(string) {}
