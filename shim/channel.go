package shim

import "sort"

// SecretFD is the descriptor the secret bundle lands on in the child: the
// first above the standard streams, out of reach of a harness that duplicates
// stdout onto the lowest free number. Executors take it from here (or from
// SecretChannel), never from a literal.
const SecretFD = 3

// ProtocolFD is the first descriptor an executor hands a harness its
// protocol channel on, when the runtime takes it from a variable
// (--protocol-fd-env; the subprocess executor uses it as is): the one
// after SecretFD, so that fd 3 means the secret, or nothing, to every
// runtime.
const ProtocolFD = SecretFD + 1

// Channel is the protocol's secret_channel: the descriptor the bundle is on
// and the refs it holds, sorted. It marshals as {"fd":3,"refs":[...]}.
type Channel struct {
	FD   int      `json:"fd"`
	Refs []string `json:"refs"`
}

// SecretChannel returns the secret_channel spec for a bundle holding refs: the
// fixed SecretFD and a sorted copy of refs with duplicates dropped (the bundle
// is a JSON object, so its keys are unique anyway). With no refs there is no
// bundle: it returns nil, which marshals as null, and fd 3 is not opened.
func SecretChannel(refs []string) *Channel {
	if len(refs) == 0 {
		return nil
	}
	s := append([]string(nil), refs...)
	sort.Strings(s)
	out := s[:1]
	for _, r := range s[1:] {
		if r != out[len(out)-1] {
			out = append(out, r)
		}
	}
	return &Channel{FD: SecretFD, Refs: out}
}
