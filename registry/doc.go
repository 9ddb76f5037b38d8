// Package registry owns governance (DESIGN §8): registered interfaces,
// change-sets, trusted signer keys with their roles, the approval policy,
// accepted pins with their revisions and approvals, the hash-chained
// history of every mutation, and each verifier's floor kept outside the
// registry. It implements the rules once (state.go) for two Registry
// implementations: Stub, in memory, and Dir, files under a directory.
//
// The rules: the first key trusted in an empty registry is the root of
// trust (an approver); every later trust-key, untrust-key or set-policy
// is itself a change-set. A change-set holds exactly one change; its id
// is the digest of its spec (SpecDigest); its base is the accepted pin it
// replaces (or the trust state) and its revision the base's + 1.
// Approvals sign ApprovalPayload; only trusted approver keys count,
// distinct by key digest; at the policy's threshold the change is
// accepted atomically. VerifyPin is the pin half of verify.
//
// File formats, the history chain and what each refusal means are in
// docs/governance.md. This package does not build change-sets from
// wheels (install does), check envs against pins (verify does), hold
// private keys (package sign), print, or read the environment.
package registry
