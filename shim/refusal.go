package shim

import (
	"slices"
	"strings"
)

// ExitRefused is the exit status of every shim refusal. The harness never
// exits 78, so an executor tells "the shim refused" apart from a crashed child.
const ExitRefused = 78

// The closed set of shim refusal codes (docs/shim.md says what raises each).
// They are the shim's own, printed as "shim_refused: <code>", not codes of
// package refusal: the shim runs before there is a run to refuse.
const (
	codeUsage            = "usage"
	codePathUnverifiable = "secret_path_unverifiable"
	codePathNotMemory    = "secret_path_not_memory"
	codePathNotRegular   = "secret_path_not_regular"
	codePathLinked       = "secret_path_linked"
	codePathUnlinkFailed = "secret_path_unlink_failed"
	codeTooLarge         = "secret_too_large"
	codePipeTimeout      = "secret_pipe_timeout"
	codeReadFailed       = "secret_read_failed"
	codeExecFailed       = "exec_failed"
)

// codes lists every code, for the test that holds docs/shim.md to the set.
var codes = []string{codeUsage, codePathUnverifiable, codePathNotMemory, codePathNotRegular,
	codePathLinked, codePathUnlinkFailed, codeTooLarge, codePipeTimeout, codeReadFailed, codeExecFailed}

// RefusedError is why the shim did not exec the command. Code is one of the closed
// set in docs/shim.md; Error returns the exact line cruxshim prints on stderr,
// without the newline.
type RefusedError struct {
	Code string
}

func (r *RefusedError) Error() string { return "shim_refused: " + r.Code }

func refuse(code string) *RefusedError { return &RefusedError{Code: code} }

// ParseRefused reports the code of a shim refusal, given everything a run
// wrote on stderr: exactly one line "shim_refused: <code>" with a code of
// the closed set, and nothing else (what the shim writes when it refuses;
// a child's output around it, a code outside the set, is not one). An
// executor that also sees the exit status ExitRefused and nothing on
// stdout records the shim's refusal, not the child's failure; a child
// that writes that line alone and exits 78 reads the same.
func ParseRefused(stderr []byte) (string, bool) {
	s := string(stderr)
	line, ok := strings.CutSuffix(s, "\n")
	if !ok || strings.Contains(line, "\n") {
		return "", false
	}
	code, ok := strings.CutPrefix(line, "shim_refused: ")
	if !ok || !slices.Contains(codes, code) {
		return "", false
	}
	return code, true
}
