package image

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// registryStall bounds how long a registry may keep one request waiting
// without a byte either way: for its answer's headers, between two reads
// of its body, or while it reads an upload. go-containerregistry's
// transport has no deadline but the dial's, so a registry that accepted
// the connection and said nothing held verify (the check before every
// container run), a base's read and a push for ever.
var registryStall = 30 * time.Second

// errStalled is a registry that kept a request waiting registryStall.
var errStalled = errors.New("the registry sent nothing for too long")

// registryMinRate is the slowest an upload or an answer's body may go, in
// bytes a second, once registryStall has passed since its first byte: a
// registry that drips (a byte every 29 s resets the stall deadline each
// time) held a read of a manifest for days, and so verify and a push.
// 1 KiB/s is far below any registry's link; a body slower than that is
// ended, as a stall is (errTooSlow).
var registryMinRate int64 = 1 << 10

// errTooSlow is a registry that sent (or took) less than registryMinRate.
var errTooSlow = errors.New("the registry sent too little for too long")

// withStall returns opts with a transport that cancels a request once
// registryStall passes without progress, and a retry predicate that
// does not try a stall or a timeout again, before them: a caller's own
// remote.WithTransport or remote.WithRetryPredicate comes later and is
// kept.
func withStall(opts []remote.Option) []remote.Option {
	return append([]remote.Option{
		remote.WithTransport(Transport(nil)),
		remote.WithRetryPredicate(retryable),
	}, opts...)
}

// Transport is the transport of this package's registry requests (the
// stall and drip deadlines, the bound on redirects, error answers cut to
// one line) over go-containerregistry's default transport, trusting the
// certificates of roots besides the system pool (nil: the system pool
// alone). remote.WithTransport(Transport(pool)) in Options.Remote or
// VerifyOptions.Remote trusts a registry's private CA and keeps them,
// where another transport of the caller's replaces them.
func Transport(roots *x509.CertPool) http.RoundTripper {
	rt := remote.DefaultTransport
	if ht, ok := rt.(*http.Transport); ok && roots != nil {
		ht = ht.Clone()
		if ht.TLSClientConfig == nil {
			ht.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		ht.TLSClientConfig.RootCAs = roots
		rt = ht
	}
	return &stallTransport{rt: rt, stall: registryStall}
}

// RemoteOptions returns opts with what this package's own registry
// requests have before them: a deadline of registryStall (30 s) without
// a byte either way, no retry of a stall or a timeout, and error answers
// cut to one short line. Another package that reads a registry (the
// container backend's manifest read) takes its options through it.
func RemoteOptions(opts []remote.Option) []remote.Option { return withStall(opts) }

// retryable is go-containerregistry's default retry predicate (a
// temporary error, a 5xx or 429 among them; a connection cut short)
// less a stall and a timeout. Its transport times a TLS handshake out
// after 10 s and a dial after 30 s, errors that say they are temporary,
// so a registry that accepted the connection and said nothing was tried
// three times, 1 s and 3 s apart: 34 s for a handshake, 4×30 s for a
// dial, where a stall deadline (registryStall) was meant to be the
// wait. A registry that said nothing for that long is not waited for
// again.
func retryable(err error) bool {
	if err == nil || errors.Is(err, errStalled) || errors.Is(err, errTooSlow) || errors.Is(err, errRedirects) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	if t, ok := err.(interface{ Temporary() bool }); ok && t.Temporary() {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

type stallTransport struct {
	rt    http.RoundTripper
	stall time.Duration
}

// maxRedirects bounds a chain of redirects, as net/http's own client does
// (10). go-containerregistry's clients replace that check with one against
// redirects to a private host (checkRedirectSSRF), which lets a registry
// redirect to its own host without end: one that redirected a request to
// itself (a misconfigured proxy) held a push and verify for ever, some
// 4,000 requests a second.
const maxRedirects = 10

// errRedirects is a redirect chain longer than maxRedirects.
var errRedirects = fmt.Errorf("the registry redirected the request more than %d times", maxRedirects)

// redirected is how many redirects led to req: net/http gives each
// request it makes for a redirect the answer that caused it (Response),
// whose Request is the one before.
func redirected(req *http.Request) int {
	n := 0
	for r := req; r.Response != nil && r.Response.Request != nil && n <= maxRedirects; r = r.Response.Request {
		n++
	}
	return n
}

func (s *stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if redirected(req) > maxRedirects {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errRedirects // net/http's client wraps it: a *url.Error
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watch{stall: s.stall, slow: func() { cancel(errTooSlow) }}
	w.timer = time.AfterFunc(s.stall, func() { cancel(errStalled) })
	req = req.WithContext(ctx)
	if req.Body != nil {
		req.Body = &progressBody{ReadCloser: req.Body, w: w}
	}
	resp, err := s.rt.RoundTrip(req)
	if err != nil {
		w.stop()
		cancel(nil)
		return nil, stalled(req, ctx, err)
	}
	resp.Body = &stallBody{body: resp.Body, w: w, req: req, ctx: ctx, cancel: cancel}
	if resp.StatusCode >= 400 {
		return oneLineError(resp)
	}
	return resp, nil
}

// maxErrorBody is as much of an error answer as go-containerregistry
// reads (and puts in its error).
const maxErrorBody = 64 << 10

// maxExcerpt bounds, in runes, what of a registry's error text a refusal
// carries; maxDiagnostics how many of its errors.
const (
	maxExcerpt     = 160
	maxDiagnostics = 4
)

// oneLineError replaces the body of resp, a registry's (or its proxy's)
// error answer, with what of it a refusal may carry: go-containerregistry
// puts the body it does not parse into its error whole (up to 64 KiB), so
// an nginx 503 page was printed as the refusal's detail over many lines.
// A registry error ({"errors": [...]}) keeps its codes, which callers
// test, with each message and detail cut to one short line; any other
// body is cut to its first line when it is text, dropped when it is HTML.
func oneLineError(resp *http.Response) (*http.Response, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	b = errorBody(b)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// errorBody is what of an error answer's body b a refusal may carry.
func errorBody(b []byte) []byte {
	var e struct {
		Errors []transport.Diagnostic `json:"errors"`
	}
	if json.Unmarshal(b, &e) != nil || len(e.Errors) == 0 {
		s := excerpt(string(b))
		if json.Unmarshal([]byte(s), &e) == nil && len(e.Errors) > 0 {
			// The first line alone is a registry error (what followed
			// it made the whole no JSON): go-containerregistry decodes
			// it, escapes and all, so its fields are cut as any
			// registry error's ("\u001b]0;…\u0007" in a message
			// reached the terminal).
			return errorBody([]byte(s))
		}
		return []byte(s)
	}
	e.Errors = e.Errors[:min(len(e.Errors), maxDiagnostics)]
	for i := range e.Errors {
		d := &e.Errors[i]
		d.Code = transport.ErrorCode(excerpt(string(d.Code)))
		d.Message = excerpt(d.Message)
		switch v := d.Detail.(type) {
		case nil:
		case string:
			d.Detail = excerpt(v)
		default:
			j, _ := json.Marshal(v)
			d.Detail = excerpt(string(j))
		}
		if d.Detail == "" {
			d.Detail = nil
		}
	}
	out, err := json.Marshal(e)
	if err != nil {
		return nil
	}
	return out
}

// ansiCSI is a terminal's escape sequence (colours, cursor moves).
var ansiCSI = regexp.MustCompile("\x1b\\[[0-9;?]*[ -/]*[@-~]")

// excerpt is s's first line without control or format characters, cut
// to maxExcerpt runes; "" when s is HTML or not UTF-8 text.
func excerpt(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "<") || !utf8.ValidString(s) {
		return ""
	}
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	s = ansiCSI.ReplaceAllString(s, "")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
	if r := []rune(s); len(r) > maxExcerpt {
		s = string(r[:maxExcerpt]) + "…"
	}
	return strings.TrimSpace(s)
}

// watch is one request's stall timer, and its rate floor.
type watch struct {
	mu    sync.Mutex
	timer *time.Timer
	stall time.Duration
	done  bool
	flow  [2]flow // the upload, the answer's body
	slow  func()  // ends the request: errTooSlow
}

// flow is one direction of a request: when its first byte moved, and how
// many have since.
type flow struct {
	start time.Time
	bytes int64
}

// Directions of a request's bytes (watch.flow).
const (
	sent     = 0
	received = 1
)

// progress counts n bytes moved in direction dir: the stall deadline
// starts again, unless that direction has gone slower than
// registryMinRate since a registryStall after its first byte, which ends
// the request. The floor is per direction, from its first byte: the wait
// for the answer (the registry storing an upload) is the stall deadline's
// alone.
func (w *watch) progress(dir, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	f := &w.flow[dir]
	if f.start.IsZero() {
		f.start = time.Now()
	}
	f.bytes += int64(n)
	if late := time.Since(f.start) - w.stall; late > 0 && f.bytes < int64(late.Seconds()*float64(registryMinRate)) {
		w.done = true
		w.timer.Stop()
		w.slow()
		return
	}
	w.timer.Reset(w.stall)
}

func (w *watch) stop() {
	w.mu.Lock()
	w.done = true
	w.timer.Stop()
	w.mu.Unlock()
}

// stalled is err, or, when the request was cancelled for a stall, an
// error that says so (a *url.Error: the network's failure, fetch_failed).
func stalled(req *http.Request, ctx context.Context, err error) error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errStalled):
		return &url.Error{Op: req.Method, URL: req.URL.Redacted(), Err: fmt.Errorf("%w (%v)", errStalled, registryStall)}
	case errors.Is(cause, errTooSlow):
		return &url.Error{Op: req.Method, URL: req.URL.Redacted(), Err: fmt.Errorf("%w (under %d bytes a second)", errTooSlow, registryMinRate)}
	}
	return err
}

// progressBody is an upload whose reads count as progress.
type progressBody struct {
	io.ReadCloser
	w *watch
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.progress(sent, n)
	}
	return n, err
}

// stallBody is an answer's body whose reads count as progress.
type stallBody struct {
	body   io.ReadCloser
	w      *watch
	req    *http.Request
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if n > 0 {
		b.w.progress(received, n)
	}
	if err != nil && err != io.EOF {
		err = stalled(b.req, b.ctx, err)
	}
	return n, err
}

func (b *stallBody) Close() error {
	b.w.stop()
	err := b.body.Close()
	b.cancel(nil)
	return err
}
