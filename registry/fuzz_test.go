package registry

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

func FuzzParsePin(f *testing.F) {
	f.Add([]byte(`{"format":"cruxible.pin/v1","provider":"a","revision":1,"specDigest":null,"spec":{"base":null,"revision":1,"changes":[]},"approvals":[],"acceptedAt":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePin(b)
		if err != nil {
			if refusal.CodeOf(err) != refusal.RegistryCorrupt {
				t.Fatalf("untyped: %v", err)
			}
			return
		}
		if !validName(p.Provider) || p.Revision < 1 {
			t.Fatalf("accepted %+v", p)
		}
	})
}

func FuzzLogLines(f *testing.F) {
	s := newState()
	now := time.Unix(0, 0)
	s.record(now, EventInterfaceRegistered, "x", digest.Sum(nil), 0, "")
	s.record(now, EventPinAccepted, "acme", digest.Sum([]byte("a")), 1, "")
	var b []byte
	for _, r := range s.log {
		b = append(b, r.line()...)
	}
	f.Add(b)
	s.record(now, EventPinAccepted, "acme", digest.Sum([]byte("b")), 2, "")
	s.record(now, EventPinAccepted, "acme", digest.Sum([]byte("a")), 1, "")
	var down []byte
	for _, r := range s.log {
		down = append(down, r.line()...)
	}
	f.Add(down)
	f.Add([]byte("{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := parseLog(b)
		if err != nil {
			if refusal.CodeOf(err) != refusal.RegistryCorrupt {
				t.Fatalf("untyped: %v", err)
			}
			return
		}
		var out []byte
		for _, r := range recs {
			out = append(out, r.line()...)
		}
		if string(out) != string(b) {
			t.Fatalf("a verified log does not render back to itself")
		}
		// The pin-event scan decodes only the lines that can match; it
		// finds what decoding every entry finds, and refuses a provider's
		// revisions going down.
		hashes, raws, _ := chainLines(b)
		pe, _ := newPinEvents("acme")
		for i, raw := range raws {
			rev, ok, err := pe.revision(raw, i)
			if e := recs[i].e; err != nil || ok != isPinEvent(e, "acme") || (ok && rev != e.Revision) {
				t.Fatalf("entry %d read as revision %d, %v, %v; decoded %+v", i, rev, ok, err, e)
			}
		}
		got, err := lastPinEntry(hashes, raws, "acme")
		var want, top *Entry
		for i := range recs {
			if e := recs[i].e; isPinEvent(e, "acme") {
				want = &e
				if top == nil || e.Revision > top.Revision {
					top = want
				}
			}
		}
		if want != nil && want.Revision < top.Revision {
			if refusal.CodeOf(err) != refusal.PinRollback {
				t.Fatalf("revisions going down (%d after %d): %v", want.Revision, top.Revision, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("lastPinEntry on a decoded log: %v", err)
		}
		if (got == nil) != (want == nil) || (got != nil && (got.Seq != want.Seq || got.Hash != want.Hash || got.Prev != want.Prev)) {
			t.Fatalf("lastPinEntry %+v, decoding every entry %+v", got, want)
		}
		// The approvals PinHistory reads, decoding only the lines that
		// name the pin's change-set, are the ones decoding every entry
		// finds.
		rec, err := pinRecord(hashes, raws, "acme")
		if err != nil {
			t.Fatalf("pinRecord on a decoded log: %v", err)
		}
		// So are the governance entries the trust state replays against.
		if gov := governanceOf(entries(recs)); len(gov) != len(rec.Governance) {
			t.Fatalf("pinRecord's governance entries %+v, decoding every entry %+v", rec.Governance, gov)
		} else {
			for i := range gov {
				if gov[i].Seq != rec.Governance[i].Seq {
					t.Fatalf("pinRecord's governance entries %+v, decoding every entry %+v", rec.Governance, gov)
				}
			}
		}
		if want != nil {
			all := approvedSince(entries(recs), want.Digest)
			if len(all) != len(rec.Approved) {
				t.Fatalf("pinRecord's approvals %+v, decoding every entry %+v", rec.Approved, all)
			}
			for i := range all {
				if all[i].Seq != rec.Approved[i].Seq {
					t.Fatalf("pinRecord's approvals %+v, decoding every entry %+v", rec.Approved, all)
				}
			}
		}
	})
}

func FuzzParseChangeSet(f *testing.F) {
	s := newState()
	cs, _, err := s.propose(time.Unix(0, 0), Change{Action: ActionSetPolicy, Policy: &Policy{Threshold: 1}}, "x")
	if err == nil {
		b, _ := MarshalChangeSet(cs)
		f.Add(b)
	}
	f.Add([]byte("apiVersion: cruxible.dev/v1\nkind: ChangeSet\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := ParseChangeSet(b)
		if err != nil {
			if refusal.CodeOf(err) != refusal.ChangesetInvalid {
				t.Fatalf("untyped: %v", err)
			}
			return
		}
		out, err := MarshalChangeSet(cs)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseChangeSet(out)
		if err != nil || again.Metadata.ID != cs.Metadata.ID {
			t.Fatalf("does not round-trip: %v", err)
		}
	})
}

// FuzzValidName holds validName to the regexp it replaced.
func FuzzValidName(f *testing.F) {
	re := regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?$`)
	for _, s := range []string{"acme-echo", "a", "-a", "a.", "A", "a_b.c-d", strings.Repeat("a", 128), strings.Repeat("a", 129), ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if validName(s) != re.MatchString(s) {
			t.Fatalf("validName(%q) = %v, the regexp says %v", s, validName(s), re.MatchString(s))
		}
	})
}
