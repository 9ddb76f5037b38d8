package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/fetch"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/internal/bytesize"
	"github.com/cruxible/cruxprov/pipeline"
)

func init() {
	register(&cli.Command{
		Name:      "fetch",
		Usage:     "fetch a resolution's wheels from the pinned index into the store, hash-checked",
		UsageText: "cruxprov fetch (--wheel W | --lock F) --platform P --index URL [--offline] [--jobs N] [--ca-bundle F]",
		Description: "Resolves the root wheel's embedded lock (--wheel) or a bare lock (--lock) for the\n" +
			"platform, reads each package's page on the pinned index and downloads the file it lists\n" +
			"(the lock's URLs are only hints), checking sha256 and size while the bytes arrive.\n" +
			"Wheels already in the store are not fetched again; --offline uses only the store.\n" +
			"Credentials: --index https://user:pass@host/simple/, a netrc entry for the host\n" +
			"($NETRC or ~/.netrc), or CRUXPROV_INDEX_USERNAME / CRUXPROV_INDEX_PASSWORD; proxies from\n" +
			"HTTPS_PROXY / HTTP_PROXY / NO_PROXY; TLS roots: the system pool plus --ca-bundle.\n\n" +
			"Example:\n   cruxprov fetch --lock pylock.toml --platform cp311-manylinux_2_36_x86_64 --index https://pypi.org/simple/\n" +
			"   cruxprov fetch --wheel acme_echo-1.0.0-py3-none-any.whl --platform host --offline --json",
		Flags: append(sourceFlags("the interpreter `PATH` probed for --platform host"),
			&cli.IntFlag{Name: "jobs", Usage: fmt.Sprintf("parallel downloads `N` (default %d)", fetch.DefaultJobs)}),
		Action: fetchAction,
	})
}

// sourceFlags are the flags of the commands that resolve a provider's lock
// and get its wheels from the pinned index (fetch, env create): one of
// --wheel or --lock, --platform, --python, --offline and the index flags.
func sourceFlags(pythonUsage string) []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "wheel", Usage: "the provider's root `WHEEL` (its embedded lock is used)"},
		&cli.StringFlag{Name: "lock", Usage: "a bare pylock.toml `FILE`"},
		&cli.StringFlag{Name: "platform", Usage: "the target `PLATFORM`: a preset id, host, or the id of --python's host platform"},
		&cli.StringFlag{Name: "python", Value: "python3", Usage: pythonUsage},
		&cli.BoolFlag{Name: "offline", Usage: "use only wheels already in the store (offline_miss otherwise)"},
	}, indexFlags()...)
}

// indexFlags are the flags of every command that reads the pinned index.
func indexFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "index", Usage: "the pinned package index `URL` (its simple API, e.g. https://pypi.org/simple/)"},
		&cli.StringFlag{Name: "ca-bundle", Usage: "a PEM `FILE` of CA certificates trusted besides the system pool"},
	}
}

// caPool is the system CA pool plus --ca-bundle's certificates.
func caPool(c *cli.Context) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if f := c.String("ca-bundle"); f != "" {
		pem, err := inputFile("--ca-bundle", f, maxInputFile)
		if err != nil {
			return nil, err
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--ca-bundle %s: no PEM certificates in it", f)
		}
	}
	return pool, nil
}

// newIndexClient builds the pinned index client from --index and
// --ca-bundle and the environment (DESIGN §14): the system CA pool plus
// the bundle, proxies from the standard variables, credentials from the
// URL, netrc ($NETRC or ~/.netrc) or CRUXPROV_INDEX_USERNAME/PASSWORD.
func newIndexClient(c *cli.Context, o *opts, rawURL string) (*index.Client, error) {
	u, err := index.ParseURL(rawURL)
	if err != nil {
		return nil, indexURLUsage(err)
	}
	pool, err := caPool(c)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyFromEnvironment
	tr.OnProxyConnectResponse = index.CheckProxyConnect // a 407 is the proxy's, not the index's
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	tr.MaxIdleConnsPerHost = 16
	var creds []index.Credential
	if user, pw := os.Getenv("CRUXPROV_INDEX_USERNAME"), os.Getenv("CRUXPROV_INDEX_PASSWORD"); user != "" || pw != "" {
		creds = append(creds, index.Credential{Host: u.Host, Username: user, Password: pw, From: "the environment variables CRUXPROV_INDEX_USERNAME and CRUXPROV_INDEX_PASSWORD"})
	}
	netrc := os.Getenv("NETRC")
	if netrc == "" {
		if h, err := os.UserHomeDir(); err == nil {
			netrc = filepath.Join(h, ".netrc")
		}
	}
	// An unreadable netrc (HOME still root's after sudo -u) is a warning;
	// the index's 401 or 403, if it comes, names it. Page and root wheel
	// retries get a line each (no bar shows them), above the bars when
	// they are drawn: o is the command's own, whose bars those are and
	// whose --json document carries the warning (keepWarning), with or
	// without --quiet (an opts of its own here wrote the warning on
	// stderr under --json and left it out of the document, and wrote
	// the lines through the bars rather than above them).
	events := func(e index.Event) {
		switch e.Kind {
		case index.EventWarning:
			if msg := oneLine(e.Err.Error()); o.keepWarning(msg) {
				o.line("warning: " + msg)
			}
		case index.EventRetry:
			if !o.quiet {
				o.line(fmt.Sprintf("retry: %s: attempt %d of %d failed: %s; trying again in %s", e.URL, e.Attempt, e.Attempts, oneLine(e.Err.Error()), retryWait(e.Wait)))
			}
		}
	}
	cl, err := index.New(rawURL, index.Options{HTTPClient: &http.Client{Transport: tr}, Credentials: creds, Netrc: netrc, Events: events})
	if err != nil {
		return nil, indexURLUsage(err)
	}
	return cl, nil
}

// retryWait is a retry's wait as its line shows it: to the millisecond
// (a Retry-After given as a date waits, say, 2.260176021s).
func retryWait(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// indexURLUsage is the usage error of an --index URL index.ParseURL (or
// index.New) refused: the URL, redacted, and what is wrong with it.
func indexURLUsage(err error) error {
	var ue *index.URLError
	if errors.As(err, &ue) {
		return usagef("--index %s: %s", ue.URL, ue.Problem)
	}
	return usagef("--index: %v", err)
}

// sourceOf reads the --lock the flags name into a pipeline source, or
// opens their --wheel (rootOf reads it into the store, once it is open):
// a file that cannot be read is a usage error (exit 64).
func sourceOf(c *cli.Context) (pipeline.Source, *os.File, error) {
	if wp := c.String("wheel"); wp != "" {
		f, err := openInput("--wheel", wp)
		return pipeline.Source{}, f, err
	}
	b, err := inputFile("--lock", c.String("lock"), maxInputFile)
	return pipeline.Source{LockData: b}, nil, err
}

// pinnedSource checks the flags fetch and env create share (one of --wheel
// or --lock, --platform, --index unless --offline, --jobs) and returns the
// pinned index's client (nil with --offline: nothing is fetched).
func pinnedSource(c *cli.Context, o *opts) (*index.Client, error) {
	if (c.String("wheel") == "") == (c.String("lock") == "") {
		return nil, usagef("give exactly one of --wheel W or --lock F")
	}
	return pinnedIndex(c, o)
}

// pinnedIndex checks the flags every resolution needs besides its source
// (--platform, --index or --offline, --jobs) and makes the index client
// (nil offline).
func pinnedIndex(c *cli.Context, o *opts) (*index.Client, error) {
	if c.String("platform") == "" {
		return nil, usagef("--platform is required (a preset id, or host)")
	}
	if c.String("index") == "" && !c.Bool("offline") {
		return nil, usagef("--index URL is required: wheels come only from the pinned index (or give --offline)")
	}
	if c.Int("jobs") < 0 {
		return nil, usagef("--jobs must be positive (or 0, the default)")
	}
	if u := c.String("index"); u != "" && !c.Bool("offline") {
		return newIndexClient(c, o, u)
	}
	return nil, nil // offline: the store alone, no client (and no CA pool to load)
}

func fetchAction(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	// --python on the command line, not config.yaml's (a default for
	// host, which a preset named here need not use).
	pythonGiven := c.IsSet("python")
	if err := applyConfig(c, o); err != nil {
		return err
	}
	if c.NArg() > 0 {
		return usagef("fetch takes no arguments (got %q)", c.Args().First())
	}
	if pythonGiven {
		// A preset's wheels are the same whatever the interpreter: it
		// was fetched for as if --python had not been given.
		if err := pythonUnprobed([]string{c.String("platform")}, "give --platform host"); err != nil {
			return err
		}
	}
	client, err := pinnedSource(c, o)
	if err != nil {
		return err
	}
	src, wf, err := sourceOf(c)
	if err != nil {
		return err
	}
	defer wf.Close()
	if err := notAStoreToMake(o.home); err != nil {
		return err
	}
	st, err := o.openStore()
	if err != nil {
		return err
	}
	if wf != nil {
		// Read into a private copy that fetch leaves out of the store
		// (the env that installs the root wheel puts it there).
		if src.Root, err = rootOf(c, st, wf, digest.Digest{}); err != nil {
			return err
		}
		defer src.Root.Close()
	}
	var bars *progress
	if o.progressOn() {
		bars = newProgress(c, o)
	}
	pr, err := pipeline.Run(c.Context, st, pipeline.Options{
		Source: src, Platform: c.String("platform"), Python: c.String("python"), Client: client,
		FetchOnly: true, Jobs: c.Int("jobs"), FetchEvents: fetchEvents(o, bars), Warn: o.warn,
	})
	if bars != nil {
		bars.wait(err == nil)
	}
	if err != nil {
		return spaceAdvice(err)
	}
	rep, res := pr.Fetch, pr.Resolution
	out := struct {
		fetch.Report
		Platform string `json:"platform"`
		Store    string `json:"store"`
	}{rep, res.Platform, st.Home()}
	return o.emit("cruxprov.fetch/v1", out, func(w io.Writer) {
		cached := 0
		for _, wh := range rep.Wheels {
			if wh.Cached {
				cached++
			}
		}
		if o.quiet {
			return
		}
		for _, wh := range rep.Wheels {
			state := "fetched"
			if wh.Cached {
				state = "in store"
			}
			fmt.Fprintf(w, "%-8s %s %s\n", state, wh.SHA256.Hex()[:12], wh.Filename)
		}
		fmt.Fprintf(w, "%s for %s: %d fetched (%s), %d already in the store %s\n",
			count(len(rep.Wheels), "wheel"), res.Platform, rep.Downloaded, humanBytes(rep.Bytes), cached, st.Home())
	})
}

// fetchEvents shows a fetch's events: progress bars on a TTY (bars, or
// nil), and a line on stderr for each retry and each damaged blob found
// in the store, above the bars or, without them, one per event (unless
// --quiet). A damaged blob is a warning as o.warn's: with --json it is in
// the document's "warnings", not on stderr (it was on stderr and missing
// from the document).
func fetchEvents(o *opts, bars *progress) func(fetch.Event) {
	var mu sync.Mutex
	return func(e fetch.Event) {
		if bars != nil {
			bars.event(e)
		}
		var line string
		switch e.Kind {
		case fetch.EventRetry:
			// It said only "trying again": a download's Retry-After (up
			// to a minute) was waited out without a word of how long.
			line = fmt.Sprintf("retry: %s: attempt %d failed: %s; trying again in %s", e.Filename, e.Attempt, oneLine(e.Err.Error()), retryWait(e.Wait))
		case fetch.EventDamaged:
			msg := fmt.Sprintf("%s: %s; fetching it again", e.Filename, oneLine(e.Err.Error()))
			if !o.keepWarning(msg) {
				return
			}
			line = "warning: " + msg
		default:
			return
		}
		if o.quiet {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if bars != nil {
			fmt.Fprintln(bars.p, line) // above the bars
			return
		}
		fmt.Fprintln(o.stderr, line)
	}
}

func humanBytes(n int64) string { return bytesize.Format(n) }

// progress draws one bar per download and one overall, on a TTY.
type progress struct {
	p       *mpb.Progress
	mu      sync.Mutex
	total   *mpb.Bar
	bars    map[string]*mpb.Bar
	current map[string]int64
	done    int64
	o       *opts
}

// newProgress starts the bars on o's stderr; o.line writes above them
// until wait.
func newProgress(c *cli.Context, o *opts) *progress {
	pr := &progress{p: barsOn(c.Context, o.stderr), bars: map[string]*mpb.Bar{}, current: map[string]int64{}, o: o}
	o.bars.Store(pr)
	return pr
}

// barsOn starts a bar container drawing on w (each bar 32 columns wide).
// mpb draws to a terminal's size as the terminal reports it, and one
// that reports none (0×0: a pseudo-terminal nobody sized, a serial
// console) got no bar at all: on such a terminal the lines are drawn 80
// columns wide, each frame drawn over the last as on any terminal.
//
// The bars outlive ctx (its values are kept, not its cancellation): a
// Ctrl-C cancels the command's context, and mpb stopped drawing as it
// came, leaving that frame on the terminal, a download's bar half full
// above the "interrupted" line. wait draws the last frame instead, the
// downloads that did not finish dropped (TestBarsClearedWhenInterrupted).
func barsOn(ctx context.Context, w io.Writer) *mpb.Progress {
	ctx = context.WithoutCancel(ctx)
	if f, ok := w.(*os.File); ok {
		if cols, rows, err := term.GetSize(int(f.Fd())); err == nil && (cols == 0 || rows == 0) {
			return mpb.NewWithContext(ctx, mpb.WithOutput(struct{ io.Writer }{f}), mpb.WithWidth(80), mpb.ForceTTY(), mpb.WithAutoRefresh())
		}
	}
	return mpb.NewWithContext(ctx, mpb.WithOutput(w), mpb.WithWidth(32))
}

// drawing reports whether a bar is drawn: the total's, from the plan on,
// or a download's.
func (pr *progress) drawing() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.total != nil || len(pr.bars) > 0
}

func (pr *progress) event(e fetch.Event) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	switch e.Kind {
	case fetch.EventPlan:
		// Another platform's fetch (install fetches each in turn): the
		// last one's total is done, and goes.
		if pr.total != nil {
			pr.total.Abort(true) // dropped (a bar completed first stays drawn)
			pr.done, pr.current = 0, map[string]int64{}
		}
		pr.total = pr.p.New(e.Total, mpb.BarStyle(), mpb.BarWidth(32), mpb.BarPriority(1<<30),
			mpb.PrependDecorators(decor.Name("total ("+count(e.Count, "wheel")+")", decor.WCSyncSpaceR)),
			mpb.AppendDecorators(decor.CountersKibiByte("% .1f / % .1f"), decor.Percentage(decor.WCSyncSpace)))
	case fetch.EventStart:
		if b := pr.bars[e.Filename]; b != nil {
			b.Abort(true)
		}
		name := e.Filename
		if len(name) > 40 {
			name = name[:37] + "..."
		}
		pr.bars[e.Filename] = pr.p.New(e.Total, mpb.BarStyle(), mpb.BarWidth(32), mpb.BarRemoveOnComplete(),
			mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR)),
			mpb.AppendDecorators(decor.CountersKibiByte("% .1f / % .1f"), decor.Percentage(decor.WCSyncSpace)))
		pr.current[e.Filename] = 0
	case fetch.EventProgress:
		if b := pr.bars[e.Filename]; b != nil {
			b.SetCurrent(e.Bytes)
		}
		pr.current[e.Filename] = e.Bytes
	case fetch.EventDone:
		if b := pr.bars[e.Filename]; b != nil {
			b.SetTotal(-1, true)
		}
		delete(pr.current, e.Filename)
		pr.done += e.Bytes
	case fetch.EventRetry, fetch.EventFailed:
		if b := pr.bars[e.Filename]; b != nil {
			b.Abort(true)
			delete(pr.bars, e.Filename)
		}
		delete(pr.current, e.Filename)
	}
	if pr.total != nil {
		n := pr.done
		for _, v := range pr.current {
			n += v
		}
		pr.total.SetCurrent(n)
	}
}

func (pr *progress) wait(ok bool) {
	pr.mu.Lock()
	if pr.total != nil {
		if ok {
			pr.total.SetTotal(-1, true)
		} else {
			pr.total.Abort(false)
		}
	}
	for _, b := range pr.bars {
		b.Abort(true)
	}
	pr.mu.Unlock()
	pr.p.Wait()
	pr.o.bars.CompareAndSwap(pr, nil)
}

// count says n of a noun: "1 wheel", "2 wheels"; an irregular plural is
// given after the noun ("entry", "entries").
func count[N int | int64 | uint64](n N, noun string, plural ...string) string {
	if n == 1 {
		return "1 " + noun
	}
	if len(plural) > 0 {
		return fmt.Sprintf("%d %s", n, plural[0])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// rootPackage reads a root wheel named as NAME==VERSION (an argument
// that is no wheel file) with its --sha256 HEX: the index's file of
// those bytes (pipeline.FetchRoot). ok is false for any other argument.
func rootPackage(c *cli.Context, arg string) (name, version string, sum digest.Digest, ok bool, err error) {
	if !namesPackage(arg) {
		return "", "", digest.Digest{}, false, nil
	}
	name, version, ok = strings.Cut(arg, "==")
	if c.String("sha256") == "" {
		return name, version, sum, true, usagef("NAME==VERSION needs --sha256 HEX: only those bytes install")
	}
	if sum, err = digest.ParseHex(strings.TrimPrefix(c.String("sha256"), "sha256:")); err != nil {
		return name, version, sum, true, usagef("--sha256: %v", err)
	}
	return name, version, sum, true, nil
}
