// Package filekind names the type of a file that is not a regular file,
// in the words every message of cruxprov uses for it: a ledger, an index
// build's input, an unpacked-wheel cache entry that is a directory, a
// FIFO, a socket, a device or a symbolic link says which.
package filekind

import "io/fs"

// Of is "a directory", "a FIFO (named pipe)", "a socket", "a device" or
// "a symbolic link" for a file of mode m of that type, and "not a regular
// file" for any other (a regular file included: callers ask of one that
// is not).
func Of(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// NotRegular is what a message says of a file of mode m that is not a
// regular one: "a directory, not a regular file" (a FIFO, a socket, a
// device, a symbolic link likewise), and "not a regular file" for any
// other type, so that "PATH is " + NotRegular(m) says which it is.
func NotRegular(m fs.FileMode) string {
	if k := Of(m); k != "not a regular file" {
		return k + ", not a regular file"
	}
	return "not a regular file"
}
