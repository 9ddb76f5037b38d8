// Package refusal owns the typed refusals of cruxprov: the closed set of
// machine-readable codes of DESIGN §2 and the Error that carries one.
//
// Every unexpected condition on the pipeline, verify and run paths is
// reported as a *Error. Callers test for a code with errors.Is against a
// Code value, or errors.As to a *Error; never by comparing strings.
// This package does not print, map codes to exit statuses (cmd/ does), or
// know which component raised a code.
package refusal

import (
	"errors"
	"fmt"
)

// Error is a refusal: a code from the closed set, a one-line human detail,
// and the cause it wraps (may be nil).
type Error struct {
	Code   Code
	Detail string
	Err    error
}

// New returns a refusal with a formatted detail and no cause.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Wrap returns a refusal with a formatted detail wrapping cause.
func Wrap(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...), Err: cause}
}

// Error renders "<code>: <detail>[: <cause>]".
func (e *Error) Error() string {
	s := string(e.Code) + ": " + e.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the wrapped cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is this refusal's Code, or a *Error with the
// same Code (a *Error target with an empty Code matches any refusal).
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return e.Code == t
	case *Error:
		return t.Code == "" || t.Code == e.Code
	}
	return false
}

// CodeOf returns the code of the first refusal in err's chain, or "" when
// err carries none.
func CodeOf(err error) Code {
	var r *Error
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}
