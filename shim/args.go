package shim

import (
	"strconv"
	"strings"
	"time"
)

// DefaultPipeTimeout bounds the whole pipe drain unless --secret-pipe-timeout
// says otherwise; nothing else (no environment variable) moves it.
const DefaultPipeTimeout = 5 * time.Second

// maxPipeTimeout caps --secret-pipe-timeout: a run that hangs spends the wall
// clock of a run that never started, so a day is already far too generous.
const maxPipeTimeout = 24 * time.Hour

type mode int

const (
	modeNone mode = iota // no secret flag: exec CMD, write nothing
	modePath             // --secret-path
	modePipe             // --secret-pipe-fd
)

// options is the parsed argv of cruxshim.
type options struct {
	mode    mode
	path    string
	pipeFD  int
	timeout time.Duration
	// protoVar, when set (--protocol-fd-env), names the variable through
	// which CMD learns the descriptor its protocol channel, fd 1 as the
	// shim got it, was moved to (moveChannel).
	protoVar string
	argv     []string // CMD and its ARGS, exec'd as given
}

// parseArgs parses cruxshim's argv (without the program name) by hand, so
// nothing can print. Grammar:
//
//	[--secret-path P | --secret-pipe-fd N] [--secret-pipe-timeout SECONDS] [--protocol-fd-env NAME] [--] CMD ARGS...
//
// Each flag takes its value as the next argument or after "=". The first
// argument that is not a flag (or everything after "--") is CMD; later
// arguments belong to CMD. Anything else is a usage refusal: an unknown flag,
// a flag given twice, both secret flags, a missing or empty value, a
// descriptor that is not a decimal number of at least 3 (0, 1 and 2 are the
// child's streams), a timeout that is not a positive decimal number of
// seconds of at most a day (or given without --secret-pipe-fd), a NAME
// that is not a variable name ([A-Z_][A-Z0-9_]*), no CMD.
func parseArgs(args []string) (options, bool) {
	o := options{timeout: DefaultPipeTimeout}
	var havePath, haveFD, haveTimeout bool
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") {
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		if !hasVal {
			if i+1 >= len(args) {
				return options{}, false
			}
			val = args[i+1]
			i++
		}
		i++
		switch name {
		case "--secret-path":
			if havePath || val == "" || strings.IndexByte(val, 0) >= 0 {
				return options{}, false
			}
			havePath, o.path = true, val
		case "--secret-pipe-fd":
			fd, ok := parseFD(val)
			if haveFD || !ok {
				return options{}, false
			}
			haveFD, o.pipeFD = true, fd
		case "--secret-pipe-timeout":
			d, ok := parseSeconds(val)
			if haveTimeout || !ok {
				return options{}, false
			}
			haveTimeout, o.timeout = true, d
		case "--protocol-fd-env":
			if o.protoVar != "" || !varName(val) {
				return options{}, false
			}
			o.protoVar = val
		default:
			return options{}, false
		}
	}
	if i >= len(args) || args[i] == "" {
		return options{}, false
	}
	o.argv = args[i:]
	switch {
	case havePath && haveFD:
		return options{}, false
	case haveTimeout && !haveFD:
		return options{}, false
	case havePath:
		o.mode = modePath
	case haveFD:
		o.mode = modePipe
	}
	return o, true
}

// parseFD accepts a decimal descriptor number from 3 up.
func parseFD(s string) (int, bool) {
	if s == "" || len(s) > 10 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 3 {
		return 0, false
	}
	return int(n), true
}

// parseSeconds accepts SECONDS as digits with an optional fraction of up to
// nine digits ("1", "0.25"): positive and at most maxPipeTimeout.
func parseSeconds(s string) (time.Duration, bool) {
	whole, frac, hasFrac := strings.Cut(s, ".")
	if whole == "" || len(whole) > 6 || strings.Trim(whole, "0123456789") != "" {
		return 0, false
	}
	if hasFrac && (frac == "" || len(frac) > 9 || strings.Trim(frac, "0123456789") != "") {
		return 0, false
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, false
	}
	var ns int64
	if hasFrac {
		f, err := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		if err != nil {
			return 0, false
		}
		ns = f
	}
	d := time.Duration(w)*time.Second + time.Duration(ns)
	if d <= 0 || d > maxPipeTimeout {
		return 0, false
	}
	return d, true
}

// varName accepts an environment variable's name: [A-Z_][A-Z0-9_]*, at
// most 64 bytes.
func varName(s string) bool {
	if s == "" || len(s) > 64 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	return strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == ""
}
