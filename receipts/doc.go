// Package receipts owns the receipts ledger of DESIGN §10: the JSONL file
// in which every invocation leaves a two-phase record, an intent written
// and synced before the provider is spawned and an outcome after it, and
// the strict scan that reads one or several ledgers back.
//
// The format (docs/receipts.md is the reference):
//
//   - One JSON object per line, each with "format" ("cruxprov.receipt/v1.1";
//     a reader accepts any v1.N and refuses another major with
//     ledger_corrupt) and "phase": "intent", "outcome" or "torn".
//   - An intent names the attempt (attempt_id), the idempotency key, the
//     provider, entrypoint, implementation, materialization and seal
//     digests, backend, platform, protocol version, the tool's version, the
//     input digest and started_at, and the limits the run went without
//     (unenforced, optional, since v1.1). An outcome names its attempt_id and
//     carries status, exit code, byte counts, result digest, error, the
//     caller-redacted stderr tail, egress declared and observed, and
//     ended_at. A torn row quarantines the bytes of an interrupted write.
//   - Rows never hold secret values: the caller redacts what it passes in
//     (the stderr tail above all); this package writes what it is given.
//
// Writing (Ledger): every row is one write(2) on an O_APPEND descriptor
// followed by fdatasync, under an exclusive flock of the ledger that also
// covers the check that the file ends with a newline. Before an append the
// writer repairs a torn tail under the O_EXCL repair lock <path>.lock,
// which its holder also flocks (one that no one flocks was left by a dead
// writer and is taken over at once; one held is waited for): a tail that is a
// complete record is terminated with "\n"; any other fragment is first
// journaled in <path>.repair (synced, renamed, directory synced), then
// overwritten in place by a torn row holding its exact bytes in base64 and
// their sha256, then the journal is removed. A crash at any step leaves the
// fragment's bytes in the ledger or in the journal, and the next writer
// finishes the repair from the journal.
//
// Idempotency (Ledger.Begin): a key reused with another input digest,
// provider or entrypoint is refused idempotency_conflict; the same request
// with a recorded ok outcome is replayed without spawning (an intent and a
// replayed outcome are written for the replay); after an error, a timeout,
// an output_limit, a refusal or an orphan intent the request runs again as
// a new attempt under the same key (at-least-once). An attempt still
// running under the key, in this process or another, is refused
// idempotency_conflict: while it runs its Ledger holds a lock on the key's
// byte of <path>.inflight, which the kernel drops when the process dies,
// so an orphan is an intent without outcome whose key lock nobody holds.
//
// Opening (Open) reads the ledger strictly too, to know its attempts and
// keys; a checkpoint beside it, <path>.checkpoint, saves reading again the
// rows it covers, and is trusted only when the sha256 of the ledger's bytes
// it covers is the one it names (checkpoint.go).
//
// Reading (Scan) is strict: valid UTF-8, JSON objects with no duplicate
// keys, required fields of the right types, a known phase and format
// major; the first bad line ends the scan with a *CorruptError (line,
// byte offset, sha256 of the bad bytes) wrapped in a ledger_corrupt
// refusal. ScanOptions.TolerateCorrupt returns such lines as data.
//
// This package does not spawn anything (invoke/ does), redact, choose the
// ledger's path (cmd/ resolves the state directory and calls DefaultPath),
// or print.
package receipts
