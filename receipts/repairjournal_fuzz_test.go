package receipts

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRepairJournalReadStrictly: a journal with a key twice (two
// offsets: the decoder kept the last) or a stray } after it was taken as
// a journal; it is not one of this writer's.
func TestRepairJournalReadStrictly(t *testing.T) {
	row := encodeTorn(128, []byte("{\"format\":\x00\xff"), time.Unix(1700000000, 0))
	jb, _ := json.Marshal(journal{Format: journalFormat, Offset: 128, Row: string(row[:len(row)-1])})
	if _, reason := parseRepairJournal(jb); reason != "" {
		t.Fatalf("the clean journal: %s", reason)
	}
	for name, b := range map[string]string{
		"an offset twice": strings.Replace(string(jb), `"offset":128`, `"offset":7,"offset":128`, 1),
		"two cases":       strings.Replace(string(jb), `"offset":128`, `"Offset":7,"offset":128`, 1),
		"a stray }":       string(jb) + "}",
	} {
		if j, reason := parseRepairJournal([]byte(b)); reason == "" {
			t.Errorf("%s: taken as %+v", name, j)
		}
	}
}

// FuzzParseRepairJournal: a repair journal is read back from beside the
// ledger after a crash; whatever it holds, parseRepairJournal takes a
// journal of a torn row at its offset or says why not, without panicking,
// and a journal it takes, written again as a repair writes it, reads back
// the same.
func FuzzParseRepairJournal(f *testing.F) {
	row := encodeTorn(128, []byte("{\"format\":\x00\xff"), time.Unix(1700000000, 0))
	jb, _ := json.Marshal(journal{Format: journalFormat, Offset: 128, Row: string(row[:len(row)-1])})
	f.Add(jb)
	jb, _ = json.Marshal(journal{Format: journalFormat, Offset: 7, Row: string(row[:len(row)-1])})
	f.Add(jb)
	f.Add([]byte(`{"format":"cruxprov.receipt-repair/v1","offset":0,"row":"{}"}`))
	f.Add([]byte(`{"format":"cruxprov.receipt-repair/v1","offset":0,"row":"","extra":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		j, reason := parseRepairJournal(b)
		if reason != "" {
			if j != (journal{}) {
				t.Fatalf("refused (%s) with %+v", reason, j)
			}
			return
		}
		out, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		again, reason := parseRepairJournal(out)
		if reason != "" || again != j {
			t.Fatalf("%q re-encoded as %q: %s %+v", b, out, reason, again)
		}
	})
}
