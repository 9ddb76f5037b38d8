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
	var p rowParser
	return p.parse(line)
}

// rowParser parses the rows of one reader (a scan, a Ledger) in turn. The
// strings of fields that repeat from row to row (provider, platform, the
// digests of an env…) come from its strtab, so that a ledger's thousands
// of rows share one copy of each, and its fields slice is reused from row
// to row.
type rowParser struct {
	tab    strtab
	fields []field
}

func (p *rowParser) parse(line []byte) (row, error) {
	if !utf8.Valid(line) {
		return row{}, errors.New("not valid UTF-8")
	}
	if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' {
		return row{}, errors.New("not a JSON object alone on its line")
	}
	if !validJSON(line) {
		return row{}, errors.New("not valid JSON")
	}
	fields, err := splitObject(line, p.fields[:0])
	if err != nil {
		return row{}, err
	}
	p.fields = fields
	o := object{fields: fields, tab: &p.tab}
	f := o.shared("format", true)
	if o.err != nil {
		return row{}, o.err
	}
	minor, err := formatMinor(f)
	if err != nil {
		return row{}, err
	}
	var r row
	switch phase := o.shared("phase", true); phase {
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
				return row{}, fmt.Errorf("unknown field %q in a %s row", string(fl.name), f)
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
	tab    *strtab
	err    error
}

// splitObject splits a JSON object, already checked by validJSON, into
// its top-level fields, appended to fields, refusing a duplicate key.
func splitObject(line []byte, fields []field) ([]field, error) {
	i := skipSpace(line, 1)
	if i < len(line) && line[i] == '}' {
		return fields, nil
	}
	for i < len(line) {
		kEnd := valueEnd(line, i)
		k, ok := unquoteBytes(line[i:kEnd])
		if !ok {
			return nil, errors.New("not a JSON object")
		}
		i = skipSpace(line, kEnd)
		i = skipSpace(line, i+1) // ':'
		vEnd := valueEnd(line, i)
		for j := range fields {
			if bytes.Equal(fields[j].name, k) {
				return nil, fmt.Errorf("duplicate field %q", k)
			}
		}
		fields = append(fields, field{name: k, v: line[i:vEnd:vEnd]})
		i = skipSpace(line, vEnd)
		if i >= len(line) || line[i] == '}' {
			break
		}
		i = skipSpace(line, i+1) // ','
	}
	return fields, nil
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

// unquoteBytes decodes a JSON string literal (valid, as validJSON
// checked). Without an escape the bytes returned are v's own, not a copy.
func unquoteBytes(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1], true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// strtab holds one copy of each string a ledger's rows repeat. It stops
// growing at strtabMax entries (a ledger of ever new values gains nothing
// from it), and lookups of a string it holds do not allocate.
type strtab struct{ m map[string]string }

const strtabMax = 4096

func (t *strtab) get(b []byte) string {
	if t == nil {
		return string(b)
	}
	if s, ok := t.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if t.m == nil {
		t.m = map[string]string{}
	}
	if len(t.m) < strtabMax {
		t.m[s] = s
	}
	return s
}

// field is one top-level field of an object.
type field struct {
	name []byte
	v    []byte
	used bool
}

// find returns the index of the field name, or -1 (a row has a handful
// of fields: a linear search beats a map).
func (o *object) find(name string) int {
	for i := range o.fields {
		if string(o.fields[i].name) == name {
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
	return o.strFrom(name, nonEmpty, nil)
}

// shared is str for a field whose values repeat from row to row: its
// string comes from the object's strtab.
func (o *object) shared(name string, nonEmpty bool) string {
	return o.strFrom(name, nonEmpty, o.tab)
}

func (o *object) strFrom(name string, nonEmpty bool, tab *strtab) string {
	v, ok := o.raw(name, true)
	if !ok {
		return ""
	}
	b, ok := unquoteBytes(v)
	if !ok {
		o.fail("field %q is not a string", name)
		return ""
	}
	if nonEmpty && len(b) == 0 {
		o.fail("field %q is empty", name)
	}
	return tab.get(b)
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
	return o.digestFrom(name, optional, nil)
}

// sharedDigest is digest for a field whose values repeat (an env's).
func (o *object) sharedDigest(name string, optional bool) string {
	return o.digestFrom(name, optional, o.tab)
}

func (o *object) digestFrom(name string, optional bool, tab *strtab) string {
	s := o.strFrom(name, !optional, tab)
	if s == "" {
		return ""
	}
	if _, err := digest.Parse(s); err != nil { // exactly "sha256:" and 64 lowercase hex digits
		o.fail("field %q is not a sha256 digest", name)
	}
	return s
}

func (o *object) int(name string, min, max int64) int64 {
	v, ok := o.raw(name, true)
	if !ok {
		return 0
	}
	n, ok := parseInt(v)
	if !ok || n < min || n > max {
		o.fail("field %q is not an integer in [%d, %d]", name, min, max)
		return 0
	}
	return n
}

// parseInt reads a JSON number that is an integer in int64's range, as
// strconv.ParseInt(s, 10, 64) would ("-0" is 0), without its allocation.
func parseInt(v []byte) (int64, bool) {
	neg := len(v) > 0 && v[0] == '-'
	d := v
	if neg {
		d = v[1:]
	}
	if len(d) == 0 || len(d) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= 1<<63:
		return int64(-n), true
	case !neg && n < 1<<63:
		return int64(n), true
	}
	return 0, false
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
	out, ok := stringArray(v, o.tab)
	if !ok {
		o.fail("field %q is not an array of strings", name)
		return nil
	}
	return out
}

// stringArray reads a JSON array (valid, as validJSON checked) whose
// items are all strings, taking them from tab (the URLs of a provider's
// egress repeat from run to run).
func stringArray(v []byte, tab *strtab) ([]string, bool) {
	if len(v) < 2 || v[0] != '[' {
		return nil, false
	}
	i := skipSpace(v, 1)
	if i < len(v) && v[i] == ']' {
		return []string{}, true
	}
	var out []string
	for i < len(v) {
		end := valueEnd(v, i)
		b, ok := unquoteBytes(v[i:end])
		if !ok {
			return nil, false
		}
		out = append(out, tab.get(b))
		i = skipSpace(v, end)
		if i >= len(v) || v[i] == ']' {
			break
		}
		i = skipSpace(v, i+1) // ','
	}
	return out, true
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
		Provider:              o.shared("provider", true),
		Entrypoint:            o.shared("entrypoint", true),
		ImplementationDigest:  o.sharedDigest("implementation_digest", false),
		MaterializationDigest: o.sharedDigest("materialization_digest", false),
		SealDigest:            o.sharedDigest("seal_digest", true),
		Backend:               o.shared("backend", true),
		Platform:              o.shared("platform", true),
		ProtocolVersion:       int(o.int("protocol_version", 1, 1<<31-1)),
		Tool:                  o.shared("tool", true),
		InputDigest:           o.digest("input_digest", false),
		StartedAt:             o.time("started_at"),
		Unenforced:            o.optStrs("unenforced"),
	}
}

func (o *object) outcome() *Outcome {
	out := &Outcome{
		AttemptID:             o.attemptID("attempt_id"),
		Status:                o.shared("status", true),
		ExitCode:              int(o.int("exit_code", -1<<31, 1<<31-1)),
		StdoutBytes:           o.int("stdout_bytes", 0, 1<<62),
		StderrBytes:           o.int("stderr_bytes", 0, 1<<62),
		ResultDigest:          o.digest("result_digest", true),
		ErrorCode:             o.shared("error_code", false),
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
