// Package pep440 owns PEP 440 versions and version specifiers: parsing,
// normalization, ordering, and specifier matching, with the semantics of
// current pypa/packaging (the conformance vectors decide; deliberate
// differences are listed in docs/packaging-differences.md).
//
// It does not own project names (PEP 503 normalization lives with the lock
// and index code), markers (package marker), or any I/O. Versions
// and specifier sets are immutable values, safe for concurrent use.
package pep440
