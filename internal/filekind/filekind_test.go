package filekind

import (
	"io/fs"
	"testing"
)

func TestOf(t *testing.T) {
	for _, c := range []struct {
		m    fs.FileMode
		want string
	}{
		{fs.ModeDir | 0o755, "a directory"},
		{fs.ModeNamedPipe | 0o644, "a FIFO (named pipe)"},
		{fs.ModeSocket | 0o755, "a socket"},
		{fs.ModeDevice | fs.ModeCharDevice | 0o666, "a device"},
		{fs.ModeDevice | 0o660, "a device"},
		{fs.ModeSymlink | 0o777, "a symbolic link"},
		{fs.ModeIrregular, "not a regular file"},
	} {
		if got := Of(c.m); got != c.want {
			t.Errorf("Of(%v) = %q, want %q", c.m, got, c.want)
		}
	}
}

func TestNotRegular(t *testing.T) {
	if got := NotRegular(fs.ModeDir | 0o755); got != "a directory, not a regular file" {
		t.Errorf("NotRegular(dir) = %q", got)
	}
	if got := NotRegular(fs.ModeIrregular); got != "not a regular file" {
		t.Errorf("NotRegular(irregular) = %q", got)
	}
}
