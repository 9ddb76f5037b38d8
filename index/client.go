package index

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/refusal"
)

// Credential is a user name and password for one host (as netrc gives
// them). Host is a host name, or host:port to match only that port.
type Credential struct {
	Host     string
	Username string
	Password string
	// From says where the credential came from, as the refusal of an
	// index that rejects it names it, to say where to correct it (e.g.
	// "the environment variables A and B"; "": the caller's). The
	// client names its own: the base URL's user information and the
	// netrc file's entries.
	From string
	src  credSource
}

// credSource is where the client found a Credential.
type credSource int

const (
	credCaller credSource = iota // Options.Credentials
	credURL                      // the base URL's user:password@
	credNetrc                    // Options.Netrc
)

// Options configure a Client. The zero value works: a client with Go's
// default TLS settings (the system roots), no proxy and no credentials.
type Options struct {
	// HTTPClient supplies the Transport (TLS roots, proxy) and is copied,
	// never modified. Its CheckRedirect is replaced by the pinning rule.
	HTTPClient *http.Client
	// Credentials are sent as HTTP basic auth to the host each names, and
	// to no other. A base URL's own user:password@ is one more.
	Credentials []Credential
	// Timeout bounds one request, body included (default 30 minutes: a
	// multi-GB wheel on a slow link; StallTimeout catches a dead one sooner).
	Timeout time.Duration
	// StallTimeout bounds the wait for the next StallBytes of a body
	// (default 30s): an index that drips a body a few bytes at a time is
	// stalled too, so that a command never waits silent past it.
	StallTimeout time.Duration
	// Attempts is how many times Project tries a page (default 4).
	Attempts int
	// Backoff is the wait before the first retry, doubled each time (default 250ms).
	Backoff time.Duration
	// UserAgent is sent on every request (default "cruxprov").
	UserAgent string
	// Netrc, when set, is a netrc file whose machine entries are more
	// Credentials (after those above). A missing file is no credential;
	// one that cannot be read (a HOME that is another user's) is skipped
	// with an EventWarning, and named in the refusal if the index then
	// answers 401 or 403.
	Netrc string
	// Events, when set, receives what a caller may show: warnings and
	// page retries. It may be called from several goroutines at once.
	Events func(Event)
}

// EventKind says what an Event reports.
type EventKind string

// The kinds of Event.
const (
	// EventWarning is something skipped that may matter later (Err).
	EventWarning EventKind = "warning"
	// EventRetry is a failed page request (Err) that is tried again
	// after Wait; Attempt of Attempts failed.
	EventRetry EventKind = "retry"
)

// Event is a warning or a retry of the client. URLs are redacted.
type Event struct {
	Kind     EventKind
	URL      string
	Attempt  int
	Attempts int
	Wait     time.Duration
	Err      error
}

// maxNetrc bounds the netrc file read.
const maxNetrc = 1 << 20

// Client reads one pinned index. It is safe for concurrent use.
type Client struct {
	base  *url.URL // ends in "/", no userinfo
	opts  Options
	http  *http.Client
	creds []Credential
	// netrcErr is why Options.Netrc could not be read (nil when it was,
	// or when it does not exist).
	netrcErr error
	// netrcMissing is that Options.Netrc does not exist.
	netrcMissing bool
}

// New returns a client for the index whose simple API lives at baseURL
// (e.g. https://pypi.org/simple/). A user:password in baseURL is used as a
// credential for its host and removed from the URL the client reports.
// A baseURL ParseURL refuses is its *URLError.
func New(baseURL string, opts Options) (*Client, error) {
	u, err := ParseURL(baseURL)
	if err != nil {
		return nil, err
	}
	creds := append([]Credential(nil), opts.Credentials...)
	if u.User != nil {
		pw, _ := u.User.Password()
		// The URL's own credential comes first: it is the most specific.
		creds = append([]Credential{{Host: u.Host, Username: u.User.Username(), Password: pw, src: credURL}}, creds...)
		u.User = nil
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		u.RawPath = ""
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Minute
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = 30 * time.Second
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 4
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 250 * time.Millisecond
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "cruxprov"
	}
	if opts.Events == nil {
		opts.Events = func(Event) {}
	}
	var netrcErr error
	netrcMissing := false
	if opts.Netrc != "" {
		nc, err := readNetrc(opts.Netrc)
		if errors.Is(err, errNoNetrc) {
			netrcMissing, err = true, nil
		}
		if err != nil {
			netrcErr = err
			opts.Events(Event{Kind: EventWarning, Err: fmt.Errorf("netrc %s skipped: %w; no credentials from it", opts.Netrc, unwrapPath(err))})
		}
		for i := range nc {
			nc[i].src = credNetrc
		}
		creds = append(creds, nc...)
	}
	c := &Client{base: u, opts: opts, creds: creds, netrcErr: netrcErr, netrcMissing: netrcMissing}
	hc := &http.Client{}
	if opts.HTTPClient != nil {
		*hc = *opts.HTTPClient
	}
	inner := hc.Transport
	if inner == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil // proxies come from the caller, never from the environment here
		t.MaxIdleConnsPerHost = 16
		inner = t
	}
	hc.Transport = &authTransport{inner: inner, creds: creds, ua: opts.UserAgent, plainOK: u.Scheme == "http"}
	hc.Timeout = 0 // per-request deadlines are ours (Timeout, StallTimeout)
	hc.CheckRedirect = c.checkRedirect
	c.http = hc
	return c, nil
}

// Emit passes e to Options.Events: a caller that retries a download of
// its own (pipeline.FetchRoot) reports it where the client's own retries go.
func (c *Client) Emit(e Event) { c.opts.Events(e) }

// BaseURL returns the index URL, ending in "/", without credentials.
func (c *Client) BaseURL() string { return c.base.String() }

// ProjectURL returns the URL of a project's page.
func (c *Client) ProjectURL(name string) string {
	return c.base.JoinPath(pep503.Normalize(name)).String() + "/"
}

type ctxKey struct{}

// checkRedirect follows a redirect only within the index (the base URL's
// scheme, host and path prefix) or to the very URL the index listed.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		// A loop, wherever it points: the index is broken, not unpinned
		// (index_not_pinned means a redirect off the index).
		return refusal.New(refusal.FetchFailed, "%s redirected more than 10 times; check the index at %s", Redact(via[0].URL.String()), c.BaseURL())
	}
	if within(req.URL, c.base) {
		return nil
	}
	if listed, ok := req.Context().Value(ctxKey{}).(*url.URL); ok && sameURL(req.URL, listed) {
		return nil
	}
	return refusal.New(refusal.IndexNotPinned, "%s redirected to %s, outside the pinned index %s; fix the index or pin the index that serves the files",
		Redact(via[len(via)-1].URL.String()), Redact(req.URL.String()), c.BaseURL())
}

func hostPort(u *url.URL) string {
	h, p := strings.ToLower(u.Hostname()), u.Port()
	if p == "" {
		switch u.Scheme {
		case "http":
			p = "80"
		case "https":
			p = "443"
		}
	}
	return net.JoinHostPort(h, p)
}

func within(u, base *url.URL) bool {
	return u.Scheme == base.Scheme && hostPort(u) == hostPort(base) && strings.HasPrefix(u.EscapedPath(), base.EscapedPath())
}

func sameURL(a, b *url.URL) bool {
	return a.Scheme == b.Scheme && hostPort(a) == hostPort(b) && a.EscapedPath() == b.EscapedPath() && a.RawQuery == b.RawQuery
}

// authTransport sets basic auth for hosts with a credential, and the
// User-Agent, on every request including redirected ones. Over plain http
// only when the index itself is plain http (plainOK): an https index's
// page may list a file at a plain http URL on a host that has a
// credential (a netrc machine names a host, not a port or a scheme), and
// the credential went there in clear text.
type authTransport struct {
	inner   http.RoundTripper
	creds   []Credential
	ua      string
	plainOK bool
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("User-Agent", t.ua)
	r.Header.Del("Authorization")
	if r.URL.User != nil {
		r.URL.User = nil // only Credentials authenticate: never a URL from a page
	}
	for _, cr := range t.creds {
		if r.URL.Scheme != "https" && !t.plainOK {
			break
		}
		if strings.EqualFold(cr.Host, r.URL.Host) || strings.EqualFold(cr.Host, r.URL.Hostname()) {
			r.SetBasicAuth(cr.Username, cr.Password)
			break
		}
	}
	return t.inner.RoundTrip(r)
}

// StatusError is an HTTP response other than 200.
type StatusError struct {
	URL        string // redacted
	StatusCode int
	RetryAfter time.Duration // a 429's or 503's Retry-After (0: none given)
}

// MaxRetryAfter bounds how long a retry waits for an index's Retry-After.
const MaxRetryAfter = time.Minute

// RetryDelay is the wait before retrying after err, whose attempt's
// backoff is backoff: longer when the index asked for it (Retry-After on
// a 429 or 503), up to MaxRetryAfter.
func RetryDelay(err error, backoff time.Duration) time.Duration {
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > backoff {
		return min(se.RetryAfter, MaxRetryAfter)
	}
	return backoff
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(h), 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(MaxRetryAfter/time.Second)+1)) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: HTTP %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
}

// TimeoutError is a request that ran past Options.Timeout or stalled past
// Options.StallTimeout.
type TimeoutError struct {
	URL   string // redacted
	Stall bool
	After time.Duration
}

func (e *TimeoutError) Error() string {
	if e.Stall {
		return fmt.Sprintf("GET %s: stalled: under %d bytes in %s", e.URL, StallBytes, e.After)
	}
	return fmt.Sprintf("GET %s: not done after %s", e.URL, e.After)
}

// RequestError is a transport failure (connection refused or reset, a
// body cut short), with the URL redacted.
type RequestError struct {
	URL string // redacted
	Err error
}

func (e *RequestError) Error() string { return fmt.Sprintf("GET %s: %v", e.URL, e.Err) }
func (e *RequestError) Unwrap() error { return e.Err }

// ProxyError is a proxy's answer other than 200 to the CONNECT that
// opens the tunnel to an https host: CheckProxyConnect returns it, where
// http.Transport says only the status text ("Proxy Authentication
// Required"), which read as a transport failure and was retried.
type ProxyError struct {
	Proxy      string // redacted
	StatusCode int
}

func (e *ProxyError) Error() string {
	return fmt.Sprintf("the proxy %s answered the CONNECT with HTTP %d %s", e.Proxy, e.StatusCode, http.StatusText(e.StatusCode))
}

// CheckProxyConnect is an http.Transport's OnProxyConnectResponse: a
// proxy's answer other than 200 is a *ProxyError naming the proxy
// (redacted) and the status.
func CheckProxyConnect(_ context.Context, proxy *url.URL, _ *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	return &ProxyError{Proxy: Redact(proxy.String()), StatusCode: resp.StatusCode}
}

// Retryable reports whether err is worth another attempt: a 5xx or 429
// response, a timeout of ours, or a transport failure. Refusals, the
// caller's own cancellation, TLS trust failures and a host name the name
// server says does not exist are not.
func Retryable(err error) bool {
	if err == nil || refusal.CodeOf(err) != "" || errors.Is(err, context.Canceled) {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode >= 500 || se.StatusCode == http.StatusTooManyRequests || se.StatusCode == http.StatusRequestTimeout
	}
	var te *TimeoutError
	if errors.As(err, &te) {
		return true
	}
	var pe *ProxyError
	if errors.As(err, &pe) {
		// A proxy that wants credentials, or will not connect to the
		// host, says so again on every attempt; one failing may mend.
		return pe.StatusCode >= 500 || pe.StatusCode == http.StatusTooManyRequests
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	if errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci) {
		return false // TLS trust does not come back by retrying
	}
	if _, ok := handshakeAlert(err); ok {
		return false // nor does a server's refusal of this client's TLS
	}
	if noSuchHost(err) != nil {
		return false // the name server said the host does not exist
	}
	var re *RequestError
	if errors.As(err, &re) {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// noSuchHost is err's DNS error when the name server said the host does
// not exist (nil otherwise): a typo, not a failure a retry mends.
func noSuchHost(err error) *net.DNSError {
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return dns
	}
	return nil
}

var (
	errTimeout = errors.New("request timeout")
	errStall   = errors.New("request stalled")
)

// StallBytes is how many bytes of a body must come within each stall
// deadline (Options.StallTimeout): 4 KiB in 30 s is 137 bytes a second,
// which any live link passes and a drip does not.
const StallBytes = 4 << 10

// body is a response body bound to its request's deadlines.
type body struct {
	rc     io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	total  *time.Timer
	stall  *time.Timer
	stallD time.Duration
	got    int // bytes since the stall timer was last reset
	opts   *Options
	url    string
	once   sync.Once
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if b.got += n; b.got >= StallBytes {
		b.stall.Reset(b.stallD)
		b.got = 0
	}
	if err != nil && err != io.EOF {
		err = b.wrap(err)
	}
	return n, err
}

func (b *body) wrap(err error) error {
	switch context.Cause(b.ctx) {
	case errTimeout:
		return &TimeoutError{URL: b.url, After: b.opts.Timeout}
	case errStall:
		return &TimeoutError{URL: b.url, Stall: true, After: b.opts.StallTimeout}
	}
	if e := b.ctx.Err(); e != nil {
		return e
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &RequestError{URL: b.url, Err: err}
}

func (b *body) Close() error {
	b.once.Do(func() {
		b.total.Stop()
		b.stall.Stop()
		b.cancel(nil)
	})
	return b.rc.Close()
}

// get sends one GET and returns the 200 response with its body bound to
// the request's deadlines; listed is the URL an index listed (for the
// redirect rule), or nil.
func (c *Client) get(ctx context.Context, rawURL string, listed *url.URL, accept string) (*http.Response, *body, error) {
	red := Redact(rawURL)
	rctx, cancel := context.WithCancelCause(ctx)
	if listed != nil {
		rctx = context.WithValue(rctx, ctxKey{}, listed)
	}
	b := &body{ctx: rctx, cancel: cancel, stallD: c.opts.StallTimeout, opts: &c.opts, url: red}
	b.total = time.AfterFunc(c.opts.Timeout, func() { cancel(errTimeout) })
	b.stall = time.AfterFunc(c.opts.StallTimeout, func() { cancel(errStall) })
	fail := func(err error) (*http.Response, *body, error) {
		b.total.Stop()
		b.stall.Stop()
		cancel(nil)
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return fail(fmt.Errorf("GET %s: %v", red, errors.Unwrap(err)))
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if r := (*refusal.Error)(nil); errors.As(err, &r) {
			return fail(r)
		}
		werr := b.wrap(err)
		if rctx.Err() == nil {
			at := req.URL
			var ue *url.Error
			if errors.As(err, &ue) {
				if u, perr := url.Parse(ue.URL); perr == nil {
					at = u // a redirect's target
				}
			}
			if r := c.schemeRefused(ctx, at, werr); r != nil {
				return fail(r)
			}
			if alert := c.alertAfterReset(ctx, at, werr); alert != nil {
				return fail(&RequestError{URL: red, Err: alert})
			}
		}
		return fail(werr)
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		se := &StatusError{URL: red, StatusCode: resp.StatusCode}
		if resp.StatusCode == http.StatusBadRequest {
			// Go's TLS server, nginx and Apache answer a plain request
			// with a 400.
			if r := c.schemeRefused(ctx, resp.Request.URL, se); r != nil {
				return fail(r)
			}
		}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			se.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
		return fail(se)
	}
	b.rc = resp.Body
	return resp, b, nil
}

// schemeRefused is the refusal of err, the failure of a request to u,
// when u's scheme is not what its port speaks (nil otherwise): an https
// URL answered in plain HTTP, or an http URL whose port, asked directly,
// answers a TLS handshake. Either fails the same way on every attempt:
// it was retried as a reset or a garbled connection, with no hint.
func (c *Client) schemeRefused(ctx context.Context, u *url.URL, err error) *refusal.Error {
	var rh tls.RecordHeaderError
	switch {
	case u.Scheme == "https" && !viaProxy(err) && (errors.Is(err, http.ErrSchemeMismatch) || errors.As(err, &rh)):
		// (Through an https:// proxy that answers in plain HTTP, the
		// failure is the proxy's, not the index's.)
		if c.isIndex(u) {
			return refusal.Wrap(refusal.FetchFailed, err, "the index %s is pinned as https://, but %s answers in plain HTTP, not TLS; pin it as %s if it is served without TLS, or fix the port to the one that serves TLS",
				c.BaseURL(), u.Host, WithScheme(c.BaseURL(), "http")).WithRemedy(refusal.ActionIndexScheme, "http")
		}
		return refusal.Wrap(refusal.FetchFailed, err, "the index %s links %s, but %s answers in plain HTTP, not TLS; fix the index's links", c.BaseURL(), Redact(u.String()), u.Host)
	case u.Scheme == "http" && probeWorthy(err) && c.direct(u) && c.speaksTLS(ctx, u):
		if c.isIndex(u) {
			return refusal.Wrap(refusal.FetchFailed, err, "the index %s is pinned as http://, but %s speaks TLS (HTTPS), not plain HTTP; pin it as %s",
				c.BaseURL(), u.Host, WithScheme(c.BaseURL(), "https")).WithRemedy(refusal.ActionIndexScheme, "https")
		}
		return refusal.Wrap(refusal.FetchFailed, err, "the index %s links %s, but %s speaks TLS (HTTPS), not plain HTTP; fix the index's links", c.BaseURL(), Redact(u.String()), u.Host)
	}
	return nil
}

// isIndex reports whether u is on the index's own scheme, host and port.
func (c *Client) isIndex(u *url.URL) bool {
	return u.Scheme == c.base.Scheme && hostPort(u) == hostPort(c.base)
}

// WithScheme is the http(s) URL rawURL with the scheme s, its port kept
// (named where it was the old scheme's default: http://host/ that speaks
// TLS does so on port 80) and its user information as it is; rawURL
// unchanged where it is no http(s) URL with a host. It is how the
// refusal of an index pinned with the wrong scheme names the right URL,
// and how the command line renders that refusal's remedy.
func WithScheme(rawURL, s string) string {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return rawURL
	}
	if u.Port() == "" {
		_, p, _ := net.SplitHostPort(hostPort(u))
		u.Host = net.JoinHostPort(u.Hostname(), p)
	}
	u.Scheme = s
	return u.String()
}

// probeWorthy reports whether err, the failure of a plain HTTP request,
// is how a TLS port answers one (a reset, an empty or garbled answer, a
// 400), rather than no server, no host or no answer in time.
func probeWorthy(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode == http.StatusBadRequest
	}
	var ne net.Error
	return !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		noSuchHost(err) == nil && !(errors.As(err, &ne) && ne.Timeout())
}

// direct reports whether a request to u goes straight to its host: a
// proxy's failure says nothing of the host's port.
func (c *Client) direct(u *url.URL) bool {
	p, known := c.proxyFor(u)
	return known && p == nil
}

// proxyFor is the proxy the transport sends a request for u through (nil:
// none), and whether that is known (an *http.Transport's Proxy says).
func (c *Client) proxyFor(u *url.URL) (*url.URL, bool) {
	t := c.transport()
	if t == nil {
		return nil, false
	}
	if t.Proxy == nil {
		return nil, true
	}
	p, err := t.Proxy(&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}})
	return p, err == nil
}

// transport is the *http.Transport under the client's credentials, nil
// where it has another (its Proxy and TLS settings unknown).
func (c *Client) transport() *http.Transport {
	if at, ok := c.http.Transport.(*authTransport); ok {
		t, _ := at.inner.(*http.Transport)
		return t
	}
	return nil
}

// proxyName is "the proxy" and, where the transport says which, its URL
// (redacted) for a request to rawURL.
func (c *Client) proxyName(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		if p, _ := c.proxyFor(u); p != nil {
			return "the proxy " + Redact(p.String())
		}
	}
	return "the proxy"
}

// viaProxy reports whether err is a failure to reach the proxy itself
// (Go's transport says "proxyconnect"): its host does not exist, or
// nothing accepts connections there. It was said of the index's host.
func viaProxy(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "proxyconnect"
}

// tlsProbeTimeout bounds speaksTLS's handshake: a TLS server answers a
// ClientHello at once, a plain one may wait for a line that never comes.
const tlsProbeTimeout = 5 * time.Second

// speaksTLS reports whether u's host:port answers a TLS handshake (one it
// completes, or one whose certificate or alert is TLS's). Nothing is sent
// after the handshake.
func (c *Client) speaksTLS(ctx context.Context, u *url.URL) bool {
	cfg := &tls.Config{}
	if t := c.transport(); t != nil && t.TLSClientConfig != nil {
		cfg = t.TLSClientConfig.Clone()
	}
	cfg.ServerName = u.Hostname()
	ctx, cancel := context.WithTimeout(ctx, tlsProbeTimeout)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", hostPort(u))
	if err == nil {
		conn.Close()
		return true
	}
	var cv *tls.CertificateVerificationError
	var oe *net.OpError
	return errors.As(err, &cv) || (errors.As(err, &oe) && oe.Op == "remote error")
}

// alertReadTimeout bounds how long alertAfterReset waits for a server's
// alert once the handshake is done: one that refuses the client sends it
// at once; one that accepts it waits for a request that never comes.
const alertReadTimeout = time.Second

// alertAfterReset is the TLS alert with which u's server refuses this
// client after the handshake (nil when there is none), asked for when err,
// the failure of a request to u, is a reset: a TLS 1.3 server that
// requires a client certificate refuses it only after the client's side
// of the handshake is done, and a request written meanwhile can meet the
// reset of the server's close before the alert is read. It was retried as
// a reset (python's ssl server: about one fetch in seven), and where every
// attempt met it, the refusal said "check the index and retry". The port
// is asked again directly, sending nothing after the handshake, so the
// server closes with nothing unread and its alert arrives.
func (c *Client) alertAfterReset(ctx context.Context, u *url.URL, err error) error {
	if u.Scheme != "https" || !(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) || !c.direct(u) {
		return nil
	}
	cfg := &tls.Config{}
	if t := c.transport(); t != nil && t.TLSClientConfig != nil {
		cfg = t.TLSClientConfig.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	ctx, cancel := context.WithTimeout(ctx, tlsProbeTimeout)
	defer cancel()
	conn, derr := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", hostPort(u))
	if derr != nil {
		if _, ok := handshakeAlert(derr); ok {
			return derr
		}
		return nil
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(alertReadTimeout))
	_, rerr := conn.Read(make([]byte, 1))
	if _, ok := handshakeAlert(rerr); ok {
		return rerr
	}
	return nil
}

// Open starts the download of a file a page listed, following redirects
// only within the index or to the listed URL itself (index_not_pinned
// otherwise). It returns the body and the length the server declared (-1
// when it declared none). Errors carry redacted URLs; Retryable tells
// which are worth another attempt.
func (c *Client) Open(ctx context.Context, f File) (io.ReadCloser, int64, error) {
	listed, err := url.Parse(f.URL)
	if err != nil || (listed.Scheme != "http" && listed.Scheme != "https") || listed.Host == "" {
		return nil, 0, refusal.New(refusal.FetchFailed, "index %s lists %s at %s, not an http(s) URL; fix the index", c.BaseURL(), f.Filename, Redact(f.URL))
	}
	resp, b, err := c.get(ctx, f.URL, listed, "")
	if err != nil {
		if r := c.accessRefused(err, f.Filename); r != nil {
			return nil, 0, r
		}
		if r := c.trustRefused(err, f.Filename); r != nil {
			return nil, 0, r
		}
		if r := c.proxyRefused(err, f.Filename); r != nil {
			return nil, 0, r
		}
		var se *StatusError
		if errors.As(err, &se) && (se.StatusCode == http.StatusNotFound || se.StatusCode == http.StatusGone) {
			// It said only "GET …: HTTP 404 Not Found".
			return nil, 0, refusal.Wrap(refusal.FetchFailed, err, "%s: the index %s lists it at %s, which is not there (HTTP %d); the index links a file it does not serve: fix the index, or pin one that serves it",
				f.Filename, c.BaseURL(), Redact(f.URL), se.StatusCode)
		}
		if se != nil && !Retryable(err) {
			// A 400, 405: it said only "GET …: HTTP 405 Method Not Allowed".
			return nil, 0, refusal.Wrap(refusal.FetchFailed, err, "%s: the index %s lists it at %s, which would not serve it (HTTP %d); fix the index, or pin one that serves it",
				f.Filename, c.BaseURL(), Redact(f.URL), se.StatusCode)
		}
		if dns := noSuchHost(err); dns != nil {
			if viaProxy(err) {
				return nil, 0, refusal.Wrap(refusal.FetchFailed, err, "%s: %s: its host %s does not exist (no such host); check the proxy's URL, or reach the index %s without it",
					f.Filename, c.proxyName(f.URL), dns.Name, c.BaseURL())
			}
			// It said only "… from URL: … no such host".
			return nil, 0, refusal.Wrap(refusal.FetchFailed, err, "%s: the index %s lists it at %s, whose host %s does not exist (no such host); fix the index's links, or pin an index that serves it",
				f.Filename, c.BaseURL(), Redact(f.URL), dns.Name)
		}
		return nil, 0, err
	}
	return b, resp.ContentLength, nil
}

// accessRefused is the refusal of a 401 or 403 answer for what (nil for
// any other error). It says where the credentials sent came from (the
// index URL, the netrc file, the caller) and what to correct there; where
// none were sent, why: the netrc file that could not be read, or that
// holds no entry for the host. It said "netrc or the environment" of a
// password in the index URL, and named no netrc file.
func (c *Client) accessRefused(err error, what string) *refusal.Error {
	var se *StatusError
	if !errors.As(err, &se) || (se.StatusCode != http.StatusUnauthorized && se.StatusCode != http.StatusForbidden) {
		return nil
	}
	host := se.host()
	if cr := c.credentialFor(host); cr != nil && c.base.Scheme == "https" && strings.HasPrefix(se.URL, "http:") {
		// Held back (authTransport), not refused: said so, not "wrong".
		return refusal.Wrap(refusal.FetchFailed, err, "%s: the index %s lists it at %s, plain http on a host it has credentials for; they are never sent without TLS from an https index, so none were: fix the index to list https URLs",
			what, c.BaseURL(), se.URL)
	}
	if cr := c.credentialFor(host); cr != nil {
		return c.credentialRefused(err, what, host, cr, se.StatusCode)
	}
	if c.netrcErr != nil {
		return refusal.Wrap(refusal.FetchFailed, err, "%s: the index %s refused access, and the netrc file %s could not be read (%v), so its credentials were not sent; make it readable by this user or give the credentials another way",
			what, c.BaseURL(), c.opts.Netrc, unwrapPath(c.netrcErr)).WithRemedy(refusal.ActionNameNetrc, c.opts.Netrc)
	}
	if host != "" {
		// None was sent: the netrc read holds no entry for the host (a
		// broken one reads as none), or there was none to read. Said so,
		// with what to do: it said "check the credentials", as if some
		// had been refused.
		from := "no netrc file was read"
		switch {
		case c.netrcMissing:
			// It said the missing file "has no machine entry for it".
			from = "the netrc file " + c.opts.Netrc + " does not exist"
		case c.opts.Netrc != "":
			from = "the netrc file " + c.opts.Netrc + " has no machine entry for it with a login or password (or does not parse as one)"
		}
		return refusal.Wrap(refusal.FetchFailed, err, "%s: the index %s refused access, and no credentials for its host %s were sent: the index URL names none, and %s; give the credentials for that host (a netrc machine entry, see docs/index.md)",
			what, c.BaseURL(), host, from).WithRemedy(refusal.ActionNameNetrc, c.opts.Netrc)
	}
	return refusal.Wrap(refusal.FetchFailed, err, "%s: the index %s refused access; check the credentials for its host (the index URL, netrc or the caller's, see docs/index.md)", what, c.BaseURL())
}

// credentialRefused is the refusal of a 401 or 403 (status) answer to the
// credential cr, sent to host, for what: it names where cr came from and
// what to correct there, never the user or password.
func (c *Client) credentialRefused(err error, what, host string, cr *Credential, status int) *refusal.Error {
	refused := "refused them (HTTP 401): they are wrong"
	if status == http.StatusForbidden {
		refused = "refused access with them (HTTP 403): they are wrong, or that user may not read it"
	}
	switch cr.src {
	case credURL:
		sent := "the user and password"
		if cr.Password == "" {
			sent = "the user (a token)"
		}
		return refusal.Wrap(refusal.FetchFailed, err, "%s: the index %s was sent %s the index URL gives for %s, and %s; give the right ones in the index URL (or none there, to use a netrc entry)",
			what, c.BaseURL(), sent, host, refused).WithRemedy(refusal.ActionIndexCredentials, "")
	case credNetrc:
		return refusal.Wrap(refusal.FetchFailed, err, "%s: the index %s was sent the login and password of the machine %s entry of the netrc file %s, and %s; correct that entry, or name a netrc file that holds the right ones",
			what, c.BaseURL(), cr.Host, c.opts.Netrc, refused).WithRemedy(refusal.ActionNameNetrc, c.opts.Netrc)
	}
	from := cr.From
	if from == "" {
		from = "the caller"
	}
	return refusal.Wrap(refusal.FetchFailed, err, "%s: the index %s was sent the credentials for %s from %s, and %s; correct them there",
		what, c.BaseURL(), host, from, refused)
}

// proxyRefused is the refusal of a proxy's refusal for what (nil for
// any other error): a 407, the proxy's own or the answer to its tunnel's
// CONNECT, wants the proxy's credentials; another CONNECT answer below
// 500 is the proxy's refusal to reach the host. Each was retried as a
// transport failure, or said nothing of what to do.
func (c *Client) proxyRefused(err error, what string) *refusal.Error {
	var pe *ProxyError
	var se *StatusError
	proxy := "the proxy"
	switch {
	case errors.As(err, &pe):
		proxy += " " + pe.Proxy
		if pe.StatusCode == http.StatusProxyAuthRequired {
			break
		}
		if pe.StatusCode >= 500 || pe.StatusCode == http.StatusTooManyRequests {
			return nil
		}
		return refusal.Wrap(refusal.FetchFailed, err, "%s: %s would not connect to the host (index %s); have the proxy allow that host, or reach it without the proxy",
			what, proxy, c.BaseURL())
	case errors.As(err, &se) && se.StatusCode == http.StatusProxyAuthRequired:
		// A plain http request's 407 is the proxy's answer: named, as
		// the CONNECT's is (it said only "the proxy").
		proxy = c.proxyName(se.URL)
	default:
		return nil
	}
	return refusal.Wrap(refusal.FetchFailed, err, "%s: %s asks for credentials (HTTP 407) and refused those it was given, if any (index %s); give the proxy's user and password in the proxy's URL (http://USER:PASSWORD@HOST:PORT)",
		what, proxy, c.BaseURL())
}

// trustRefused is the refusal of a TLS failure to trust the certificate
// of the server that answered for what (nil for any other error): it says
// which host presented it and what would make it trusted. It was
// fetch_failed "cannot read its page…: x509: certificate signed by
// unknown authority", which said nothing of what to do.
func (c *Client) trustRefused(err error, what string) *refusal.Error {
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	host := "the index's host"
	var re *RequestError
	if errors.As(err, &re) {
		if u, perr := url.Parse(re.URL); perr == nil && u.Host != "" {
			host = u.Host
		}
		if viaProxy(err) {
			// An https:// proxy's certificate: it named the index's host.
			host = c.proxyName(re.URL)
		}
	}
	switch {
	case errors.As(err, &ua):
		return refusal.Wrap(refusal.FetchFailed, err, "%s: the certificate %s presented (index %s) is signed by an authority this host does not trust; trust the CA that signed it, its PEM certificate, besides the system pool",
			what, host, c.BaseURL()).WithRemedy(refusal.ActionCABundle, "")
	case errors.As(err, &he):
		return refusal.Wrap(refusal.FetchFailed, err, "%s: the certificate %s presented (index %s) is not for that name; pin the index by a name its certificate holds, or have the certificate reissued for this one",
			what, host, c.BaseURL())
	case errors.As(err, &ci):
		return refusal.Wrap(refusal.FetchFailed, err, "%s: the certificate %s presented (index %s) is not valid (expired, not valid yet, or not for a server); have it renewed, or check this host's clock",
			what, host, c.BaseURL())
	}
	// The server's own refusal of the handshake: it was retried four
	// times, then "check the index and retry".
	switch a, _ := handshakeAlert(err); a {
	case alertCertificateRequired:
		return refusal.Wrap(refusal.FetchFailed, err, "%s: %s asks for a TLS client certificate (index %s), which this client does not present; have the server not require one for the index, or reach it through a proxy that presents it",
			what, host, c.BaseURL())
	case alertHandshakeFailure, alertProtocolVersion, alertInsufficientSecurity:
		return refusal.Wrap(refusal.FetchFailed, err, "%s: %s and this client share no TLS version and cipher suite (TLS 1.2 or later is required; index %s); have the server's TLS configuration updated",
			what, host, c.BaseURL())
	case alertUnrecognizedName:
		return refusal.Wrap(refusal.FetchFailed, err, "%s: %s serves no TLS certificate for that name (index %s); pin the index by a name the server serves",
			what, host, c.BaseURL())
	}
	return nil
}

// The TLS alerts a server refuses a handshake with that a retry does not
// mend (RFC 8446 §6).
const (
	alertHandshakeFailure     tls.AlertError = 40
	alertProtocolVersion      tls.AlertError = 70
	alertInsufficientSecurity tls.AlertError = 71
	alertUnrecognizedName     tls.AlertError = 112
	alertCertificateRequired  tls.AlertError = 116
)

// handshakeAlert is the alert, one of those above, that the server
// answered the handshake with, and whether err is one. crypto/tls
// reports a received alert as a *net.OpError "remote error" whose Err is
// an unexported type that says the same as tls.AlertError.
func handshakeAlert(err error) (tls.AlertError, bool) {
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "remote error" || oe.Err == nil {
		return 0, false
	}
	for _, a := range []tls.AlertError{alertHandshakeFailure, alertProtocolVersion, alertInsufficientSecurity, alertUnrecognizedName, alertCertificateRequired} {
		if oe.Err.Error() == a.Error() {
			return a, true
		}
	}
	return 0, false
}

// credentialFor is the credential the client sends to host (host:port
// or a host name), as its transport matches one, or nil.
func (c *Client) credentialFor(host string) *Credential {
	if host == "" {
		return nil
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	for i, cr := range c.creds {
		if strings.EqualFold(cr.Host, host) || strings.EqualFold(cr.Host, name) {
			return &c.creds[i]
		}
	}
	return nil
}

// host is the host (host:port) of the URL e answers, "" where it does
// not parse.
func (e *StatusError) host() string {
	u, err := url.Parse(e.URL)
	if err != nil {
		return ""
	}
	return u.Host
}

// unwrapPath drops the path a *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// maxPage bounds a project page (PyPI's largest are a few MB).
const maxPage = 64 << 20

// Project fetches and parses a project's page, retrying transient
// failures. A project the index does not have is fetch_failed; a page that
// is neither a PEP 691 JSON page nor a PEP 503 HTML page is fetch_failed.
func (c *Client) Project(ctx context.Context, name string) (*Project, error) {
	pageURL := c.ProjectURL(name)
	var last error
	delay := c.opts.Backoff
	for attempt := 1; attempt <= c.opts.Attempts; attempt++ {
		p, err := c.project(ctx, name, pageURL)
		if err == nil {
			return p, nil
		}
		if !Retryable(err) || ctx.Err() != nil {
			return nil, c.pageRefusal(name, err)
		}
		last = err
		if attempt < c.opts.Attempts {
			wait := RetryDelay(err, delay)
			c.opts.Events(Event{Kind: EventRetry, URL: Redact(pageURL), Attempt: attempt, Attempts: c.opts.Attempts, Wait: wait, Err: err})
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
			delay *= 2
		}
	}
	return nil, c.GaveUp("project "+pep503.Normalize(name), pageURL, c.opts.Attempts, last)
}

func (c *Client) pageRefusal(name string, err error) error {
	if refusal.CodeOf(err) != "" || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *StatusError
	if errors.As(err, &se) && (se.StatusCode == http.StatusNotFound || se.StatusCode == http.StatusGone) {
		if !strings.HasSuffix(c.base.Path, "/simple/") {
			// An index URL without its /simple/ (the server's root, or
			// the files' directory) 404s every project: it said only
			// "mirror it there or pin another index".
			return refusal.Wrap(refusal.FetchFailed, err, "project %s is not on the index %s; an index URL is the index's simple API, which usually ends in /simple/ (e.g. https://pypi.org/simple/): check the index URL, else mirror the project there or pin another index",
				pep503.Normalize(name), c.BaseURL())
		}
		return refusal.Wrap(refusal.FetchFailed, err, "project %s is not on the index %s; mirror it there or pin another index", pep503.Normalize(name), c.BaseURL())
	}
	if r := c.accessRefused(err, "project "+pep503.Normalize(name)); r != nil {
		return r
	}
	if r := c.trustRefused(err, "project "+pep503.Normalize(name)); r != nil {
		return r
	}
	if r := c.proxyRefused(err, "project "+pep503.Normalize(name)); r != nil {
		return r
	}
	if dns := noSuchHost(err); dns != nil {
		if viaProxy(err) {
			// It said the index's host did not exist.
			return refusal.Wrap(refusal.FetchFailed, err, "%s: its host %s does not exist (no such host); check the proxy's URL, or reach the index %s without it", c.proxyName(c.ProjectURL(name)), dns.Name, c.BaseURL())
		}
		return refusal.Wrap(refusal.FetchFailed, err, "the index %s: its host %s does not exist (no such host); check the index URL", c.BaseURL(), dns.Name)
	}
	// Another answer a retry does not mend (a 400, 405): it said "cannot
	// read its page", and nothing of what to do.
	return refusal.Wrap(refusal.FetchFailed, err, "project %s: the index %s would not serve its page; check the index URL (the index's simple API, e.g. https://pypi.org/simple/) and the index", pep503.Normalize(name), c.BaseURL())
}

// GaveUp is the refusal of what (a page, a download), whose request of
// rawURL failed attempts times, the last with err: a proxy that could not
// be reached, or a host where nothing accepts connections, is said so,
// with what to check; it said "check the index and retry" of both. Other
// failures are said so. A caller that retries a download of its own
// (fetch, pipeline.FetchRoot) ends with it, as Project does.
func (c *Client) GaveUp(what, rawURL string, attempts int, err error) *refusal.Error {
	u, perr := url.Parse(rawURL)
	switch {
	case viaProxy(err):
		return refusal.Wrap(refusal.FetchFailed, err, "%s: %s could not be reached, %d times (index %s); check the proxy's URL and that it is running, or reach the index without it",
			what, c.proxyName(rawURL), attempts, c.BaseURL())
	case errors.Is(err, syscall.ECONNREFUSED) && perr == nil:
		if hostPort(u) == hostPort(c.base) {
			return refusal.Wrap(refusal.FetchFailed, err, "%s: nothing accepts connections at %s, %d times (index %s); check the index URL's host and port, and that the index is serving there",
				what, u.Host, attempts, c.BaseURL())
		}
		return refusal.Wrap(refusal.FetchFailed, err, "%s: nothing accepts connections at %s, where the index %s lists it, %d times; check that host is serving, or fix the index's links",
			what, u.Host, c.BaseURL(), attempts)
	}
	return refusal.Wrap(refusal.FetchFailed, err, "%s: index %s failed %d times; check the index and retry", what, c.BaseURL(), attempts)
}

func (c *Client) project(ctx context.Context, name, pageURL string) (*Project, error) {
	resp, b, err := c.get(ctx, pageURL, nil, acceptHeader)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	final := resp.Request.URL
	red := Redact(final.String())
	if resp.ContentLength > maxPage {
		// Said before a byte is read: reading it first held up to
		// maxPage (times ReadAll's growth) per page for nothing.
		return nil, refusal.New(refusal.FetchFailed, "page %s declares %d bytes, more than a project page may have (%d); check the index URL", red, resp.ContentLength, maxPage)
	}
	// Memory grows with the bytes received, never with the length
	// declared (the transport holds the body to it, and one cut short is
	// an unexpected EOF): allocated up front, a page that declared 64 MiB
	// and sent a few bytes cost 64 MiB an attempt.
	data, err := io.ReadAll(io.LimitReader(b, maxPage+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxPage {
		return nil, refusal.New(refusal.FetchFailed, "page %s is larger than %d bytes, more than a project page may have; check the index URL", red, maxPage)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var files []File
	switch ct {
	case ContentTypeJSON:
		files, err = parseJSON(final, data)
	case ContentTypeHTML, ContentTypeLegacyHTML:
		files, err = parseHTML(final, data)
	default:
		return nil, refusal.New(refusal.FetchFailed, "page %s has content type %q, neither PEP 691 JSON nor HTML; check the index URL", red, resp.Header.Get("Content-Type"))
	}
	if err != nil {
		// It named no next step.
		return nil, refusal.Wrap(refusal.FetchFailed, err, "page %s is not a valid project page; check the index URL, and fix the index or pin one that serves PEP 503 or PEP 691 pages", red)
	}
	return &Project{Name: pep503.Normalize(name), URL: red, Files: files}, nil
}

// Redact returns u with any password replaced by "xxxxx" (a user field with
// no password, or an empty one, is taken for a token and replaced) and any query or
// fragment replaced by "REDACTED" (signed URLs carry tokens there). A
// string that does not parse as a URL is returned as "<unparseable URL>",
// one with an "@" that does not end its user field (no //host, or a
// password with an unescaped "/", "?", "#" or "@") as "<malformed URL>".
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "<unparseable URL>"
	}
	if p.User != nil {
		if pw, has := p.User.Password(); has && pw != "" {
			p.User = url.UserPassword(p.User.Username(), "xxxxx")
		} else {
			// A lone token in the user field, or one before an empty
			// password (https://TOKEN:@host/).
			p.User = url.User("xxxxx")
		}
	}
	if p.RawQuery != "" {
		p.RawQuery = "REDACTED"
	}
	if p.Fragment != "" {
		p.Fragment, p.RawFragment = "REDACTED", ""
	}
	if n := strings.Count(u, "@"); n > 1 || n == 1 && p.User == nil {
		// An @ that is not the user field's end: with no //host (a
		// missing or short scheme separator) a user:password@ sits in
		// the opaque part or the path; a password with an unescaped /
		// ? or # ends the authority inside it, so its first part reads
		// as the host (or a port) and the rest as the path, query or
		// fragment; a password with an unescaped @ leaves its first
		// part in the user field and the rest as the host.
		return "<malformed URL>"
	}
	return p.String()
}
