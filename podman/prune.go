package podman

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// LabelExecutor labels every container a run starts with the executor
// process that started it (its pid namespace, pid and start time, as
// ownerID writes them): Prune tells by it whose container is left over.
const LabelExecutor = "dev.cruxible.cruxprov.executor"

// ownerID is this process as LabelExecutor names it: "<pid namespace
// inode>:<pid>:<start time in clock ticks since boot>" ("" when /proc
// cannot say: such containers are never pruned).
var ownerID = sync.OnceValue(func() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	pid := os.Getpid()
	start, ok := startTime(pid)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s:%d:%s", strings.Trim(strings.TrimPrefix(ns, "pid:"), "[]"), pid, start)
})

// startTime is field 22 of /proc/PID/stat: when the process started.
func startTime(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	return statStartTime(b)
}

// statStartTime is field 22 of a /proc/PID/stat line.
func statStartTime(b []byte) (string, bool) {
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold anything
	if i < 0 {
		return "", false
	}
	f := strings.Fields(s[i+1:]) // from field 3, the state
	if len(f) < 20 || f[19] == "" || strings.Trim(f[19], "0123456789") != "" {
		return "", false
	}
	return f[19], true
}

// ownerGone reports whether the executor id names a process of this pid
// namespace that is no longer running (a pid reused since has another
// start time). An id from another namespace, or one this process cannot
// read, is never gone: its executor may still inspect its container.
func ownerGone(id string) bool {
	self := ownerID()
	ns, rest, ok := strings.Cut(id, ":")
	selfNS, _, _ := strings.Cut(self, ":")
	if !ok || self == "" || ns != selfNS {
		return false
	}
	pidS, start, ok := strings.Cut(rest, ":")
	pid, err := strconv.Atoi(pidS) // all of it: Sscanf's %d took "12x" for pid 12
	if !ok || err != nil || pid <= 0 || start == "" || strings.Trim(pidS, "0123456789") != "" {
		return false
	}
	now, alive := startTime(pid)
	if !alive {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return os.IsNotExist(err)
	}
	return now != start
}

// Prune removes the containers that runs of executors no longer running
// left behind: an executor killed mid-run cannot remove its container,
// which runs on until its budget (run --timeout) and then stays, stopped,
// for `podman ps --all` to show. The containers whose executor
// (LabelExecutor) was a process of this pid namespace that has exited are
// removed, running or not (nobody reads what a running one writes, and
// its intent is an orphan already: an executor restarted at once would
// otherwise find it still running, leave it, and never prune again); it
// returns their names. It also unmounts the
// private secret tmpfs mounts (path mode) such executors left, which can
// hold a bundle the shim never read (pruneSecretMounts), and removes the
// private layouts of their pulls and the private directories of their
// runs (pruneStaging). Run calls it once per
// process, in the background, at the first run; an executor may call it
// when it starts.
func (e *Executor) Prune(ctx context.Context) ([]string, error) {
	pruneSecretMounts(e.SecretDir)
	pruneStaging(os.TempDir(), stagingDirs()...)
	out, err := e.podmanOut(ctx, "ps", "--all", "--no-trunc", "--filter", "label="+LabelExecutor,
		"--format", "{{.Names}}\t{{index .Labels \""+LabelExecutor+"\"}}")
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, c := range parsePS(out) {
		if !ownerGone(c.owner) {
			continue
		}
		name := c.name
		if _, err := e.podmanOut(ctx, "rm", "--force", "--time", "0", "--ignore", name); err != nil {
			return gone, err
		}
		gone = append(gone, name)
	}
	return gone, nil
}

// psEntry is one container podman ps listed: its name and its
// LabelExecutor.
type psEntry struct{ name, owner string }

// parsePS reads Prune's podman ps lines ("NAME\tEXECUTOR"): only a
// container of a run (its name cruxprov-…, one argument to podman rm:
// no space, tab or control character) is listed; any other line (a
// warning on stdout, another podman's format) is left out, so nothing is
// removed that this package did not start.
func parsePS(out []byte) []psEntry {
	var cs []psEntry
	for _, ln := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, owner, ok := strings.Cut(strings.TrimSuffix(ln, "\r"), "\t")
		if !ok || !strings.HasPrefix(name, "cruxprov-") || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			continue
		}
		cs = append(cs, psEntry{name, owner})
	}
	return cs
}

// runDirPrefix names a run's private directory in the temp directory,
// the podman client's working directory (Start).
const runDirPrefix = "cruxprov-run-"

// pruneStaging removes what executors killed while podman pulled
// from a layout or ran a container left behind: the private layouts of
// their pulls (pullPrefix, pull) and the private directories of
// their runs (runDirPrefix, Start), those older than a pull may last
// (pullTimeout, and a minute), which no pull still reads, and a run's
// only where no run holds it locked (a run lasts as long as its budget;
// the subprocess executor's working directories share the name). The
// runs' are in runDir (the temp directory), the pulls' in any of
// pullDirs (stagingDirs: not the temp directory where podman cannot
// take its path as an image name). Best effort; it returns what it
// removed.
func pruneStaging(runDir string, pullDirs ...string) []string {
	var pulls []string
	for _, d := range pullDirs {
		ps, _ := filepath.Glob(filepath.Join(d, pullPrefix+"*"))
		pulls = append(pulls, ps...)
	}
	runs, _ := filepath.Glob(filepath.Join(runDir, runDirPrefix+"*"))
	var gone []string
	for i, p := range append(pulls, runs...) {
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < pullTimeout+time.Minute {
			continue
		}
		if i >= len(pulls) {
			// A run's directory, this executor's or the subprocess
			// executor's working directory (the same name): a live run
			// holds it locked.
			d, err := os.Open(p)
			if err != nil {
				continue
			}
			if syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
				d.Close()
				continue
			}
			err = os.RemoveAll(p)
			d.Close()
			if err == nil {
				gone = append(gone, p)
			}
			continue
		}
		if os.RemoveAll(p) == nil {
			gone = append(gone, p)
		}
	}
	return gone
}
