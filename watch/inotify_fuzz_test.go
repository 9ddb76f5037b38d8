//go:build linux

package watch

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// realEvents is what the kernel queued for a watch of dir (wd 1) while a
// file was made, written, renamed and removed there, and the directory
// itself removed: IN_CREATE … IN_DELETE_SELF, IN_IGNORED.
func realEvents(t testing.TB) []byte {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skip(err)
	}
	defer unix.Close(fd)
	dir := t.TempDir()
	if _, err := unix.InotifyAddWatch(fd, dir, changes); err != nil {
		t.Skip(err)
	}
	p := filepath.Join(dir, "site-packages.pth")
	os.WriteFile(p, []byte("x"), 0o644)
	os.Rename(p, p+".2")
	os.Remove(p + ".2")
	os.Remove(dir)
	buf := make([]byte, 64<<10)
	n, err := unix.Read(fd, buf)
	if err != nil {
		t.Skip(err)
	}
	return buf[:n]
}

// FuzzRelevant: whatever bytes a read of the inotify descriptor gave,
// relevant never panics, and says nothing changed only when every byte
// parsed as whole events of watched descriptors, none of them a watch
// gone, none naming an entry watched (or none).
func FuzzRelevant(f *testing.F) {
	real := realEvents(f)
	f.Add(real)
	f.Add(real[:len(real)-1])
	ev := make([]byte, unix.SizeofInotifyEvent+16)
	binary.NativeEndian.PutUint32(ev[0:], 2)
	binary.NativeEndian.PutUint32(ev[4:], unix.IN_MODIFY)
	binary.NativeEndian.PutUint32(ev[12:], 16)
	copy(ev[16:], "other.txt")
	f.Add(ev)
	f.Fuzz(func(t *testing.T, b []byte) {
		w := &watcher{fd: -1, targets: map[int32]*target{
			1: {all: true},
			2: {names: map[string]bool{"site-packages.pth": true}},
		}}
		if w.relevant(b) {
			return
		}
		for len(b) > 0 {
			if len(b) < unix.SizeofInotifyEvent {
				t.Fatal("a partial event taken for none")
			}
			wd := int32(binary.NativeEndian.Uint32(b))
			mask := binary.NativeEndian.Uint32(b[4:])
			n := uint64(binary.NativeEndian.Uint32(b[12:]))
			if n > uint64(len(b)-unix.SizeofInotifyEvent) {
				t.Fatal("a name past the read taken for none")
			}
			name := string(bytes.TrimRight(b[16:16+n], "\x00"))
			tg := w.targets[wd]
			if mask&selfGone != 0 || tg == nil || tg.all || name == "" || tg.names[name] {
				t.Fatalf("event wd %d mask %#x name %q taken for none", wd, mask, name)
			}
			b = b[16+n:]
		}
	})
}

// TestRelevantPartialEvent: bytes left after the last whole event are a
// change (they were dropped: a read that did not parse said nothing
// changed).
func TestRelevantPartialEvent(t *testing.T) {
	ev := make([]byte, unix.SizeofInotifyEvent+16)
	binary.NativeEndian.PutUint32(ev[0:], 2)
	binary.NativeEndian.PutUint32(ev[4:], unix.IN_MODIFY)
	binary.NativeEndian.PutUint32(ev[12:], 16)
	copy(ev[16:], "other.txt")
	w := &watcher{fd: -1, targets: map[int32]*target{2: {names: map[string]bool{"x": true}}}}
	if w.relevant(ev) {
		t.Fatal("an event naming an entry not watched is relevant")
	}
	if !w.relevant(append(ev, 2, 0, 0)) {
		t.Error("a partial event after it is not")
	}
}
