package registry_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestVerifyPinLargeHistory: VerifyPin on a history of 20,000 entries
// (proposals and rejections of other providers, then a key trusted and
// the pin accepted) allocates little more than the history's size, with
// a floor and without one (the trust replay, which validUntil asks for
// at every approval expiry, and every verify after the history grew).
// Before, the replay decoded every entry (Reader.Log): 15 times the
// history's size (550 MB and 1.3 s at 100,000 entries), and the chain
// check 4 times (reading it with a growing buffer, hashing each line
// with its own allocations).
func TestVerifyPinLargeHistory(t *testing.T) {
	ctx := context.Background()
	d, _, k, approve := govDir(t, 1, "alice")
	lp := filepath.Join(d.Root(), "log.jsonl")
	b, err := os.ReadFile(lp)
	if err != nil {
		t.Fatal(err)
	}
	var last struct{ Hash string }
	l := bytes.SplitAfter(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if err := json.Unmarshal(l[len(l)-1], &last); err != nil {
		t.Fatal(err)
	}
	buf := bytes.NewBuffer(b)
	prev, at := last.Hash, time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	for i := 0; i < 20000; i++ {
		ev := registry.EventChangeSetProposed
		if i%2 == 1 {
			ev = registry.EventChangeSetRejected
		}
		raw, err := json.Marshal(registry.Entry{Seq: int64(len(l) + i), At: at, Event: ev, Subject: fmt.Sprintf("p%d", i/2), Digest: digest.Sum([]byte(strconv.Itoa(i / 2))), Revision: 1})
		if err != nil {
			t.Fatal(err)
		}
		h := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(prev+"\n"+string(raw))))
		fmt.Fprintf(buf, `{"v":1,"prev":%q,"hash":%q,"entry":%s}`+"\n", prev, h, raw)
		prev = h
	}
	if err := os.WriteFile(lp, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// A governance step after the filler, and the pin.
	bob := registrytest.NewKey(t, "bob", registry.RoleApprover)
	tr, err := d.TrustKey(ctx, bob.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	approve(tr.ChangeSet, nil, k["alice"])
	approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"])
	st, err := os.Stat(lp)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	for _, c := range []struct{ name, state string }{{"no floor", ""}, {"first, making the floor", state}, {"with the floor", state}} {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		if _, err := registry.VerifyPin(ctx, d, c.state, "acme-echo", time.Date(2026, 1, 2, 16, 0, 0, 0, time.UTC)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		runtime.ReadMemStats(&m1)
		if a := int64(m1.TotalAlloc - m0.TotalAlloc); a > 2*st.Size() {
			t.Errorf("%s: VerifyPin allocated %d bytes for a history of %d", c.name, a, st.Size())
		}
	}
}
