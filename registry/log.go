package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	var hashes []digest.Digest
	var raws [][]byte
	prev := zeroPrev
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
		var pv, hv [32]byte
		if !lowerHex(ln[prevOff:prevOff+64]) || !lowerHex(ln[hashOff:hashOff+64]) {
			return nil, nil, refusal.New(refusal.RegistryCorrupt, "history entry %d: prev or hash is not lower-case hex", n)
		}
		if _, err := hex.Decode(pv[:], ln[prevOff:prevOff+64]); err != nil {
			return nil, nil, refusal.New(refusal.RegistryCorrupt, "history entry %d: prev is not hex", n)
		}
		if _, err := hex.Decode(hv[:], ln[hashOff:hashOff+64]); err != nil {
			return nil, nil, refusal.New(refusal.RegistryCorrupt, "history entry %d: hash is not hex", n)
		}
		if digest.FromBytes(pv[:]) != prev {
			return nil, nil, refusal.New(refusal.RegistryCorrupt, "history entry %d does not follow entry %d (deleted, reordered or rewritten history)", n, n-1)
		}
		raw := ln[len(linePrefix) : len(ln)-1]
		h := chainHash(prev, raw)
		if digest.FromBytes(hv[:]) != h {
			return nil, nil, refusal.New(refusal.RegistryCorrupt, "history entry %d does not hash to its recorded hash (rewritten)", n)
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
// (chainLines' hashes and entry bytes), decoding only the entries whose
// bytes name a pin event and the provider as json.Marshal writes them
// (parseLog refuses an entry in any other form). The revisions of a
// provider's pin events only go up, as approvals make them: a last
// event below an earlier one is an entry appended to put an older pin
// back (pin_rollback), since the approvals' signatures cover the
// revision and no older pin can be raised to match. An entry that does
// not decode is registry_corrupt.
func lastPinEntry(hashes []digest.Digest, raws [][]byte, provider string) (*Entry, error) {
	subject, err := json.Marshal(provider)
	if err != nil {
		return nil, refusal.Wrap(refusal.PinUnapproved, err, "%q is not a provider name", provider)
	}
	subject = append([]byte(`"subject":`), subject...)
	event := []byte(`"event":"pin-`)
	var last, top *Entry
	for i := range raws {
		if !bytes.Contains(raws[i], subject) || !bytes.Contains(raws[i], event) {
			continue
		}
		var e Entry
		if err := strictJSON(raws[i], &e); err != nil {
			return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "history entry %d", i)
		}
		if e.Seq != int64(i) {
			return nil, refusal.New(refusal.RegistryCorrupt, "history entry %d says it is entry %d", i, e.Seq)
		}
		if !isPinEvent(e, provider) {
			continue
		}
		e.Hash = hashes[i]
		if e.Prev = zeroPrev; i > 0 {
			e.Prev = hashes[i-1]
		}
		last = &e
		if top == nil || e.Revision > top.Revision {
			top = last
		}
	}
	if last != nil && last.Revision < top.Revision {
		return nil, refusal.New(refusal.PinRollback, "the registry's history accepted %s revision %d (entry %d), then revision %d (entry %d): revisions only go up, so an older pin was put back with an entry appended", provider, top.Revision, top.Seq, last.Revision, last.Seq)
	}
	return last, nil
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
