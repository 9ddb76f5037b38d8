// Package seal owns what makes a local environment trustworthy after it is
// built (DESIGN §6, §7, §9): the seal document beside each env
// (envs/<hex>.seal.json, format cruxprov.seal/v2.1, v2 and v1 still read), the
// seal content digest, the stat index
// (envs/<hex>.index, format cruxprov.statindex/v1), freezing a finished
// tree read-only while indexing it, and verification of an env against its
// seal, fast (one lstat per indexed entry, listing only directories and
// rehashing only files whose stat changed) or deep (every file rehashed in
// parallel, tree digest recomputed).
//
// The executor calls Verify in-process before every run; `cruxprov env
// verify` is a thin wrapper over it. The formats are written down in
// docs/seal.md.
//
// It does not build environments or install wheels (materialize/ does),
// know about accepted pins or signatures (the pin-level verify does), or
// print. Every failure on the verify path is a *refusal.Error:
// seal_missing, seal_invalid, interpreter_drift, interpreter_unverifiable
// or env_drift.
//
// Linux only, deliberately: the stat passes use fstatat and getdents
// directly (what makes fast verify cost about one lstat per entry), and
// the envs it checks are Linux venvs. The packages an executor imports
// besides it — refusal, digest, registry, sign, receipts — build for Linux
// and macOS (`make lint` cross-builds them).
package seal
