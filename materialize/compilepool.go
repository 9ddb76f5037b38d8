package materialize

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/refusal"
)

// compilePool is the compile processes of one create: procs Pythons
// running compileScript, started at the first batch submitted (a create
// whose bytecode is all in the cache starts none), each fed batches from
// one queue as it finishes the ones it has, so both cores compile while
// wheels are still being installed and neither waits for the other at
// the end. A batch's answers are handed to its done callback in the
// goroutine that read them; a callback may submit more batches (the rare
// sources to compile again with their final path).
type compilePool struct {
	parent context.Context
	ctx    context.Context // cancelled to kill every process (stop)
	cancel context.CancelFunc
	python string // the staging env's bin/python
	pyName string // the env's python as messages name it
	dir    string // the working directory (the staging env)
	procs  int
	env    []string // the processes' whole environment (compileEnv)

	wg sync.WaitGroup

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*compileBatch
	started int  // processes started
	pending int  // batches submitted whose callback has not returned
	sources int  // sources submitted
	closed  bool // no more batches, but for those callbacks submit
	stopped bool // every process killed or being killed
	err     error
	weak    error         // a failed write to a compiler (its reader says why)
	cpu     time.Duration // user+sys of the processes that exited
}

// compileBatch is a run of sources compiled together in one mode.
type compileBatch struct {
	sources []pycSource
	bytes   int64  // of source
	req     []byte // the request: mode, length, pairs
	done    func(res []compiled) error
}

// compileTunables are glibc's malloc settings for the compile processes
// (GLIBC_TUNABLES; other C libraries ignore the variable, glibc ignores a
// tunable it does not know): huge pages for its heap (hugetlb=1, glibc
// 2.35 and later: madvise(MADV_HUGEPAGE) on what it maps), and a heap that
// is neither trimmed nor grown by a few pages at a time (a 256 MiB trim
// threshold, a 16 MiB top pad). With glibc's defaults, each compile grows
// the heap and the next trims it back, so its pages are faulted in again
// and again: ~20,800 page faults in the two processes of a cold create of
// the bench's medium corpus, ~5,500 with these, and each costs ~11 µs on
// this machine's VM (docs/seal.md, "Tricks"). They change no byte the
// processes write. Request.PlainMalloc leaves them out.
const compileTunables = "glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=268435456:glibc.malloc.top_pad=16777216"

// compileEnv is the compile processes' environment: PYTHONHASHSEED=0 for
// reproducible bytecode, a fixed locale, and compileTunables when tuned.
func compileEnv(tuned bool) []string {
	env := []string{"PYTHONHASHSEED=0", "LC_ALL=C.UTF-8"}
	if tuned {
		env = append(env, "GLIBC_TUNABLES="+compileTunables)
	}
	return env
}

// flightDepth is how many batches a compile process is sent before it
// answers the first: with two, it never waits for Go between batches.
const flightDepth = 2

// answerPipeSize is the capacity asked for the pipe of a compile
// process's answers (1 MiB is what an unprivileged process may ask on
// Linux by default; less is fine).
const answerPipeSize = 1 << 20

// Batch bounds (by source bytes and files): small enough that the
// processes finish together (the last batch is the only one a core may
// wait for), big enough that a batch's round trip is noise.
const (
	compileBatchBytes = 48 << 10
	compileBatchFiles = 48
)

func newCompilePool(ctx context.Context, python, pyName, dir string, procs int) *compilePool {
	p := &compilePool{parent: ctx, python: python, pyName: pyName, dir: dir, procs: max(procs, 1), env: compileEnv(true)}
	p.ctx, p.cancel = context.WithCancel(ctx)
	p.cond = sync.NewCond(&p.mu)
	return p
}

// submit queues sources (files of the staging env, recording final paths)
// for compiling in mode ('c' or 'd'), cut into batches in order; done gets
// each batch's sources and answers.
func (p *compilePool) submit(mode byte, staging, final string, sources []pycSource, done func(src []pycSource, res []compiled) error) {
	for len(sources) > 0 {
		n, size := 0, int64(0)
		for n < len(sources) && n < compileBatchFiles && (n == 0 || size < compileBatchBytes) {
			size += sources[n].size
			n++
		}
		b := &compileBatch{sources: sources[:n:n], bytes: size}
		b.req = append(b.req, mode, 0, 0, 0, 0)
		for _, s := range b.sources {
			b.req = append(b.req, filepath.Join(staging, filepath.FromSlash(s.rel))...)
			b.req = append(b.req, 0)
			b.req = append(b.req, final+"/"+s.rel...)
			b.req = append(b.req, 0)
		}
		binary.LittleEndian.PutUint32(b.req[1:5], uint32(len(b.req)-5))
		b.done = func(res []compiled) error { return done(b.sources, res) }
		sources = sources[n:]
		p.mu.Lock()
		p.queue = append(p.queue, b)
		p.pending++
		p.sources += n
		// One more process while batches wait (none yet, or the ones
		// started have not taken them all): a small env starts one.
		more := p.started < p.procs && (p.started == 0 || len(p.queue) > 1)
		if more {
			p.started++
			p.wg.Add(1)
		}
		p.mu.Unlock()
		p.cond.Signal()
		if more {
			go func() {
				defer p.wg.Done()
				p.run()
			}()
		}
	}
}

// start starts the processes now, before any batch is submitted (a
// create that will compile: their start-up overlaps its first files).
func (p *compilePool) start() {
	p.mu.Lock()
	n := p.procs - p.started
	p.started = p.procs
	p.wg.Add(n)
	p.mu.Unlock()
	for range n {
		go func() {
			defer p.wg.Done()
			p.run()
		}()
	}
}

// next waits for the next batch to send; nil when there is none to wait
// for (closed and nothing pending, or stopped).
func (p *compilePool) next() *compileBatch {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.queue) == 0 && !p.stopped && !(p.closed && p.pending == 0) {
		p.cond.Wait()
	}
	if p.stopped || len(p.queue) == 0 {
		return nil
	}
	b := p.queue[0]
	p.queue[0] = nil
	p.queue = p.queue[1:]
	return b
}

// finished marks one batch handled (its callback returned err): an error
// stops the pool.
func (p *compilePool) finished(err error) {
	p.mu.Lock()
	p.pending--
	p.mu.Unlock()
	if err != nil {
		p.setErr(err, false)
		p.stop()
	}
	p.cond.Broadcast()
}

// setErr records why the pool failed (the first error wins); a weak error
// (a write to a process that died) loses to any other, since the reader
// of that process knows its stderr.
func (p *compilePool) setErr(err error, weak bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case weak && p.weak == nil:
		p.weak = err
	case !weak && p.err == nil:
		p.err = err
	}
}

// stop kills every process; it reports whether this call was the first.
func (p *compilePool) stop() bool {
	p.mu.Lock()
	first := !p.stopped
	p.stopped = true
	p.mu.Unlock()
	p.cancel()
	p.cond.Broadcast()
	return first
}

// wait closes the queue, waits for every batch submitted (and those their
// callbacks submit) to be answered and handled and the processes to exit,
// and returns the processes' CPU time (user+sys) and the first error.
func (p *compilePool) wait() (time.Duration, error) {
	p.mu.Lock()
	p.closed = true
	// Longest first from here on: every batch still queued is ready, and
	// the last ones sent decide how long one process waits for the other.
	slices.SortStableFunc(p.queue, func(a, b *compileBatch) int { return cmp.Compare(b.bytes, a.bytes) })
	p.mu.Unlock()
	p.cond.Broadcast()
	p.wg.Wait()
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.err
	if err == nil {
		err = p.weak
	}
	if err == nil && p.pending != 0 {
		err = refusal.New(refusal.MaterializeFailed, "compiling bytecode with %s: %d batches were never answered", p.pyName, p.pending).WithRemedy(refusal.ActionNoBytecode, "")
	}
	return p.cpu, err
}

// abort kills every process and waits for them and their callbacks:
// nothing is written into the env after it returns.
func (p *compilePool) abort() {
	p.stop()
	p.wg.Wait()
}

// run is one compile process: a writer goroutine sends it batches (at
// most flightDepth unanswered), this one reads the answers and hands them
// to their callbacks, in order.
func (p *compilePool) run() {
	cmd := exec.CommandContext(p.ctx, p.python, "-S", "-s", "-c", compileScript, pycPlaceholder)
	cmd.Env = p.env
	cmd.Dir = p.dir
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	var stdout io.ReadCloser
	if err == nil {
		stdout, err = cmd.StdoutPipe()
	}
	if f, ok := stdout.(*os.File); ok && err == nil {
		// Room for a few batches' answers: the process goes on to the
		// next batch while this side still writes the pycs of the last.
		if rc, err := f.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, answerPipeSize) })
		}
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		if p.parent.Err() != nil {
			err = p.parent.Err()
		} else {
			err = refusal.Wrap(refusal.MaterializeFailed, err, "cannot start %s to compile bytecode", p.pyName).WithRemedy(refusal.ActionNoBytecode, "")
		}
		p.setErr(err, false)
		p.stop()
		return
	}
	flight := make(chan *compileBatch, flightDepth)
	slots := make(chan struct{}, flightDepth)
	go func() {
		defer close(flight)
		defer stdin.Close()
		for {
			slots <- struct{}{}
			b := p.next()
			if b == nil {
				return
			}
			if _, err := stdin.Write(b.req); err != nil {
				p.finished(nil)
				p.setErr(refusal.Wrap(refusal.MaterializeFailed, err, "compiling bytecode with %s: cannot send it sources", p.pyName).WithRemedy(refusal.ActionNoBytecode, ""), true)
				return
			}
			flight <- b
		}
	}()
	r := bufio.NewReaderSize(stdout, 256<<10)
	var buf []byte // the answers of one batch, reused once its callback returns
	var readErr error
	first := false // this process's failure stopped the pool
	for b := range flight {
		var res []compiled
		if readErr == nil {
			if res, readErr = readAnswers(r, len(b.sources), &buf); readErr != nil {
				first = p.stop()
			}
		}
		<-slots
		if readErr != nil {
			p.finished(nil)
			continue
		}
		p.finished(b.done(res))
	}
	if readErr == nil {
		if _, err := r.ReadByte(); err != io.EOF {
			readErr = errors.New("the compiler answered more than it was asked")
			first = p.stop()
		}
	}
	werr := cmd.Wait()
	if ps := cmd.ProcessState; ps != nil {
		p.mu.Lock()
		p.cpu += ps.UserTime() + ps.SystemTime()
		p.mu.Unlock()
	}
	if readErr == nil && werr != nil {
		first = p.stop()
	}
	switch {
	case p.parent.Err() != nil:
		p.setErr(p.parent.Err(), false)
	case first && killedFromOutside(werr, readErr):
		// Not the compiling that failed: creating the env again without
		// bytecode, the advice below, is not what mends it.
		p.setErr(refusal.Wrap(refusal.MaterializeFailed, werr, "the compiler %s was killed while it compiled (by the kernel's out-of-memory killer, or a user): nothing of the env was kept; run the command again", p.pyName), false)
	case first:
		why := readErr
		if why == nil {
			why = werr
		}
		p.setErr(refusal.Wrap(refusal.MaterializeFailed, why, "compiling bytecode with %s failed (%s)", p.pyName, firstLine(lastLines(stderr.String()))).WithRemedy(refusal.ActionNoBytecode, ""), false)
	}
}

// killedFromOutside reports whether a compile process's exit (werr) was
// SIGKILL or SIGTERM from outside this pool: its answers were cut off
// (readErr errShortAnswer) or complete (nil), not refused by the pool,
// which then kills the process itself.
func killedFromOutside(werr, readErr error) bool {
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || readErr != nil && !errors.Is(readErr, errShortAnswer) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGKILL || ws.Signal() == syscall.SIGTERM)
}

// answerChunk is how much more of a pyc than it has received readAnswers
// makes room for at once.
const answerChunk = 1 << 20

// errShortAnswer is an answer cut off: the compiler exited (or was
// killed) in the middle of it.
var errShortAnswer = errors.New("the compiler's answer is short")

// readAnswers reads n answers of the compile script into *buf (grown as
// needed; the pycs returned share it, so they are good until the next
// call with buf).
func readAnswers(r *bufio.Reader, n int, buf *[]byte) ([]compiled, error) {
	res := make([]compiled, n)
	b := (*buf)[:0]
	var head [5]byte
	for i := range res {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return nil, errShortAnswer
		}
		kind, size := head[0], binary.LittleEndian.Uint32(head[1:])
		if !bytes.ContainsRune([]byte("PDNX"), rune(kind)) || (kind == 'N' || kind == 'X') != (size == 0) || size > maxPycEntry {
			return nil, errors.New("the compiler's answer is malformed")
		}
		// The pyc is read as it arrives, the buffer grown (doubled) when
		// it is full: a header that claims maxPycEntry bytes and sends
		// none costs what was sent, not 256 MiB up front.
		start := len(b)
		for got := 0; got < int(size); {
			if len(b) == cap(b) {
				// A bigger buffer, the pyc read so far copied over; the
				// pycs before it keep the old one.
				nb := make([]byte, got, max(2*cap(b), min(int(size), 2*got+answerChunk), 256<<10))
				copy(nb, b[start:])
				b, start = nb, 0
				*buf = b
			}
			n := min(cap(b)-len(b), int(size)-got)
			if _, err := io.ReadFull(r, b[len(b):len(b)+n]); err != nil {
				return nil, errShortAnswer
			}
			b = b[:len(b)+n]
			got += n
		}
		res[i] = compiled{kind: kind, pyc: b[start:len(b):len(b)]}
	}
	return res, nil
}
