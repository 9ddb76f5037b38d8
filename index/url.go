package index

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
)

// URLError is an index URL that is not one: what is wrong with it, in
// words that say how to write it instead.
type URLError struct {
	URL     string // redacted (Redact)
	Problem string // one line, e.g. "it has no host"
}

// Error is "index URL <URL>: <Problem>".
func (e *URLError) Error() string { return "index URL " + e.URL + ": " + e.Problem }

// ParseURL parses rawURL as an index's base URL (New's): an absolute
// http or https URL with a host, a port in range, and no query or
// fragment. Anything else is a *URLError naming the first thing wrong:
// white space around it, no scheme (host:port/simple/ reads as the
// scheme "host"), one slash or none after http(s):, another scheme, a
// part that does not parse, an @ after a / ? # or @ (a password not
// percent-encoded), no host, a bad port, a query or a fragment. The URL's
// credentials, query and fragment are never in the error.
func ParseURL(rawURL string) (*url.URL, error) {
	shown := Redact(rawURL)
	if !strings.ContainsAny(rawURL, "@?#") {
		// No user information, query or fragment to hide: show it as
		// it was given (Redact shows what it parses as: https:// as
		// "https:", and nothing for a URL that does not parse),
		// quoted if it has a space or a character that does not print.
		shown = rawURL
		if q := strconv.Quote(rawURL); q[1:len(q)-1] != rawURL || rawURL == "" || strings.Contains(rawURL, " ") {
			shown = q
		}
	}
	bad := func(problem string) error { return &URLError{URL: shown, Problem: problem} }
	if rawURL == "" {
		return nil, bad("it is empty: give the index's simple API, e.g. https://pypi.org/simple/")
	}
	if strings.TrimSpace(rawURL) != rawURL {
		return nil, bad("it begins or ends with white space: remove it")
	}
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok || !isScheme(scheme) || (!strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") && !strings.HasPrefix(rest, "/")) {
		// host/simple/, //host/simple/, 127.0.0.1:8080/simple/,
		// host:8080/simple/ and user:password@host/simple/ (the last
		// two parse as the schemes "host" and "user").
		return nil, bad("it has no scheme: begin it with https:// or http://")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return nil, bad("its scheme, " + scheme + ", is not http or https: an index is read over https or http")
	}
	if !strings.HasPrefix(rest, "//") {
		slashes := "no slash"
		if strings.HasPrefix(rest, "/") {
			slashes = "one slash"
		}
		fix := scheme + "://HOST/…"
		if r := Redact(scheme + "://" + strings.TrimLeft(rest, "/")); !strings.HasPrefix(r, "<") {
			fix = r
		}
		return nil, bad(scheme + ": is followed by " + slashes + ", not two: write " + fix)
	}
	// An @ after the authority's end: a password holding a / ? or #
	// that is not percent-encoded ends the authority inside the
	// password, so the parser would read part of it as the host (or a
	// port) and the rest as the path, and show both; one holding an @
	// leaves where the user field ends a guess. Neither the message nor
	// the URL shown may hold any of it: only what follows the last @.
	authority := rest[2:]
	if at := strings.LastIndex(authority, "@"); at >= 0 && strings.ContainsAny(authority[:at], "/?#@") {
		return nil, &URLError{URL: scheme + "://…@" + afterCredentials(authority[at+1:]),
			Problem: "it has an @ after a /, ?, # or another @: write a password's / ? # @ and spaces percent-encoded (%2F %3F %23 %40 %20); an index URL's path has no @"}
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var ee url.EscapeError
		if errors.As(err, &ee) {
			return nil, bad("it has a % not followed by two hex digits (a % itself is written %25)")
		}
		msg := err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			msg = ue.Err.Error()
		}
		return nil, bad("it does not parse: " + strings.TrimPrefix(msg, "net/url: "))
	}
	if u.Host == "" {
		return nil, bad("it has no host: write " + scheme + "://HOST/… or " + scheme + "://HOST:PORT/…")
	}
	if u.Hostname() == "" {
		return nil, bad("it has a port and no host: write " + scheme + "://HOST:PORT/…")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, bad("its port " + p + " is not a port number (1 to 65535)")
		}
	}
	if u.RawQuery != "" || u.ForceQuery {
		return nil, bad("it has a query (a ? and what follows): an index URL has none, remove it")
	}
	if u.Fragment != "" {
		return nil, bad("it has a fragment (a # and what follows): an index URL has none, remove it")
	}
	return u, nil
}

// afterCredentials is what follows a URL's last @, shown quoted when it
// has a space or a character that does not print, without a query or
// fragment.
func afterCredentials(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i] + "…"
	}
	if q := strconv.Quote(s); q[1:len(q)-1] != s || strings.Contains(s, " ") {
		return q
	}
	return s
}

// isScheme reports whether s has the form of a URL scheme (RFC 3986
// §3.1): a letter, then letters, digits, "+", "-" or ".".
func isScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}
