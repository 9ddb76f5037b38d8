// Command child is what cruxshim execs in the shim's tests: it reports, as one
// JSON object on stdout, what a provider harness would see: the bytes on fd 3,
// the seals on it, its argv and environment, every descriptor it inherited
// (those without close-on-exec), and whether each path given as an argument
// still exists.
package main

import (
	"encoding/json"
	"os"
	"sort"
	"strconv"
	"syscall"
)

const fGetSeals = 1034 // F_GET_SEALS

type report struct {
	Argv          []string        `json:"argv"`
	Env           []string        `json:"env"`
	FD3Open       bool            `json:"fd3_open"`
	FD3           string          `json:"fd3"`
	FD3Seals      int             `json:"fd3_seals"`
	FD3WriteError string          `json:"fd3_write_error"`
	FDs           map[int]string  `json:"fds"`
	Exists        map[string]bool `json:"exists"`
}

func main() {
	r := report{Argv: os.Args, Env: os.Environ(), FDs: map[int]string{}, Exists: map[string]bool{}}
	// An fd 3 with close-on-exec is this process's own (the Go runtime keeps
	// its cgroup files open), not one it inherited.
	if fl, _, e := syscall.Syscall(syscall.SYS_FCNTL, 3, syscall.F_GETFD, 0); e == 0 && fl&syscall.FD_CLOEXEC == 0 {
		r.FD3Open = true
		var data []byte
		buf := make([]byte, 4096)
		for {
			n, err := syscall.Read(3, buf)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || n <= 0 {
				break
			}
			data = append(data, buf[:n]...)
		}
		r.FD3 = string(data)
		s, _, _ := syscall.Syscall(syscall.SYS_FCNTL, 3, fGetSeals, 0)
		r.FD3Seals = int(s)
		if _, err := syscall.Pwrite(3, []byte("x"), 0); err != nil {
			r.FD3WriteError = err.Error()
		}
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		fl, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		if e != 0 || fl&syscall.FD_CLOEXEC != 0 {
			continue // gone, or opened by this process (the runtime, ReadDir)
		}
		link, _ := os.Readlink("/proc/self/fd/" + n)
		r.FDs[fd] = link
	}
	for _, p := range os.Args[1:] {
		_, err := os.Lstat(p)
		r.Exists[p] = err == nil
	}
	out, _ := json.Marshal(r)
	os.Stdout.Write(append(out, '\n'))
}
