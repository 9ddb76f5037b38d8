// Package wheel owns the Python wheel as a file (PEP 427 and the binary
// distribution format spec): parsing wheel file names, opening a wheel
// safely (every member name checked, exactly one .dist-info, WHEEL,
// METADATA, RECORD and entry_points.txt parsed), verifying every member
// against RECORD while it streams, and writing deterministic wheels.
//
// It does not choose wheels for a platform (lockfile/ and platform/ do),
// fetch them (index/ does), or install them into an environment
// (materialize/ does, through Extract). It never writes to the file
// system except through Write's io.Writer.
//
// Every fault is a *refusal.Error: a bad file name or structure is
// refusal.WheelInvalid, an unsafe member name or a symlink member is
// refusal.WheelUnsafePath, RECORD faults are refusal.RecordMissing and
// refusal.RecordMismatch.
package wheel
