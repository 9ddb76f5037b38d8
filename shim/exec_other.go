//go:build !unix

package shim

// Exec refuses everywhere but Unix: there is no exec(2) to hand the process
// to CMD. See the Unix version for the contract.
func Exec(argv, env []string) error {
	if _, ok := parseArgs(argv[min(1, len(argv)):]); !ok || len(argv) == 0 {
		return refuse(codeUsage)
	}
	return refuse(codeExecFailed)
}
