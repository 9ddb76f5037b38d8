// Command child is what cruxshim execs in the shim's tests: it reports, as one
// JSON object on stdout, what a provider harness would see: the bytes on fd 3,
// the seals on it, its argv and environment, every descriptor it inherited
// (those without close-on-exec), and whether each path given as an argument
// still exists.
//
// CHILD_MODE (the shim passes the environment through) makes it the command
// of the init tests instead, run under a cruxshim that is pid 1:
//
//	init      the report, plus its pid and parent's, its ignored signals
//	          (SigIgn of /proc/self/status), the descriptors of pid 1 (the
//	          init: once it holds none of the run's, or after 5 s) and
//	          whether an orphan it made was reaped; then it exits
//	          CHILD_EXIT (default 0)
//	selfkill  sends itself signal number CHILD_SIGNAL, then exits 0 if it
//	          is still alive 2 s later
//	signals   prints "ready", then the number of each SIGINT, SIGHUP, SIGQUIT,
//	          SIGUSR1 and SIGUSR2 it receives, one a line; SIGTERM is not
//	          caught; exits 3 after 30 s
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	// CHILD_MODE=init only:
	Pid     int            `json:"pid,omitempty"`
	PPid    int            `json:"ppid,omitempty"`
	InitFDs map[int]string `json:"init_fds,omitempty"`
	Orphan  string         `json:"orphan,omitempty"`
	SigIgn  string         `json:"sig_ign,omitempty"`
}

func main() {
	switch os.Getenv("CHILD_MODE") {
	case "selfkill":
		n, _ := strconv.Atoi(os.Getenv("CHILD_SIGNAL"))
		syscall.Kill(os.Getpid(), syscall.Signal(n))
		time.Sleep(2 * time.Second)
		os.Exit(0)
	case "signals":
		signals()
	case "orphan-parent":
		// Starts a grandchild that outlives this process by 100 ms,
		// prints its pid and exits without waiting: an orphan.
		c := exec.Command(os.Args[0])
		c.Env = []string{"CHILD_MODE=orphan"}
		if err := c.Start(); err != nil {
			os.Exit(1)
		}
		fmt.Println(c.Process.Pid)
		os.Exit(0)
	case "orphan":
		time.Sleep(100 * time.Millisecond)
		os.Exit(0)
	}
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
	code := 0
	if os.Getenv("CHILD_MODE") == "init" {
		r.Pid, r.PPid = os.Getpid(), os.Getppid()
		// The init drops the run's descriptors just after starting this
		// process, which may already be running: look again until they
		// are gone, for at most 5 s, and report the last look.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			r.InitFDs = initFDs()
			if initDropped(r.InitFDs) || time.Now().After(deadline) {
				break
			}
		}
		if st, err := os.ReadFile("/proc/self/status"); err == nil {
			for _, l := range strings.Split(string(st), "\n") {
				if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
					r.SigIgn = strings.TrimSpace(v)
				}
			}
		}
		r.Orphan = orphan()
		code, _ = strconv.Atoi(os.Getenv("CHILD_EXIT"))
	}
	out, _ := json.Marshal(r)
	os.Stdout.Write(append(out, '\n'))
	os.Exit(code)
}

// initFDs maps each descriptor of pid 1 to its link; -1 to the error when
// they cannot be listed.
func initFDs() map[int]string {
	fds := map[int]string{}
	ents, err := os.ReadDir("/proc/1/fd")
	if err != nil {
		fds[-1] = err.Error()
	}
	for _, e := range ents {
		fd, _ := strconv.Atoi(e.Name())
		fds[fd], _ = os.Readlink("/proc/1/fd/" + e.Name())
	}
	return fds
}

// initDropped says whether the init holds none of the run's descriptors:
// stdin and stdout are /dev/null, and it holds no memory file and no pipe but
// stderr.
func initDropped(fds map[int]string) bool {
	if _, ok := fds[-1]; ok || fds[0] != "/dev/null" || fds[1] != "/dev/null" {
		return false
	}
	for fd, link := range fds {
		if strings.Contains(link, "memfd:") || strings.HasPrefix(link, "pipe:") && fd != 2 {
			return false
		}
	}
	return true
}

// orphan makes an orphan (a grandchild whose parent exited) and says whether
// something reaped it within 5 s of its exit ("reaped"), or it stayed a
// zombie ("zombie").
func orphan() string {
	c := exec.Command(os.Args[0])
	c.Env = []string{"CHILD_MODE=orphan-parent"}
	out, err := c.Output()
	if err != nil {
		return "cannot make an orphan: " + err.Error()
	}
	pid := strings.TrimSpace(string(out))
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + pid); err != nil {
			return "reaped"
		}
	}
	return "zombie"
}

func signals() {
	c := make(chan os.Signal, 8)
	signal.Notify(c, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, "ready")
	w.Flush()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case s := <-c:
			fmt.Fprintln(w, int(s.(syscall.Signal)))
			w.Flush()
		case <-timeout:
			os.Exit(3)
		}
	}
}
