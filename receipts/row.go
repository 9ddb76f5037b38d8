package receipts

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/digest"
)

// Format is the format of the rows this version writes. A reader accepts
// cruxprov.receipt/v1 and any v1.N (fields a later minor adds are ignored;
// a v1 or v1.0 row with an unknown field is corrupt) and refuses another
// major with ledger_corrupt (DESIGN §14). v1.1 added the intent's
// optional "unenforced", so a reader from before it ignores the field
// rather than calling the ledger corrupt.
const Format = "cruxprov.receipt/v1.1"

// The phases of a row.
const (
	PhaseIntent  = "intent"
	PhaseOutcome = "outcome"
	PhaseTorn    = "torn"
)

// The statuses of an outcome (DESIGN §10).
const (
	StatusOK          = "ok"
	StatusError       = "error"
	StatusTimeout     = "timeout"
	StatusOutputLimit = "output_limit"
	StatusRefused     = "refused"
)

// MaxRow is the largest intent or outcome row, newline included, that a
// Ledger writes; a larger one is refused ledger_write_failed (the caller
// caps the stderr tail and messages it passes in).
const MaxRow = 1 << 20

// maxFragment is the largest unterminated tail a writer quarantines; a
// larger one is not a torn row of this format and is refused
// ledger_corrupt. maxLine is the longest line a scan reads as a row: a
// torn row of maxFragment bytes fits.
const (
	maxFragment = MaxRow
	maxLine     = 2 * MaxRow
)

// Intent is the first phase of a receipt, written and synced before the
// provider is spawned.
type Intent struct {
	AttemptID             string    `json:"attempt_id"`      // empty: Begin assigns a random one
	IdempotencyKey        string    `json:"idempotency_key"` // may be empty: no idempotency
	Provider              string    `json:"provider"`
	Entrypoint            string    `json:"entrypoint"`
	ImplementationDigest  string    `json:"implementation_digest"`  // "sha256:<hex>"
	MaterializationDigest string    `json:"materialization_digest"` // "sha256:<hex>"
	SealDigest            string    `json:"seal_digest"`            // "sha256:<hex>", or empty when no seal was read
	Backend               string    `json:"backend"`
	Platform              string    `json:"platform"`
	ProtocolVersion       int       `json:"protocol_version"`
	Tool                  string    `json:"tool"`         // cruxprov's version
	InputDigest           string    `json:"input_digest"` // "sha256:<hex>"
	StartedAt             time.Time `json:"started_at"`
	// Unenforced names the limits the backend could not apply and the
	// caller chose to run without (a rootless podman on cgroups v1:
	// "memory", "cpus", "pids"); omitted when every limit holds. Since
	// v1.1.
	Unenforced []string `json:"unenforced,omitempty"`
}

// Outcome is the second phase of a receipt: how the attempt AttemptID
// ended. ReplayOf is set only on a replayed outcome (Replayed), naming the
// attempt whose ok outcome was returned.
type Outcome struct {
	AttemptID      string   `json:"attempt_id"`
	Status         string   `json:"status"` // one of the Status constants
	ExitCode       int      `json:"exit_code"`
	StdoutBytes    int64    `json:"stdout_bytes"`
	StderrBytes    int64    `json:"stderr_bytes"`
	ResultDigest   string   `json:"result_digest"` // "sha256:<hex>"; required when Status is ok
	ErrorCode      string   `json:"error_code,omitempty"`
	ErrorMessage   string   `json:"error_message,omitempty"`
	StderrTail     string   `json:"stderr_tail,omitempty"` // already redacted by the caller
	EgressDeclared []string `json:"egress_declared"`
	EgressObserved []string `json:"egress_observed"`
	// EgressObservedDropped counts the observed URLs past what a receipt
	// keeps (the executor keeps the first ones, up to a size); omitted
	// when none were dropped. Since v1.1.
	EgressObservedDropped int       `json:"egress_observed_dropped,omitempty"`
	Replayed              bool      `json:"replayed,omitempty"`
	ReplayOf              string    `json:"replay_of,omitempty"`
	EndedAt               time.Time `json:"ended_at"`
}

// row is one parsed ledger line: exactly one of its pointers is set.
type row struct {
	intent  *Intent
	outcome *Outcome
	torn    *tornRow
}

// tornRow is a quarantined fragment.
type tornRow struct {
	Offset     int64
	Bytes      []byte
	SHA256     string
	RepairedAt time.Time
}

// The JSON shapes written, fields in a fixed order.
type intentJSON struct {
	Format                string   `json:"format"`
	Phase                 string   `json:"phase"`
	AttemptID             string   `json:"attempt_id"`
	IdempotencyKey        string   `json:"idempotency_key"`
	Provider              string   `json:"provider"`
	Entrypoint            string   `json:"entrypoint"`
	ImplementationDigest  string   `json:"implementation_digest"`
	MaterializationDigest string   `json:"materialization_digest"`
	SealDigest            string   `json:"seal_digest"`
	Backend               string   `json:"backend"`
	Platform              string   `json:"platform"`
	ProtocolVersion       int      `json:"protocol_version"`
	Tool                  string   `json:"tool"`
	InputDigest           string   `json:"input_digest"`
	StartedAt             string   `json:"started_at"`
	Unenforced            []string `json:"unenforced,omitempty"`
}

type outcomeJSON struct {
	Format         string   `json:"format"`
	Phase          string   `json:"phase"`
	AttemptID      string   `json:"attempt_id"`
	Status         string   `json:"status"`
	ExitCode       int      `json:"exit_code"`
	StdoutBytes    int64    `json:"stdout_bytes"`
	StderrBytes    int64    `json:"stderr_bytes"`
	ResultDigest   string   `json:"result_digest"`
	ErrorCode      string   `json:"error_code"`
	ErrorMessage   string   `json:"error_message"`
	StderrTail     string   `json:"stderr_tail"`
	EgressDeclared []string `json:"egress_declared"`
	EgressObserved []string `json:"egress_observed"`
	EgressDropped  int      `json:"egress_observed_dropped,omitempty"`
	Replayed       bool     `json:"replayed"`
	ReplayOf       string   `json:"replay_of,omitempty"`
	EndedAt        string   `json:"ended_at"`
}

type tornJSON struct {
	Format     string `json:"format"`
	Phase      string `json:"phase"`
	Offset     int64  `json:"offset"`
	Length     int    `json:"length"`
	SHA256     string `json:"sha256"`
	BytesB64   string `json:"bytes_b64"`
	RepairedAt string `json:"repaired_at"`
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// encodeIntent returns the intent's line (newline included), checked by
// the strict parser so that a Ledger never writes a row a scan refuses.
func encodeIntent(in Intent) ([]byte, error) {
	return encodeChecked(intentJSON{
		Format: Format, Phase: PhaseIntent, AttemptID: in.AttemptID, IdempotencyKey: in.IdempotencyKey,
		Provider: in.Provider, Entrypoint: in.Entrypoint,
		ImplementationDigest: in.ImplementationDigest, MaterializationDigest: in.MaterializationDigest,
		SealDigest: in.SealDigest, Backend: in.Backend, Platform: in.Platform,
		ProtocolVersion: in.ProtocolVersion, Tool: in.Tool, InputDigest: in.InputDigest,
		StartedAt: formatTime(in.StartedAt), Unenforced: in.Unenforced,
	}, in.StartedAt)
}

func encodeOutcome(out Outcome) ([]byte, error) {
	return encodeChecked(outcomeJSON{
		Format: Format, Phase: PhaseOutcome, AttemptID: out.AttemptID, Status: out.Status,
		ExitCode: out.ExitCode, StdoutBytes: out.StdoutBytes, StderrBytes: out.StderrBytes,
		ResultDigest: out.ResultDigest, ErrorCode: out.ErrorCode, ErrorMessage: out.ErrorMessage,
		StderrTail: out.StderrTail, EgressDeclared: nonNil(out.EgressDeclared),
		EgressObserved: nonNil(out.EgressObserved), EgressDropped: out.EgressObservedDropped,
		Replayed: out.Replayed, ReplayOf: out.ReplayOf,
		EndedAt: formatTime(out.EndedAt),
	}, out.EndedAt)
}

func encodeTorn(offset int64, frag []byte, at time.Time) []byte {
	b, _ := json.Marshal(tornJSON{
		Format: Format, Phase: PhaseTorn, Offset: offset, Length: len(frag),
		SHA256: digest.Sum(frag).String(), BytesB64: base64.StdEncoding.EncodeToString(frag),
		RepairedAt: formatTime(at),
	})
	return append(b, '\n')
}

func encodeChecked(v any, t time.Time) ([]byte, error) {
	if t.IsZero() {
		return nil, errors.New("its time is not set")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b)+1 > MaxRow {
		return nil, fmt.Errorf("the row would be %d bytes, more than %d", len(b)+1, MaxRow)
	}
	if _, err := parseRow(b); err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// parseRow decodes one line (without its newline) strictly: valid UTF-8,
// one JSON object from the first byte to the last, no duplicate keys, a
// known format major and phase, and every required field of its type.
func parseRow(line []byte) (row, error) {
	if !utf8.Valid(line) {
		return row{}, errors.New("not valid UTF-8")
	}
	if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' {
		return row{}, errors.New("not a JSON object alone on its line")
	}
	if !json.Valid(line) {
		return row{}, errors.New("not valid JSON")
	}
	o, err := objectFields(line)
	if err != nil {
		return row{}, err
	}
	f := o.str("format", true)
	if o.err != nil {
		return row{}, o.err
	}
	minor, err := formatMinor(f)
	if err != nil {
		return row{}, err
	}
	var r row
	switch phase := o.str("phase", true); phase {
	case PhaseIntent:
		r.intent = o.intent()
	case PhaseOutcome:
		r.outcome = o.outcome()
	case PhaseTorn:
		r.torn = o.tornRow()
	default:
		if o.err == nil {
			o.err = fmt.Errorf("unknown phase %q", phase)
		}
	}
	if o.err != nil {
		return row{}, o.err
	}
	if minor == 0 && r.intent != nil && r.intent.Unenforced != nil {
		return row{}, fmt.Errorf("field \"unenforced\" in a %s row (it is v1.1's)", f)
	}
	if minor == 0 && r.outcome != nil && o.find("egress_observed_dropped") >= 0 {
		return row{}, fmt.Errorf("field \"egress_observed_dropped\" in a %s row (it is v1.1's)", f)
	}
	if minor == 0 {
		for _, fl := range o.fields {
			if !fl.used {
				return row{}, fmt.Errorf("unknown field %q in a %s row", fl.name, f)
			}
		}
	}
	return r, nil
}

// formatMinor checks "cruxprov.receipt/v1[.N]" and returns N (0 when absent).
func formatMinor(f string) (int, error) {
	rest, ok := strings.CutPrefix(f, "cruxprov.receipt/v")
	major, minor, dot := strings.Cut(rest, ".")
	if !ok || !digits(major) || (dot && !digits(minor)) {
		return 0, fmt.Errorf("format %q is not a receipts ledger format", f)
	}
	if major != "1" {
		return 0, fmt.Errorf("format %q has unknown major %s (written by a newer cruxprov?)", f, major)
	}
	if !dot {
		return 0, nil
	}
	n, err := strconv.Atoi(minor)
	if err != nil {
		return 1, nil // more digits than an int holds: a minor > 0
	}
	return n, nil
}

func digits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// object is a JSON object's top-level fields, read one by one with their
// type checked; the first failure sticks in err.
type object struct {
	fields []field
	err    error
}

// objectFields splits a JSON object, already checked by json.Valid, into
// its top-level fields, refusing a duplicate key.
func objectFields(line []byte) (*object, error) {
	o := &object{fields: make([]field, 0, 16)}
	i := skipSpace(line, 1)
	if i < len(line) && line[i] == '}' {
		return o, nil
	}
	for i < len(line) {
		kEnd := valueEnd(line, i)
		k, ok := unquote(line[i:kEnd])
		if !ok {
			return nil, errors.New("not a JSON object")
		}
		i = skipSpace(line, kEnd)
		i = skipSpace(line, i+1) // ':'
		vEnd := valueEnd(line, i)
		if o.find(k) >= 0 {
			return nil, fmt.Errorf("duplicate field %q", k)
		}
		o.fields = append(o.fields, field{name: k, v: line[i:vEnd:vEnd]})
		i = skipSpace(line, vEnd)
		if i >= len(line) || line[i] == '}' {
			break
		}
		i = skipSpace(line, i+1) // ','
	}
	return o, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the end of the valid JSON value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(b)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = valueEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// unquote decodes a JSON string literal (valid, as json.Valid checked).
func unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// field is one top-level field of an object.
type field struct {
	name string
	v    []byte
	used bool
}

// find returns the index of the field name, or -1 (a row has a handful
// of fields: a linear search beats a map).
func (o *object) find(name string) int {
	for i := range o.fields {
		if o.fields[i].name == name {
			return i
		}
	}
	return -1
}

func (o *object) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf(format, args...)
	}
}

// raw returns the field's value, marking it used; a missing required field
// fails.
func (o *object) raw(name string, required bool) (json.RawMessage, bool) {
	i := o.find(name)
	if i < 0 {
		if required {
			o.fail("missing field %q", name)
		}
		return nil, false
	}
	o.fields[i].used = true
	v := json.RawMessage(o.fields[i].v)
	return v, true
}

func (o *object) str(name string, nonEmpty bool) string {
	v, ok := o.raw(name, true)
	if !ok {
		return ""
	}
	s, ok := unquote(v)
	if !ok {
		o.fail("field %q is not a string", name)
		return ""
	}
	if nonEmpty && s == "" {
		o.fail("field %q is empty", name)
	}
	return s
}

func (o *object) optStr(name string) string {
	if o.find(name) < 0 {
		return ""
	}
	return o.str(name, true)
}

func (o *object) attemptID(name string) string {
	s := o.str(name, true)
	if s != "" && !validAttemptID(s) {
		o.fail("field %q is not an attempt id (1-128 of A-Z a-z 0-9 . _ : -)", name)
	}
	return s
}

// digest reads a "sha256:<hex>" field; optional allows "".
func (o *object) digest(name string, optional bool) string {
	s := o.str(name, !optional)
	if s == "" {
		return ""
	}
	d, err := digest.Parse(s)
	if err != nil || d.String() != s {
		o.fail("field %q is not a sha256 digest", name)
	}
	return s
}

func (o *object) int(name string, min, max int64) int64 {
	v, ok := o.raw(name, true)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < min || n > max {
		o.fail("field %q is not an integer in [%d, %d]", name, min, max)
		return 0
	}
	return n
}

func (o *object) bool(name string) bool {
	v, ok := o.raw(name, true)
	if !ok {
		return false
	}
	switch string(v) {
	case "true":
		return true
	case "false":
		return false
	}
	o.fail("field %q is not a boolean", name)
	return false
}

func (o *object) strs(name string) []string {
	v, ok := o.raw(name, true)
	if !ok {
		return nil
	}
	var items []json.RawMessage
	if len(v) == 0 || v[0] != '[' || json.Unmarshal(v, &items) != nil {
		o.fail("field %q is not an array of strings", name)
		return nil
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := unquote(it)
		if !ok {
			o.fail("field %q is not an array of strings", name)
			return nil
		}
		out = append(out, s)
	}
	return out
}

// optCount reads an optional positive integer (absent: 0; an explicit 0
// is written as no field).
func (o *object) optCount(name string) int {
	if o.find(name) < 0 {
		return 0
	}
	return int(o.int(name, 1, 1<<31-1))
}

// optStrs reads an optional array of non-empty strings; present, it has
// at least one (an empty one is written as no field).
func (o *object) optStrs(name string) []string {
	if o.find(name) < 0 {
		return nil
	}
	v := o.strs(name)
	if o.err == nil && len(v) == 0 {
		o.fail("field %q is empty (omitted when there is nothing to say)", name)
	}
	for _, s := range v {
		if s == "" {
			o.fail("field %q holds an empty string", name)
		}
	}
	return v
}

func (o *object) time(name string) time.Time {
	s := o.str(name, true)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		o.fail("field %q is not an RFC 3339 time", name)
	}
	return t
}

func (o *object) intent() *Intent {
	return &Intent{
		AttemptID:             o.attemptID("attempt_id"),
		IdempotencyKey:        o.str("idempotency_key", false),
		Provider:              o.str("provider", true),
		Entrypoint:            o.str("entrypoint", true),
		ImplementationDigest:  o.digest("implementation_digest", false),
		MaterializationDigest: o.digest("materialization_digest", false),
		SealDigest:            o.digest("seal_digest", true),
		Backend:               o.str("backend", true),
		Platform:              o.str("platform", true),
		ProtocolVersion:       int(o.int("protocol_version", 1, 1<<31-1)),
		Tool:                  o.str("tool", true),
		InputDigest:           o.digest("input_digest", false),
		StartedAt:             o.time("started_at"),
		Unenforced:            o.optStrs("unenforced"),
	}
}

func (o *object) outcome() *Outcome {
	out := &Outcome{
		AttemptID:             o.attemptID("attempt_id"),
		Status:                o.str("status", true),
		ExitCode:              int(o.int("exit_code", -1<<31, 1<<31-1)),
		StdoutBytes:           o.int("stdout_bytes", 0, 1<<62),
		StderrBytes:           o.int("stderr_bytes", 0, 1<<62),
		ResultDigest:          o.digest("result_digest", true),
		ErrorCode:             o.str("error_code", false),
		ErrorMessage:          o.str("error_message", false),
		StderrTail:            o.str("stderr_tail", false),
		EgressDeclared:        o.strs("egress_declared"),
		EgressObserved:        o.strs("egress_observed"),
		EgressObservedDropped: o.optCount("egress_observed_dropped"),
		Replayed:              o.bool("replayed"),
		ReplayOf:              o.optStr("replay_of"),
		EndedAt:               o.time("ended_at"),
	}
	switch out.Status {
	case StatusOK, StatusError, StatusTimeout, StatusOutputLimit, StatusRefused:
	case "":
	default:
		o.fail("unknown status %q", out.Status)
	}
	if out.Status == StatusOK && out.ResultDigest == "" {
		o.fail("an ok outcome has no result_digest")
	}
	if out.ReplayOf != "" && !validAttemptID(out.ReplayOf) {
		o.fail("field \"replay_of\" is not an attempt id")
	}
	if out.Replayed != (out.ReplayOf != "") {
		o.fail("replayed and replay_of disagree")
	}
	return out
}

func (o *object) tornRow() *tornRow {
	off := o.int("offset", 0, 1<<62)
	n := o.int("length", 1, maxFragment)
	sum := o.digest("sha256", false)
	b64 := o.str("bytes_b64", true)
	at := o.time("repaired_at")
	if o.err != nil {
		return nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil {
		o.fail("field \"bytes_b64\" is not standard base64")
		return nil
	}
	if int64(len(b)) != n {
		o.fail("bytes_b64 holds %d bytes, length says %d", len(b), n)
		return nil
	}
	if got := sha256.Sum256(b); "sha256:"+hex.EncodeToString(got[:]) != sum {
		o.fail("bytes_b64 does not hash to sha256")
		return nil
	}
	return &tornRow{Offset: off, Bytes: b, SHA256: sum, RepairedAt: at}
}

// validAttemptID: 1-128 bytes of [A-Za-z0-9._:-].
func validAttemptID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
