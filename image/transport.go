package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
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

// withStall returns opts with a transport that cancels a request once
// registryStall passes without progress, before them: a caller's own
// remote.WithTransport comes later and is kept.
func withStall(opts []remote.Option) []remote.Option {
	return append([]remote.Option{remote.WithTransport(&stallTransport{rt: remote.DefaultTransport, stall: registryStall})}, opts...)
}

type stallTransport struct {
	rt    http.RoundTripper
	stall time.Duration
}

func (s *stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watch{stall: s.stall}
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
	return resp, nil
}

// watch is one request's stall timer.
type watch struct {
	mu    sync.Mutex
	timer *time.Timer
	stall time.Duration
	done  bool
}

func (w *watch) progress() {
	w.mu.Lock()
	if !w.done {
		w.timer.Reset(w.stall)
	}
	w.mu.Unlock()
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
	if errors.Is(context.Cause(ctx), errStalled) {
		return &url.Error{Op: req.Method, URL: req.URL.Redacted(), Err: fmt.Errorf("%w (%v)", errStalled, registryStall)}
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
		b.w.progress()
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
		b.w.progress()
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
