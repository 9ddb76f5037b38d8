package wheel

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// recordLine is one parsed RECORD row. hash is zero and size is -1 when
// the row leaves them empty (allowed only for RECORD itself and the
// signature files).
type recordLine struct {
	path string
	hash digest.Digest
	size int64
}

// parseRecord parses a RECORD file: CSV rows "path,hash,size" (Python's
// csv dialect, "\r\n" or "\n" line ends), the hash "sha256=" followed by
// the URL-safe base64 of the 32-byte digest without padding (trailing
// "=" padding is tolerated), the size a decimal byte count. Another
// algorithm, a malformed hash or size, a row without exactly three
// fields, a path listed twice or invalid UTF-8 is refusal.WheelInvalid.
func parseRecord(b []byte) ([]recordLine, error) {
	bad := func(line int, format string, args ...any) error {
		return refusal.New(refusal.WheelInvalid, "RECORD line %d: "+format+"; rebuild the wheel", append([]any{line}, args...)...)
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	var out []recordLine
	seen := map[string]bool{}
	for {
		row, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			line := 0
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				line = pe.Line
			}
			return nil, refusal.Wrap(refusal.WheelInvalid, err, "RECORD line %d is not valid CSV; rebuild the wheel", line)
		}
		line, _ := r.FieldPos(0) // a successful Read has at least one field
		if len(row) != 3 {
			return nil, bad(line, "has %d fields, want path,hash,size", len(row))
		}
		rl := recordLine{path: row[0], size: -1}
		if rl.path == "" {
			return nil, bad(line, "has an empty path")
		}
		if !utf8.ValidString(rl.path) || strings.ContainsFunc(rl.path, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, bad(line, "path is not valid UTF-8 or holds a control character")
		}
		if seen[rl.path] {
			return nil, bad(line, "lists %q a second time", rl.path)
		}
		seen[rl.path] = true
		if h := row[1]; h != "" {
			alg, val, ok := strings.Cut(h, "=")
			if !ok || alg != "sha256" {
				return nil, bad(line, "hash of %q is not sha256=<urlsafe base64>", rl.path)
			}
			sum, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(val, "="))
			if err != nil || len(sum) != 32 {
				return nil, bad(line, "hash of %q is not the URL-safe base64 of 32 bytes", rl.path)
			}
			rl.hash = digest.FromBytes(sum)
		}
		if s := row[2]; s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 || s[0] < '0' || s[0] > '9' {
				return nil, bad(line, "size of %q is not a byte count", rl.path)
			}
			rl.size = n
		}
		out = append(out, rl)
	}
	return out, nil
}

// recordHash renders a digest as RECORD writes it: "sha256=" and the
// URL-safe base64 of the 32 bytes without padding.
func recordHash(d digest.Digest) string {
	sum, _ := hex.DecodeString(d.Hex())
	return "sha256=" + base64.RawURLEncoding.EncodeToString(sum)
}

// formatRecord renders RECORD rows with Python's csv dialect ("\r\n"
// line ends would be Python's default; "\n" is what bdist_wheel, flit and
// hatch write, and both are read everywhere).
func formatRecord(lines []recordLine) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	for _, l := range lines {
		h, s := "", ""
		if !l.hash.IsZero() {
			h = recordHash(l.hash)
		}
		if l.size >= 0 {
			s = strconv.FormatInt(l.size, 10)
		}
		_ = w.Write([]string{l.path, h, s}) // writing to a bytes.Buffer cannot fail
	}
	w.Flush()
	return buf.Bytes()
}
