// Package index owns access to a pinned Python package index (DESIGN §4,
// §12, §14): reading a project's page in the PEP 503 HTML form or the
// PEP 691 JSON form (chosen by content negotiation), with hash fragments,
// data-requires-python, data-yanked and the PEP 658/714 metadata
// attributes; opening the files a page lists while refusing any redirect
// that leaves the index (index_not_pinned); and building a static PEP
// 503/691 tree that any web server or bucket can serve (Build).
//
// The Client is given its HTTP transport, TLS roots, proxies and
// credentials as data by its caller: it reads no environment variables and
// no files other than those Build is pointed at and the netrc file its
// caller names (Options.Netrc; one it cannot read is a warning, not an
// error, until the index asks for credentials). It never prints: warnings
// and page retries go to Options.Events. URLs carrying credentials are
// redacted in every error and event (Redact).
//
// It does not decide which wheel a lock needs (lockfile/ does), check the
// bytes of a download (fetch/ and store/ do), retry downloads (fetch/
// does; Project retries its own page fetches), or store anything.
package index
