package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// History events.
const (
	EventInterfaceRegistered = "interface-registered"
	EventKeyTrusted          = "key-trusted"
	EventKeyUntrusted        = "key-untrusted"
	EventPolicyChanged       = "policy-changed"
	EventChangeSetProposed   = "changeset-proposed"
	EventChangeSetApproved   = "changeset-approved"
	EventChangeSetRejected   = "changeset-rejected"
	EventPinAccepted         = "pin-accepted"
	EventPinRetired          = "pin-retired"
)

// Entry is one history entry. Prev and Hash are the chain: Hash is the
// sha256 of Prev's "sha256:<hex>" text (64 zeros' digest text for the
// first entry), a newline, and the entry's JSON bytes as stored.
type Entry struct {
	Seq      int64         `json:"seq"`
	At       time.Time     `json:"at"`
	Event    string        `json:"event"`
	Subject  string        `json:"subject"`
	Digest   digest.Digest `json:"digest"`
	Revision int64         `json:"revision,omitempty"`
	Detail   string        `json:"detail,omitempty"`
	Prev     digest.Digest `json:"-"`
	Hash     digest.Digest `json:"-"`
}

// rootDetail begins the detail of the key-trusted entry that made the
// registry's root of trust (state.trustKey writes it).
const rootDetail = "root of trust"

// isRoot reports whether e is the entry that trusted the root of trust.
func (e *Entry) isRoot() bool {
	return e.Event == EventKeyTrusted && strings.HasPrefix(e.Detail, rootDetail)
}

// logRec is an entry with its stored bytes.
type logRec struct {
	e    Entry
	raw  []byte
	hash digest.Digest
}

// zeroPrev is the prev of the first entry.
var zeroPrev = digest.FromBytes(make([]byte, 32))

func chainHash(prev digest.Digest, raw []byte) digest.Digest {
	h := sha256.New()
	h.Write([]byte(prev.String()))
	h.Write([]byte{'\n'})
	h.Write(raw)
	return digest.FromBytes(h.Sum(nil))
}

func newLogRec(prev digest.Digest, e Entry) (logRec, error) {
	if prev.IsZero() {
		prev = zeroPrev
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return logRec{}, err
	}
	e.Prev = prev
	e.Hash = chainHash(prev, raw)
	return logRec{e: e, raw: raw, hash: e.Hash}, nil
}

// line renders a record as its log line (with the newline):
// {"prev":"sha256:…","hash":"sha256:…","entry":ENTRY}
func (r logRec) line() []byte {
	b := make([]byte, 0, len(linePrefix)+len(r.raw)+2)
	b = append(b, `{"v":1,"prev":"`...)
	b = append(b, r.e.Prev.String()...)
	b = append(b, `","hash":"`...)
	b = append(b, r.hash.String()...)
	b = append(b, `","entry":`...)
	b = append(b, r.raw...)
	return append(b, '}', '\n')
}

// linePrefix is the fixed layout before the entry's JSON.
const linePrefix = `{"v":1,"prev":"sha256:` + hex64 + `","hash":"sha256:` + hex64 + `","entry":`
const hex64 = "0000000000000000000000000000000000000000000000000000000000000000"

var (
	prevOff = len(`{"v":1,"prev":"sha256:`)
	hashOff = prevOff + 64 + len(`","hash":"sha256:`)
)

// chainLines checks the chain of the log text b (lines as line() writes
// them, every line ended by '\n') and returns each entry's hash and its
// JSON bytes. It does not decode the entries. A line of another layout,
// a hash that does not match, a prev that is not the previous hash, or a
// final line without its newline is refused with registry_corrupt.
func chainLines(b []byte) ([]digest.Digest, [][]byte, error) {
	// Sized once (a line per '\n'), and each line hashed in one scratch
	// buffer: verify reads the whole history before every run, and a
	// history of 100,000 entries allocated about 100 MB more than its
	// bytes, per verify, in growing these and in each line's hashing.
	n := bytes.Count(b, []byte{'\n'})
	hashes := make([]digest.Digest, 0, n)
	raws := make([][]byte, 0, n)
	prev := zeroPrev
	var scratch []byte
	var sumHex [64]byte
	for n := 0; len(b) > 0; n++ {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil, nil, refusal.New(refusal.RegistryCorrupt, "history entry %d is cut off (no newline)", n)
		}
		ln := b[:i]
		b = b[i+1:]
		if len(ln) < len(linePrefix)+3 || string(ln[:prevOff]) != linePrefix[:prevOff] ||
			string(ln[prevOff+64:hashOff]) != linePrefix[prevOff+64:hashOff] ||
			string(ln[hashOff+64:len(linePrefix)]) != linePrefix[hashOff+64:] || ln[len(ln)-1] != '}' {
			return nil, nil, refusal.New(refusal.RegistryCorrupt, "history entry %d is not a log line", n)
		}
		pv, hv := ln[prevOff:prevOff+64], ln[hashOff:hashOff+64]
		if !lowerHex(pv) || !lowerHex(hv) {
			return nil, nil, refusal.New(refusal.RegistryCorrupt, "history entry %d: prev or hash is not lower-case hex", n)
		}
		if string(pv) != prev.Hex() {
			return nil, nil, refusal.New(refusal.RegistryCorrupt, "history entry %d does not follow entry %d (deleted, reordered or rewritten history)", n, n-1)
		}
		raw := ln[len(linePrefix) : len(ln)-1]
		scratch = append(append(append(append(scratch[:0], digest.Prefix...), prev.Hex()...), '\n'), raw...)
		sum := sha256.Sum256(scratch)
		hex.Encode(sumHex[:], sum[:])
		if !bytes.Equal(sumHex[:], hv) {
			return nil, nil, refusal.New(refusal.RegistryCorrupt, "history entry %d does not hash to its recorded hash (rewritten)", n)
		}
		h, err := digest.ParseHex(string(hv))
		if err != nil {
			return nil, nil, refusal.Wrap(refusal.RegistryCorrupt, err, "history entry %d: its hash", n)
		}
		hashes = append(hashes, h)
		raws = append(raws, raw)
		prev = h
	}
	return hashes, raws, nil
}

// lowerHex reports whether b is lower-case hex digits, as line writes
// them (hex.Decode also takes upper case: a line in another form).
func lowerHex(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// parseLog checks the chain and decodes every entry.
func parseLog(b []byte) ([]logRec, error) {
	hashes, raws, err := chainLines(b)
	if err != nil {
		return nil, err
	}
	recs := make([]logRec, len(raws))
	prev := zeroPrev
	for i, raw := range raws {
		var e Entry
		if err := strictJSON(raw, &e); err != nil {
			return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "history entry %d", i)
		}
		if e.Seq != int64(i) {
			return nil, refusal.New(refusal.RegistryCorrupt, "history entry %d says it is entry %d", i, e.Seq)
		}
		// An entry is stored as json.Marshal wrote it: no other spelling
		// of a key or a value (encoding/json matches keys in any case and
		// reads \u escapes), so the bytes a reader scans are what it means.
		if b, err := json.Marshal(e); err != nil || !bytes.Equal(b, raw) {
			return nil, refusal.New(refusal.RegistryCorrupt, "history entry %d is not in the form cruxprov writes", i)
		}
		e.Prev, e.Hash = prev, hashes[i]
		recs[i] = logRec{e: e, raw: append([]byte(nil), raw...), hash: hashes[i]}
		prev = hashes[i]
	}
	return recs, nil
}

// isPinEvent reports whether e accepted or retired provider's pin.
func isPinEvent(e Entry, provider string) bool {
	return e.Subject == provider && (e.Event == EventPinAccepted || e.Event == EventPinRetired)
}

// lastPinEntry finds provider's last pin event in a checked chain
// (chainLines' hashes and entry bytes). The revisions of a provider's pin
// events only go up, as approvals make them: a last event below an
// earlier one is an entry appended to put an older pin back
// (pin_rollback), since the approvals' signatures cover the revision and
// no older pin can be raised to match. Each entry is read without
// decoding it (pinEvents); the last one is decoded whole and must say the
// same. An entry that does not decode is registry_corrupt.
func lastPinEntry(hashes []digest.Digest, raws [][]byte, provider string) (*Entry, error) {
	pe, err := newPinEvents(provider)
	if err != nil {
		return nil, err
	}
	lastI, topI, flatI, flatPrev := -1, -1, -1, -1
	var lastRev, topRev int64
	for i, raw := range raws {
		rev, ok, err := pe.revision(raw, i)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if lastI >= 0 && rev <= lastRev && flatI < 0 {
			flatI, flatPrev = i, lastI // two pins at one revision, or one going down
		}
		lastI, lastRev = i, rev
		if topI < 0 || rev > topRev {
			topI, topRev = i, rev
		}
	}
	if lastI < 0 {
		return nil, nil
	}
	e, err := decodeEntry(raws[lastI], lastI)
	if err != nil {
		return nil, err
	}
	if !isPinEvent(e, provider) || e.Revision != lastRev {
		return nil, refusal.New(refusal.RegistryCorrupt, "history entry %d reads as %s of %s revision %d, and decoded as %s of %s revision %d", lastI, "a pin event", provider, lastRev, e.Event, e.Subject, e.Revision)
	}
	e.Hash = hashes[lastI]
	if e.Prev = zeroPrev; lastI > 0 {
		e.Prev = hashes[lastI-1]
	}
	if lastRev < topRev {
		return nil, refusal.New(refusal.PinRollback, "the registry's history accepted %s revision %d (entry %d), then revision %d (entry %d): revisions only go up, so an older pin was put back with an entry appended", provider, topRev, topI, lastRev, lastI)
	}
	if flatI >= 0 {
		return nil, refusal.New(refusal.RegistryCorrupt, "the registry's history has a pin entry of %s (entry %d) at a revision not above the one before it (entry %d): a provider's revisions only go up, one pin each", provider, flatI, flatPrev)
	}
	return &e, nil
}

// pinRecord is PinHistory's answer from a checked chain (chainLines'
// hashes and entry bytes): the provider's last pin entry and, when there
// is one, the changeset-approved entries of its change-set since its
// last proposal. Only the lines that hold that change-set's digest are
// decoded (an entry spelled otherwise is not found, and the pin's
// approvals then do not match: refused, never passed).
func pinRecord(hashes []digest.Digest, raws [][]byte, provider string) (*PinRecord, error) {
	gov, err := governanceEntries(raws)
	if err != nil {
		return nil, err
	}
	last, err := lastPinEntry(hashes, raws, provider)
	if err != nil || last == nil {
		return &PinRecord{Chain: hashes, Last: last, Governance: gov}, err
	}
	hex := []byte(last.Digest.Hex())
	var named []Entry
	for i, raw := range raws {
		if !bytes.Contains(raw, hex) {
			continue
		}
		e, err := decodeEntry(raw, i)
		if err != nil {
			return nil, err
		}
		named = append(named, e)
	}
	return &PinRecord{Chain: hashes, Last: last, Approved: approvedSince(named, last.Digest), Governance: gov}, nil
}

// isGovernance reports whether e is a step of the trust state (the root
// of trust's key-trusted entry among them).
func isGovernance(e *Entry) bool {
	return e.Event == EventKeyTrusted || e.Event == EventKeyUntrusted || e.Event == EventPolicyChanged
}

// governanceEntries are the governance entries (isGovernance) of a
// checked chain's entry bytes, in order, decoding only the lines that
// can be one: those holding `"event":"key-` or `"event":"policy-`, and
// any line with an escape (a \u-spelled event is decoded, not passed
// over). A decoded governance entry must be in the form cruxprov writes
// (registry_corrupt otherwise, as parseLog says). Verify replayed the
// trust state from the whole history decoded (Reader.Log): 1.3 s and
// 550 MB allocated for a history of 100,000 entries, on every verify
// after the history grew and at every expiry validUntil bisects.
func governanceEntries(raws [][]byte) ([]Entry, error) {
	var out []Entry
	for i, raw := range raws {
		if !bytes.Contains(raw, []byte(`"event":"key-`)) && !bytes.Contains(raw, []byte(`"event":"policy-`)) && bytes.IndexByte(raw, '\\') < 0 {
			continue
		}
		e, err := decodeEntry(raw, i)
		if err != nil {
			return nil, err
		}
		if !isGovernance(&e) {
			continue
		}
		if b, err := json.Marshal(e); err != nil || !bytes.Equal(b, raw) {
			return nil, refusal.New(refusal.RegistryCorrupt, "history entry %d is not in the form cruxprov writes", i)
		}
		out = append(out, e)
	}
	return out, nil
}

// governanceOf is governanceEntries of a decoded history.
func governanceOf(log []Entry) []Entry {
	var out []Entry
	for i := range log {
		if isGovernance(&log[i]) {
			out = append(out, log[i])
		}
	}
	return out
}

// approvedSince is the changeset-approved entries of change-set id among
// es (in history order) since its last changeset-proposed entry: the
// approvals its status holds, each key's last one counting (a key that
// approves again replaces its approval, a renewal too).
func approvedSince(es []Entry, id digest.Digest) []Entry {
	var out []Entry
	for _, e := range es {
		if e.Digest != id {
			continue
		}
		switch e.Event {
		case EventChangeSetProposed:
			out = out[:0]
		case EventChangeSetApproved:
			out = append(out, e)
		}
	}
	return out
}

// decodeEntry decodes entry i's bytes strictly.
func decodeEntry(raw []byte, i int) (Entry, error) {
	var e Entry
	if err := strictJSON(raw, &e); err != nil {
		return e, refusal.Wrap(refusal.RegistryCorrupt, err, "history entry %d", i)
	}
	if e.Seq != int64(i) {
		return e, refusal.New(refusal.RegistryCorrupt, "history entry %d says it is entry %d", i, e.Seq)
	}
	return e, nil
}

// pinEvents reads a provider's pin events out of history entries. An
// entry as json.Marshal writes it (the keys in Entry's order, no spaces)
// is read from its bytes — the event and subject, the digest skipped, the
// revision's digits — with no decoding: a provider's whole history is
// scanned on every verify. In those bytes the needles can only be keys
// (inside a JSON string every quote is escaped). A line that names the
// provider and a pin event in any other way is decoded.
type pinEvents struct {
	provider          string
	accepted, retired []byte // `"event":"pin-…","subject":NAME,"digest":`
	subject, event    []byte // the loose test: both somewhere in the line
}

func newPinEvents(provider string) (*pinEvents, error) {
	name, err := json.Marshal(provider)
	if err != nil {
		return nil, refusal.Wrap(refusal.PinUnapproved, err, "%q is not a provider name", provider)
	}
	tail := `","subject":` + string(name) + `,"digest":`
	return &pinEvents{
		provider: provider,
		accepted: []byte(`"event":"` + EventPinAccepted + tail),
		retired:  []byte(`"event":"` + EventPinRetired + tail),
		subject:  append([]byte(`"subject":`), name...),
		event:    []byte(`"event":"pin-`),
	}, nil
}

// revision reports whether entry i (raw) is a pin event of the provider,
// and its revision.
func (p *pinEvents) revision(raw []byte, i int) (int64, bool, error) {
	if !bytes.Contains(raw, p.subject) || !bytes.Contains(raw, p.event) {
		return 0, false, nil
	}
	for _, needle := range [][]byte{p.accepted, p.retired} {
		k := bytes.Index(raw, needle)
		if k < 0 {
			continue
		}
		rest := raw[k+len(needle):]
		switch {
		case bytes.HasPrefix(rest, []byte("null")):
			rest = rest[4:]
		case len(rest) >= 73 && rest[0] == '"' && bytes.HasPrefix(rest[1:], []byte("sha256:")) && rest[72] == '"':
			rest = rest[73:]
		default:
			rest = nil
		}
		if d, ok := bytes.CutPrefix(rest, []byte(`,"revision":`)); ok {
			n, j := int64(0), 0
			for ; j < len(d) && j < 18 && d[j] >= '0' && d[j] <= '9'; j++ {
				n = n*10 + int64(d[j]-'0')
			}
			if j > 0 && j < len(d) && (d[j] == ',' || d[j] == '}') && (d[0] != '0' || j == 1) {
				return n, true, nil
			}
		}
		break
	}
	e, err := decodeEntry(raw, i)
	if err != nil {
		return 0, false, err
	}
	return e.Revision, isPinEvent(e, p.provider), nil
}

func entries(recs []logRec) []Entry {
	out := make([]Entry, len(recs))
	for i, r := range recs {
		out[i] = r.e
	}
	return out
}

func hashesOf(recs []logRec) []digest.Digest {
	out := make([]digest.Digest, len(recs))
	for i, r := range recs {
		out[i] = r.hash
	}
	return out
}
