package shim

import (
	"math"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// maxBundle is the largest secret bundle delivered (64 KiB); reads are capped
// one byte above it, so size is measured, never trusted from fstat.
const maxBundle = 64 << 10

// memfdName is what /proc/PID/fd shows for the copy; it names no path.
const memfdName = "cruxshim-secret"

// deliver puts the secret on SecretFD, in the order of DESIGN §11: sweep the
// inherited descriptors, take the bundle from the path or the pipe, copy it
// into a sealed anonymous memory file, and leave that (and only that) open
// across exec on fd 3. argv and env are the shim's own, for the re-exec that
// frees fd 3 from the Go runtime (see reserve).
func deliver(o options, argv, env []string) error {
	named := -1
	if o.mode == modePipe {
		named = o.pipeFD
		// The named descriptor must be one the shim inherited: open and
		// without close-on-exec (everything the Go runtime opens has it).
		fl, err := unix.FcntlInt(uintptr(named), unix.F_GETFD, 0)
		if err != nil || fl&unix.FD_CLOEXEC != 0 {
			return refuse(codeReadFailed)
		}
		// And a pipe (or a socket): a regular file there (one on disk,
		// say) would hand CMD a bundle that stays on a mount, which path
		// mode refuses (secret_path_not_memory) and pipe mode must not let
		// through; a character device (a terminal, /dev/zero) is no
		// one-shot channel either.
		var st unix.Stat_t
		if err := unix.Fstat(named, &st); err != nil {
			return refuse(codeReadFailed)
		}
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFIFO && t != unix.S_IFSOCK {
			return refuse(codeReadFailed)
		}
	}
	mem, err := newMemfd()
	if err != nil {
		return refuse(codeReadFailed)
	}
	// Close every descriptor the shim inherited, but 0, 1, 2 and the named
	// one; a leaked inherited fd 3 is replaced by mem in the same step.
	mem, err = sweep(named, mem)
	if err != nil {
		return refuse(codeReadFailed)
	}
	if mem != SecretFD && named != SecretFD {
		// fd 3 belongs to the Go runtime (a cgroup file, or the poller when
		// the streams were non-blocking): writing over it could crash the
		// runtime before exec. Keep it open across one exec of the shim
		// itself, so the fresh copy finds fd 3 taken and replaces it.
		if _, err := unix.FcntlInt(SecretFD, unix.F_SETFD, 0); err != nil {
			return refuse(codeExecFailed)
		}
		_ = unix.Exec("/proc/self/exe", argv, env)
		return refuse(codeExecFailed)
	}
	markCloexec()

	var bundle []byte
	var r *RefusedError
	if o.mode == modePath {
		bundle, r = readPath(o.path)
	} else {
		bundle, r = drainPipe(named, o.timeout)
		if r == nil && named == SecretFD {
			// The pipe sits on fd 3: replacing it closes it in one step.
			if err := unix.Dup3(mem, SecretFD, unix.O_CLOEXEC); err != nil {
				r = refuse(codeReadFailed)
			} else {
				unix.Close(mem)
				mem = SecretFD
			}
		} else if r == nil {
			unix.Close(named)
		}
	}
	if r != nil {
		return r
	}
	err = fill(mem, bundle)
	clear(bundle)
	if err != nil {
		return refuse(codeReadFailed)
	}
	// Only now does the copy become visible to CMD.
	if _, err := unix.FcntlInt(SecretFD, unix.F_SETFD, 0); err != nil {
		return refuse(codeReadFailed)
	}
	return nil
}

// newMemfd creates the anonymous memory file, close-on-exec, on the lowest
// free descriptor from 3 up: when fd 3 is free it is taken at once, before the
// runtime can open anything there. Sealing and the no-exec seal are asked for
// and dropped only when the kernel does not know them.
func newMemfd() (int, error) {
	var fd int
	var err error
	for _, flags := range []int{
		unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING | unix.MFD_NOEXEC_SEAL,
		unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING,
		unix.MFD_CLOEXEC,
	} {
		fd, err = unix.MemfdCreate(memfdName, flags)
		if err != unix.EINVAL {
			break
		}
	}
	if err != nil {
		return -1, err
	}
	if fd >= SecretFD {
		return fd, nil
	}
	// A standard stream was closed and the memfd took its number: move it.
	hi, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, SecretFD)
	unix.Close(fd)
	return hi, err
}

// sweep closes every descriptor the shim inherited (those without
// close-on-exec: exec closed all the others, and the Go runtime opens its own
// with it) except 0, 1, 2 and named, so a pipe write end that leaked into the
// shim cannot keep the pipe from reaching EOF. An inherited fd 3 is replaced
// by mem atomically (dup3), so fd 3 is never free for the runtime to take;
// sweep returns where mem is now.
func sweep(named, mem int) (int, error) {
	fds, err := listFDs()
	if err != nil {
		return mem, err
	}
	for _, fd := range fds {
		if fd < 3 || fd == named || fd == mem {
			continue
		}
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || fl&unix.FD_CLOEXEC != 0 {
			continue // gone, or the runtime's own: close-on-exec already
		}
		if fd == SecretFD {
			if err := unix.Dup3(mem, SecretFD, unix.O_CLOEXEC); err != nil {
				return mem, err
			}
			unix.Close(mem)
			mem = SecretFD
			continue
		}
		unix.Close(fd)
	}
	return mem, nil
}

// listFDs lists the open descriptors from /proc/self/fd with raw system calls
// (no os.File, so nothing registers with the runtime's poller). Without /proc
// it probes every number below the descriptor limit (at most 1<<20).
func listFDs() ([]int, error) {
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return probeFDs(), nil
	}
	defer unix.Close(dir)
	var fds []int
	buf := make([]byte, 8192)
	var names []string
	for {
		n, err := unix.ReadDirent(dir, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names[:0])
		for _, name := range names {
			fd, err := strconv.Atoi(name)
			if err == nil && fd != dir {
				fds = append(fds, fd)
			}
		}
	}
	return fds, nil
}

func probeFDs() []int {
	limit := uint64(1 << 20)
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < limit {
		limit = rl.Cur
	}
	var fds []int
	for fd := 3; uint64(fd) < limit; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			fds = append(fds, fd)
		}
	}
	return fds
}

// markCloexec marks every descriptor from 3 up close-on-exec (fd 3 is cleared
// again only when the copy is complete), with close_range where the kernel has
// CLOSE_RANGE_CLOEXEC (5.11) and one fcntl per open descriptor otherwise.
func markCloexec() {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	fds, _ := listFDs()
	for _, fd := range fds {
		if fd >= 3 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}

// readPath takes the bundle from a file: opened without following a symlink
// or waiting on a FIFO, required to be a regular file with exactly one link
// on tmpfs or ramfs, unlinked, confirmed gone by the descriptor, and read with
// a cap. The checks are on the descriptor, not the name, except the unlink,
// which the link count afterwards confirms hit this very file.
func readPath(path string) ([]byte, *RefusedError) {
	var st unix.Stat_t
	// A first look by name, so a device or socket is refused without opening it.
	if err := unix.Lstat(path, &st); err != nil {
		return nil, refuse(codePathUnverifiable)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, refuse(codePathNotRegular)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	switch err {
	case nil:
	case unix.ELOOP, unix.ENXIO, unix.ENODEV:
		return nil, refuse(codePathNotRegular) // swapped for a symlink, socket or device
	default:
		return nil, refuse(codePathUnverifiable)
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, refuse(codePathUnverifiable)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, refuse(codePathNotRegular)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return nil, refuse(codePathUnverifiable)
	}
	if int64(fs.Type) != unix.TMPFS_MAGIC && int64(fs.Type) != unix.RAMFS_MAGIC {
		return nil, refuse(codePathNotMemory)
	}
	if st.Nlink != 1 {
		return nil, refuse(codePathLinked)
	}
	if err := unix.Unlink(path); err != nil {
		return nil, refuse(codePathUnlinkFailed)
	}
	if err := unix.Fstat(fd, &st); err != nil || st.Nlink != 0 {
		return nil, refuse(codePathUnlinkFailed)
	}
	buf := make([]byte, maxBundle+1)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			clear(buf)
			return nil, refuse(codeReadFailed)
		}
		if m == 0 {
			break
		}
		n += m
	}
	if n > maxBundle {
		clear(buf)
		return nil, refuse(codeTooLarge)
	}
	return buf[:n], nil
}

// drainPipe reads fd to EOF under one deadline for the whole drain, with
// poll(2) on the raw descriptor (os.File deadlines do not apply to every
// descriptor) and the descriptor made non-blocking, so no read can wait.
func drainPipe(fd int, timeout time.Duration) ([]byte, *RefusedError) {
	deadline := time.Now().Add(timeout)
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, refuse(codeReadFailed)
	}
	buf := make([]byte, maxBundle+1)
	n := 0
	fail := func(code string) ([]byte, *RefusedError) {
		clear(buf)
		return nil, refuse(code)
	}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fail(codePipeTimeout)
		}
		ms := int((left + time.Millisecond - 1) / time.Millisecond)
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		k, err := unix.Poll(pfd, ms)
		if err == unix.EINTR || (err == nil && k == 0) {
			continue // the deadline is checked at the top
		}
		if err != nil || pfd[0].Revents&unix.POLLNVAL != 0 {
			return fail(codeReadFailed)
		}
		m, err := unix.Read(fd, buf[n:])
		switch {
		case err == unix.EINTR || err == unix.EAGAIN:
			continue
		case err != nil:
			return fail(codeReadFailed)
		case m == 0:
			return buf[:n], nil
		}
		n += m
		if n > maxBundle {
			return fail(codeTooLarge)
		}
	}
}

// fill writes bundle into the memory file, seals it against any change where
// the kernel allows, and rewinds it for the child.
func fill(mem int, bundle []byte) error {
	for off := 0; off < len(bundle); {
		m, err := unix.Write(mem, bundle[off:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		off += m
	}
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(mem), unix.F_ADD_SEALS, seals); err != nil && err != unix.EINVAL && err != unix.EPERM {
		return err
	}
	_, err := unix.Seek(mem, 0, 0)
	return err
}
