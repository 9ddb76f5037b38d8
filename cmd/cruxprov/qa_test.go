package main

// Adversarial tests of the command line as scripts and CI drive it: every
// test here reproduced a defect before its fix.

import (
	"strings"
	"testing"
)

// TestQAFlagWithoutValueAtEnd: a flag that takes a value, given last, must
// be a usage error; it used to swallow the reordered "--" or the command
// name ("version --home" printed the top-level help and exited 0, "index
// build X --from" read a directory named "--").
func TestQAFlagWithoutValueAtEnd(t *testing.T) {
	for _, args := range [][]string{
		{"version", "--home"},
		{"index", "build", "out", "--from"},
		{"inspect", "x.whl", "--home"},
		{"env", "verify", "x", "--jobs"},
		{"platform", "show", "host", "--python"},
	} {
		r := cruxprov(t, args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

// TestQAHelpBeforePositional: "inspect --help W" shows inspect's help; it
// used to exit 1 with "No help topic for 'W'".
func TestQAHelpBeforePositional(t *testing.T) {
	for _, args := range [][]string{{"inspect", "--help", "x.whl"}, {"env", "verify", "-h", "x"}, {"inspect", "x.whl", "--help"}} {
		r := cruxprov(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Example") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}
