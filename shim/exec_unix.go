//go:build unix

package shim

import (
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Exec is the whole of cruxshim: it parses argv (argv[0] is the shim's own
// name), delivers the secret on SecretFD when a secret flag asks for it, and
// execs CMD with env (the shim's environment, passed through unchanged). As
// the first process of a pid namespace (a container's pid 1) it starts CMD as
// its child instead and stays as its init (runInit), exiting as CMD did. It
// returns only when it refuses, and then always a *RefusedError; the caller
// prints its one line and exits ExitRefused. With --protocol-fd-env it moves
// the protocol channel off fd 1 just before CMD starts (moveChannel). With no
// flag it touches no descriptor before CMD starts and writes nothing.
func Exec(argv, env []string) error {
	if len(argv) == 0 {
		return refuse(codeUsage)
	}
	o, ok := parseArgs(argv[1:])
	if !ok {
		return refuse(codeUsage)
	}
	if o.mode != modeNone {
		if err := deliver(o, argv, env); err != nil {
			return err
		}
	}
	path, ok := lookPath(o.argv[0], env)
	if !ok {
		return refuse(codeExecFailed)
	}
	if o.protoVar != "" {
		if env, ok = moveChannel(o.protoVar, env); !ok {
			return refuse(codeExecFailed)
		}
	}
	if asInit() {
		return runInit(path, o.argv, env)
	}
	_ = syscall.Exec(path, o.argv, env)
	return refuse(codeExecFailed)
}

// lookPath resolves CMD as execvp would, but from env rather than the
// process environment and strictly: a name with a slash is used as is; a bare
// name is searched in env's PATH, skipping empty and relative entries (the
// working directory is never searched); no PATH finds nothing. A candidate
// must be a regular file with an execute bit.
func lookPath(cmd string, env []string) (string, bool) {
	if strings.Contains(cmd, "/") {
		return cmd, true
	}
	pathList := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathList = v // the last one wins, as getenv would see it
		}
	}
	for _, dir := range strings.Split(pathList, ":") {
		if !strings.HasPrefix(dir, "/") {
			continue
		}
		p := strings.TrimSuffix(dir, "/") + "/" + cmd
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Mode&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// moveChannel hands CMD its protocol channel, fd 1 as the shim got it, on a
// descriptor of its own, and points fd 1 at stderr, so that whatever CMD's
// start writes on fd 1 (a Python env's start-up code, before the harness's
// first line) goes to stderr, never to the channel: fd 1 is duplicated to
// the lowest free descriptor from ProtocolFD up, without close-on-exec (it
// never replaces one the Go runtime holds, and fd 3 stays the secret's or
// unopened), fd 2 is duplicated onto fd 1, and the returned environment is
// env with name=that descriptor (any other name= entry dropped). The
// harness (from runtime 0.2.0) takes the channel from the variable, removes
// it and marks the descriptor close-on-exec. It is the last thing the shim
// does before CMD starts: a refusal before it still finds the streams as
// the shim got them.
func moveChannel(name string, env []string) ([]string, bool) {
	fd, err := unix.FcntlInt(1, unix.F_DUPFD, ProtocolFD)
	if err != nil {
		return env, false
	}
	if err := unix.Dup2(2, 1); err != nil {
		unix.Close(fd)
		return env, false
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+strconv.Itoa(fd)), true
}
