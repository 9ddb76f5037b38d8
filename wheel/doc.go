// Package wheel owns the Python wheel as a file (PEP 427 and the binary
// distribution format spec): parsing wheel file names, opening a wheel
// safely (every member name checked, exactly one .dist-info, WHEEL,
// METADATA, RECORD and entry_points.txt parsed), verifying every member
// against RECORD while it streams, and writing deterministic wheels.
//
// It does not choose wheels for a platform (lockfile/ and platform/ do),
// fetch them (index/ does), or install them into an environment
// (materialize/ does, through Extract). It never writes to the file
// system except through Write's and Rewrite's io.Writer.
//
// Every fault is a *refusal.Error: a bad file name or structure is
// refusal.WheelInvalid, an unsafe member name or a link member is
// refusal.WheelUnsafePath, RECORD faults are refusal.RecordMissing and
// refusal.RecordMismatch.
//
// Decisions where the specifications leave room (each is tested):
//
//   - File names: where pypa/packaging and uv disagree, uv's stricter
//     verdict (see ParseFilename); the parts become paths.
//   - Member names: refused as wheel_unsafe_path when empty, not UTF-8,
//     absolute, with a drive letter, a backslash, a NUL or other control
//     character, or an empty, "." or ".." segment; so are symbolic links
//     and special files (the Unix type bits are honoured whatever system
//     the zip says created it). archive/zip's own check
//     (GODEBUG=zipinsecurepath) is not relied on either way.
//   - Duplicates: exact duplicate member names, and a path that is both a
//     file and a directory, are wheel_invalid. Names differing only in
//     case or Unicode normalization are accepted; a collision on a
//     case-insensitive target is the installer's install_conflict.
//   - Names are taken from the central directory, as archive/zip reads
//     them, so what is verified is exactly what Extract hands out; a local
//     header that disagrees is not inspected.
//   - RECORD: every regular member is listed with a sha256 and its size,
//     except RECORD itself and the signature files RECORD.jws and
//     RECORD.p7s, which may be listed with an empty hash or left out. A
//     line naming no member, a member not listed, or a listed member with
//     no hash or size is record_missing; a size or hash that differs is
//     record_mismatch; an unparseable RECORD, another hash algorithm than
//     sha256, or a path listed twice is wheel_invalid. Directory entries
//     are accepted, need no RECORD line, and are not reported by Files.
//     Members are read through MemberReader (Extract, ReadFile, and an
//     installer's OpenMember and NewMemberReader alike), which is
//     internal/verifying's reader with the same rule: a File without a
//     hash is record_missing when read, unless Open marked it as RECORD
//     or a signature file, which is checked by size alone.
//   - Decompression: only stored and deflate members; a member over 1 MiB
//     whose declared ratio exceeds 200:1 is refused at Open as a
//     decompression bomb (wheel_invalid); a member that inflates past its
//     declared size is cut off at that size and refused as
//     record_mismatch (its size cannot match RECORD). RECORD and files
//     read whole by ReadFile are bounded at 64 MiB.
//   - Versions in the file name, the dist-info and METADATA must be equal
//     under PEP 440 ("1.0" equals "1.0.0"); names equal after PEP 503
//     normalization.
package wheel
