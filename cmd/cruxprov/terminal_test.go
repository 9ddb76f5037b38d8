package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vbauerster/mpb/v8"
	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/fetch"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
)

// TestOneLineShowsNoControls: an error line carries what others wrote (a
// provider's error message above all); nothing in it may act on the
// terminal: no newline, escape sequence, C1 control, bidirectional
// override or byte that is not UTF-8 reaches stderr as itself.
func TestOneLineShowsNoControls(t *testing.T) {
	for in, want := range map[string]string{
		"plain words, é and ☃":              "plain words, é and ☃",
		"two\nlines\t and  spaces":          "two lines and spaces",
		"clear\x1b[2J\x1b[1;1Hok: all good": `clear\x1b[2J\x1b[1;1Hok: all good`,
		"bell\x07 del\x7f nul\x00":          `bell\x07 del\x7f nul\x00`,
		"csi\u009b31m c1":                   `csi\u009b31m c1`,
		"abc\u202eexe.txt":                  `abc\u202eexe.txt`,
		"bad \xff\xfe bytes":                `bad \xff\xfe bytes`,
		"cut rune \xe2\x98":                 `cut rune \xe2\x98`,
		"":                                  "",
	} {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRunFailureLine: the line a failed run leaves on stderr holds at most
// what a receipt keeps of the provider's message, and (through oneLine,
// as the CLI prints every error) nothing a terminal acts on.
func TestRunFailureLine(t *testing.T) {
	var out, errb bytes.Buffer
	o := &opts{stdout: &out, stderr: &errb}
	msg := "\x1b[2K\rok: acme-echo echo\n" + strings.Repeat("<", 100_000)
	res := &invoke.Result{AttemptID: "att_1", Status: invoke.StatusError, Error: &invoke.Error{Code: "provider_error", Message: msg}, Egress: []string{}}
	err := emitRun(o, res, "acme-echo", "echo", "/l.jsonl", func(a string) string { return "cruxprov receipts show " + a }, nil)
	if err == nil {
		t.Fatal("a failed run returned no error")
	}
	line := oneLine(err.Error())
	if strings.ContainsAny(line, "\x1b\r\n") || len(line) > invoke.ReceiptMessage+300 {
		t.Errorf("the failure line (%d bytes): %.200q", len(line), line)
	}
	if !strings.Contains(line, "ended error: provider_error: \\x1b[2K ok: acme-echo echo <<<") || !strings.Contains(line, "bytes more)") {
		t.Errorf("the failure line: %.300q", line)
	}
}

// TestReplayLineNamesTheRun: a replayed run's line on stderr named only
// the replay's own attempt, whose receipt is a copy of the outcome: it
// names the attempt that ran and the command showing its receipt (with
// the run's --ledger when it was given one), and --json carries it as
// replay_of, as the receipt does.
func TestReplayLineNamesTheRun(t *testing.T) {
	var out, errb bytes.Buffer
	o := &opts{stdout: &out, stderr: &errb}
	res := &invoke.Result{AttemptID: "att_2", Status: invoke.StatusOK, Replayed: true, ReplayOf: "att_1", ResultDigest: "sha256:" + strings.Repeat("0", 64), Egress: []string{}}
	show := func(a string) string { return "cruxprov receipts show " + a + " --ledger /l.jsonl" }
	if err := emitRun(o, res, "acme-echo", "echo", "/l.jsonl", show, nil); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || !strings.HasPrefix(errb.String(), "replayed: attempt att_2 returned the recorded ok outcome of attempt att_1, ") ||
		!strings.HasSuffix(errb.String(), "; what ran: cruxprov receipts show att_1 --ledger /l.jsonl\n") {
		t.Errorf("stdout %q, stderr %q", out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	o.json = true
	if err := emitRun(o, res, "acme-echo", "echo", "/l.jsonl", show, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"replay_of": "att_1"`) || !strings.Contains(out.String(), `"replayed": true`) {
		t.Errorf("--json: %s", out.String())
	}
}

// TestEnvListShowsJunkNames: a directory in envs/ is named by whoever
// could write there; env list shows it UNSEALED, escaped.
func TestEnvListShowsJunkNames(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "envs", "junk\x1b[31mred"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := cruxprov(t, "--home", home, "env", "list")
	if r.code != 0 || strings.ContainsRune(r.stdout, 0x1b) || !strings.Contains(r.stdout, `junk\x1b[31mred  UNSEALED: `) {
		t.Errorf("env list: %+v", r)
	}
}

// TestProgressTotalCountsWheels: the total bar says "1 wheel" of one
// download (a fetch of acme-echo's lock on a terminal, as cruxprov-rootless
// following docs/operator.md §4, drew "total (1 wheels)").
func TestProgressTotalCountsWheels(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{1, "total (1 wheel)"}, {2, "total (2 wheels)"}} {
		t.Run(c.want, func(t *testing.T) {
			var buf bytes.Buffer
			pr := &progress{p: mpb.New(mpb.WithOutput(&buf), mpb.WithWidth(32), mpb.WithAutoRefresh()), bars: map[string]*mpb.Bar{}, current: map[string]int64{}, o: &opts{}}
			pr.event(fetch.Event{Kind: fetch.EventPlan, Total: 100, Count: c.n})
			pr.wait(true)
			if out := buf.String(); !strings.Contains(out, c.want+" ") {
				t.Errorf("%d wheels: the bar reads %q, want %q", c.n, out, c.want)
			}
		})
	}
}

// TestProgressOnAnUnsizedTerminal: a terminal that reports no size (a
// new pseudo-terminal is 0×0 until someone sizes it, as under `script`
// without a terminal of its own, or a serial console) gets the bars; mpb
// took 0 columns and 0 rows as the room it had and drew nothing. A
// sized terminal draws them as before.
func TestProgressOnAnUnsizedTerminal(t *testing.T) {
	for _, size := range []struct{ cols, rows uint16 }{{0, 0}, {100, 30}} {
		t.Run(fmt.Sprintf("%dx%d", size.cols, size.rows), func(t *testing.T) {
			ptmx, pts := ptyPair(t)
			if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: size.cols, Row: size.rows}); err != nil {
				t.Skipf("TIOCSWINSZ: %v", err)
			}
			read := make(chan string, 1)
			go func() {
				var all []byte
				buf := make([]byte, 4096)
				for {
					n, err := ptmx.Read(buf)
					all = append(all, buf[:n]...)
					if err != nil || bytes.Contains(all, []byte("total (1 wheel)")) {
						read <- string(all)
						return
					}
				}
			}()
			pr := &progress{p: barsOn(context.Background(), pts), bars: map[string]*mpb.Bar{}, current: map[string]int64{}, o: &opts{}}
			pr.event(fetch.Event{Kind: fetch.EventPlan, Total: 100, Count: 1})
			pr.wait(true)
			select {
			case out := <-read:
				if !strings.Contains(out, "total (1 wheel)") {
					t.Errorf("the terminal shows %q", out)
				}
			case <-time.After(10 * time.Second):
				t.Error("no bar on the terminal")
			}
		})
	}
}

// TestWarningAboveTheBars: a warning said while the progress bars are
// drawn (a damaged unpacked-cache entry, found while a create installs)
// is written above them, through the bars, not onto stderr under them,
// where the next redraw wiped it.
func TestWarningAboveTheBars(t *testing.T) {
	ptmx, pts := ptyPair(t)
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: 100, Row: 30}); err != nil {
		t.Skipf("TIOCSWINSZ: %v", err)
	}
	const msg = "the unpacked-wheel cache entry E is damaged: 1 bytes, the wheel's members are 2"
	read := readPtyUntil(ptmx, msg)
	var stderr bytes.Buffer
	o := &opts{stderr: &stderr}
	pr := &progress{p: barsOn(context.Background(), pts), bars: map[string]*mpb.Bar{}, current: map[string]int64{}, o: o}
	o.bars.Store(pr)
	pr.event(fetch.Event{Kind: fetch.EventPlan, Total: 100, Count: 1})
	o.warn(msg)
	pr.wait(true)
	if stderr.Len() != 0 {
		t.Errorf("written under the bars: %q", stderr.String())
	}
	select {
	case out := <-read:
		if !strings.Contains(out, "warning: "+msg) {
			t.Errorf("the terminal shows %q", out)
		}
	case <-time.After(10 * time.Second):
		t.Error("no warning on the terminal")
	}
	if o.warnings[0] != msg {
		t.Errorf("--json warnings: %q", o.warnings)
	}
}

// TestWarningWithoutBars: a warning said on a terminal while the progress
// container is up but draws no bar (a warm store: nothing to download)
// reaches the terminal. Walking store.md as cruxprov-rootless, env create
// over a writable unpacked-cache entry said its warning under --json and
// through a pipe, and nothing on a terminal (script -qec): it was written
// into the bars' container, which flushes what is written to it only
// when it draws a bar, and dropped it.
func TestWarningWithoutBars(t *testing.T) {
	for _, size := range []unix.Winsize{{Col: 100, Row: 30}, {}} { // {}: script -qec's, run without a terminal
		t.Run(fmt.Sprintf("%dx%d", size.Col, size.Row), func(t *testing.T) { warnWithoutBars(t, size) })
	}
}

func warnWithoutBars(t *testing.T, size unix.Winsize) {
	ptmx, pts := ptyPair(t)
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &size); err != nil {
		t.Skipf("TIOCSWINSZ: %v", err)
	}
	const msg = "the unpacked-wheel cache entry E had mode 0644, not the 0444 the cache writes"
	read := readPtyUntil(ptmx, msg)
	o := &opts{stderr: pts}
	pr := &progress{p: barsOn(context.Background(), pts), bars: map[string]*mpb.Bar{}, current: map[string]int64{}, o: o}
	o.bars.Store(pr)
	o.warn(msg)
	pr.wait(true)
	select {
	case out := <-read:
		if !strings.Contains(out, "warning: "+msg) {
			t.Errorf("the terminal shows %q", out)
		}
	case <-time.After(10 * time.Second):
		t.Error("no warning on the terminal")
	}
}

// TestRunLedgerMovedLine: a ledger moved or replaced while a run went on
// could not take its outcome, and the line said the ledger "shows the
// attempt as an orphan": the file at the ledger's path now has no trace
// of it, its intent being in the file moved away. It says where it is.
func TestRunLedgerMovedLine(t *testing.T) {
	var out, errb bytes.Buffer
	o := &opts{stdout: &out, stderr: &errb}
	res := &invoke.Result{AttemptID: "att_1", Status: invoke.StatusOK, Value: []byte(`{}`), Egress: []string{}}
	show := func(a string) string { return "cruxprov receipts show " + a }
	moved := &receipts.MovedError{Path: "/l.jsonl"}
	err := emitRun(o, res, "acme-echo", "echo", "/l.jsonl", show, refusal.Wrap(refusal.LedgerWriteFailed, moved, "%s", moved.Error()))
	if err == nil || strings.Contains(err.Error(), "which shows the attempt as an orphan") ||
		!strings.Contains(err.Error(), "the attempt's intent, an orphan, is in the file that was moved away from /l.jsonl, not in the one there now") {
		t.Errorf("moved: %v", err)
	}
	// Any other failure to write the outcome: the ledger there has the orphan.
	err = emitRun(o, res, "acme-echo", "echo", "/l.jsonl", show, refusal.New(refusal.LedgerWriteFailed, "receipts ledger /l.jsonl failed to sync; open it again"))
	if err == nil || !strings.Contains(err.Error(), "which shows the attempt as an orphan") {
		t.Errorf("not moved: %v", err)
	}
}

// readPtyUntil reads the terminal's master side until msg shows (or the
// read fails) and sends what it read.
func readPtyUntil(ptmx *os.File, msg string) <-chan string {
	read := make(chan string, 1)
	go func() {
		var all []byte
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil || bytes.Contains(all, []byte(msg)) {
				read <- string(all)
				return
			}
		}
	}()
	return read
}

// TestBarsClearedWhenInterrupted: a Ctrl-C in the middle of a download
// cancels the command's context, and the bars stopped drawing with it: the
// frame drawn when the signal came stayed on the terminal, a download's
// bar half full above the "interrupted" line (walking docs/operator.md §4
// on a terminal as cruxprov-rootless, a SIGINT three seconds into env
// create left "cryptography-38.0.4-… [=>---] 216.0 KiB / 923.6 KiB 23 %").
// The bars now outlive the context: wait draws their last frame, without
// the downloads that did not finish; the total stays where it got to.
func TestBarsClearedWhenInterrupted(t *testing.T) {
	for _, size := range []unix.Winsize{{Col: 100, Row: 30}, {}} { // {}: script -qec's, run without a terminal
		t.Run(fmt.Sprintf("%dx%d", size.Col, size.Row), func(t *testing.T) {
			ptmx, pts := ptyPair(t)
			if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &size); err != nil {
				t.Skipf("TIOCSWINSZ: %v", err)
			}
			const name = "half-0.1-py3-none-any.whl"
			drawn := readPtyUntil(ptmx, name)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			pr := &progress{p: barsOn(ctx, pts), bars: map[string]*mpb.Bar{}, current: map[string]int64{}, o: &opts{}}
			pr.event(fetch.Event{Kind: fetch.EventPlan, Total: 200, Count: 2})
			pr.event(fetch.Event{Kind: fetch.EventStart, Filename: name, Total: 100})
			pr.event(fetch.Event{Kind: fetch.EventProgress, Filename: name, Bytes: 50})
			var out string
			select {
			case out = <-drawn:
			case <-time.After(10 * time.Second):
				t.Fatal("no bar drawn")
			}
			cancel(errors.New("interrupt signal received"))
			pr.wait(false)
			pts.Close() // the master's reads end once what was written is read
			rest, _ := io.ReadAll(ptmx)
			screen := emulate(out + string(rest))
			if strings.Contains(screen, name) {
				t.Errorf("the unfinished download's bar stays on the terminal:\n%s", screen)
			}
			if !strings.Contains(screen, "total (2 wheels)") {
				t.Errorf("the total is gone:\n%s", screen)
			}
		})
	}
}

// emulate returns what a terminal shows after out: the lines left once
// the cursor moves (\r, \n, ESC[nA up) and erasures (ESC[J to the end
// of the screen, ESC[K to the end of the line) that mpb writes are
// applied. Other escape sequences are dropped.
func emulate(out string) string {
	lines := []string{""}
	row, col := 0, 0
	put := func(r rune) {
		l := []rune(lines[row])
		for len(l) < col {
			l = append(l, ' ')
		}
		if col < len(l) {
			l[col] = r
		} else {
			l = append(l, r)
		}
		lines[row] = string(l)
		col++
	}
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; r {
		case '\r':
			col = 0
		case '\n':
			row++
			if row == len(lines) {
				lines = append(lines, "")
			}
		case 0x1b:
			if i+1 >= len(rs) || rs[i+1] != '[' {
				continue
			}
			j := i + 2
			for j < len(rs) && (rs[j] >= '0' && rs[j] <= '9' || rs[j] == ';' || rs[j] == '?') {
				j++
			}
			if j == len(rs) {
				i = j
				continue
			}
			n := 1
			if _, err := fmt.Sscanf(string(rs[i+2:j]), "%d", &n); err != nil || n < 1 {
				n = 1
			}
			switch rs[j] {
			case 'A':
				row = max(0, row-n)
			case 'J':
				l := []rune(lines[row])
				lines = append(lines[:row], string(l[:min(col, len(l))]))
			case 'K':
				l := []rune(lines[row])
				lines[row] = string(l[:min(col, len(l))])
			}
			i = j
		default:
			put(r)
		}
	}
	return strings.Join(lines, "\n")
}

// TestInstallDrawsBars: install on a terminal draws its downloads' bars
// as fetch and env create do, and leaves the total's last frame, not a
// download's; through a pipe it draws none. It drew none anywhere: as
// cruxprov-rootless following docs/operator.md §6, an install over a slow
// mirror said nothing on a terminal until it ended (an interrupted one,
// nothing but "interrupted").
func TestInstallDrawsBars(t *testing.T) {
	const python = "/usr/bin/python3.11"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s", python)
	}
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	for _, tty := range []bool{true, false} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			home := filepath.Join(base, fmt.Sprintf("home-%v", tty))
			for _, id := range []string{"acme.echo", "acme.diagnostics"} {
				if r := cruxprov(t, "--home", home, "interface", "register", id, "--schema", filepath.Join(w.schemas, id+".json")); r.code != 0 {
					t.Fatalf("register %s: %+v", id, r)
				}
			}
			cmd := exec.Command(bin, "--home", home, "install", w.echo, "--platform", "host", "--python", python, "--index", w.url, "--no-compile")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			var read <-chan string
			if tty {
				ptmx, pts := ptyPair(t)
				if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: 120, Row: 30}); err != nil {
					t.Skipf("TIOCSWINSZ: %v", err)
				}
				cmd.Stderr = pts
				read = readPtyUntil(ptmx, "\x00") // to the end: EIO once the command and this side closed it
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				pts.Close()
			} else if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("install: %v\n%s%s", err, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), "proposed change-set sha256:") {
				t.Errorf("stdout: %q", stdout.String())
			}
			if !tty {
				if strings.ContainsRune(stderr.String(), 0x1b) || strings.Contains(stderr.String(), "total (") {
					t.Errorf("bars through a pipe: %q", stderr.String())
				}
				return
			}
			var out string
			select {
			case out = <-read:
			case <-time.After(30 * time.Second):
				t.Fatal("the terminal did not close")
			}
			screen := emulate(out)
			if !strings.Contains(screen, "total (1 wheel)") || strings.Contains(screen, "cruxible_provider_runtime") {
				t.Errorf("the terminal shows:\n%s\n(written: %q)", screen, out)
			}
		})
	}
}

// TestProgressPlatformAfterPlatform: install fetches one platform after
// another, each fetch with its own plan: the last platform's total is
// done and goes, and wait returns (a total left incomplete would keep
// mpb's Wait waiting for ever).
func TestProgressPlatformAfterPlatform(t *testing.T) {
	ptmx, pts := ptyPair(t)
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: 100, Row: 30}); err != nil {
		t.Skipf("TIOCSWINSZ: %v", err)
	}
	read := readPtyUntil(ptmx, "\x00") // to the end
	pr := &progress{p: barsOn(context.Background(), pts), bars: map[string]*mpb.Bar{}, current: map[string]int64{}, o: &opts{}}
	pr.event(fetch.Event{Kind: fetch.EventPlan, Total: 100, Count: 3})
	pr.event(fetch.Event{Kind: fetch.EventStart, Filename: "a.whl", Total: 40})
	pr.event(fetch.Event{Kind: fetch.EventDone, Filename: "a.whl", Bytes: 40})
	pr.event(fetch.Event{Kind: fetch.EventPlan, Total: 60, Count: 2})
	pr.event(fetch.Event{Kind: fetch.EventStart, Filename: "b.whl", Total: 60})
	pr.event(fetch.Event{Kind: fetch.EventProgress, Filename: "b.whl", Bytes: 30})
	done := make(chan struct{})
	go func() { pr.wait(true); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("wait did not return")
	}
	if n := pr.total.Current(); n != 30 {
		t.Errorf("the second platform's total counts %d bytes, want 30 (its own)", n)
	}
	pts.Close()
	if screen := emulate(<-read); strings.Contains(screen, "total (3 wheels)") || !strings.Contains(screen, "total (2 wheels)") {
		t.Errorf("the bars end as:\n%s", screen)
	}
}
