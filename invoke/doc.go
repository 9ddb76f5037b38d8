// Package invoke owns running one provider entrypoint out of process
// (DESIGN §10): the Executor interface, the Call an executor is given and
// the Result it returns, and Subprocess, the local executor that spawns
// <env>/bin/python -I -m cruxible_provider_runtime.harness in a sealed
// env (python.Harness). For a runtime from python.HandoffVersion on
// (Call.Runtime, from the seal) the result channel is not fd 1: fd 1 is
// the stderr pipe from the interpreter's start and the channel is a pipe
// on ProtocolFD, named by python.ProtocolFDVar, so that the env's .pth
// files and sitecustomize, which site runs before the harness's first
// line, cannot write the result. An older runtime gets the channel on
// fd 1; docs/executor.md ("Start-up code") says more.
//
// One Run, in order: the Call's Verify hook (any error refuses: nothing is
// spawned); the harness module must be in the env (runtime_missing); the
// intent is written to the Ledger and awaited (a recorded ok outcome for
// the same idempotency key and input is returned as it was, replayed,
// without spawning); every secret ref the manifest declares is resolved
// fresh (secret_unresolved, secret_bundle_too_large); then the spawn: the
// environment replaced by an allowlist plus injected variables, a fresh
// empty working directory (0700) removed afterwards and given as TMPDIR
// unless the caller names one, the bundle on fd 3
// (shim.SecretFD) through an inherited pipe, every other descriptor of the
// executor's process marked close-on-exec first, the child in its own
// process group and, where the kernel allows it, its own user and pid
// namespace (so that SIGKILL to its first process ends every descendant,
// setsid() ones included), a hard timeout (SIGTERM to every process of the
// run, SIGKILL after a grace), and stdout plus stderr billed against one
// output_bytes budget (the run is killed when it is spent). The outcome is
// written to the Ledger with the same attempt id; the stderr tail it keeps
// is redacted of every bundle value (raw, JSON-escaped and Python repr
// forms) and never enters the Result.
//
// Budgets: the manifest's budgets are ceilings. A caller's budget lowers
// them and never raises them: the effective value is the smallest of the
// ones set (0 is unset); with neither set the executor's default applies.
//
// An executor that stays up sets Verify to a watch.Verifier's Verify around
// its full verify, so the check before a call costs O(1) while nothing
// changed (package watch; docs/executor.md).
//
// The exported conformance battery any executor registers in its tests is
// the sub-package invoketest. This package does not verify pins (the Verify
// hook is the governance layer's), choose the ledger's path, read the host
// environment (the caller passes the variables to choose from) or print.
//
// It builds for Linux and macOS (`make lint` cross-builds it): elsewhere
// than Linux there are no namespaces and no /proc, so a run is contained
// by its process group alone (proc_other.go), and no init shell sets its
// core-dump limit. The local envs it runs are sealed on Linux (package
// seal, Linux only).
package invoke
