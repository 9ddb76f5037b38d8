package registry

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// FuzzRegistryDocs: the registry's trust.json, a verifier's floor and the
// journal of an unfinished change are read back from disk, where anyone
// who can write the registry (or the verifier's state) may have put
// anything. Each parser makes its value or a registry_corrupt refusal,
// without panicking; a value it accepts encodes (as the registry writes
// it) to a document it reads back as the same value.
func FuzzRegistryDocs(f *testing.F) {
	_, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		f.Fatal(err)
	}
	pk, err := sign.ParsePublicKey(pub)
	if err != nil {
		f.Fatal(err)
	}
	k := Key{Name: "alice", Role: RoleApprover, PEM: string(pk.PEM()), Digest: pk.Digest()}
	trust, _ := marshalJSON(&Trust{Format: TrustFormat, Revision: 1, Root: k, Keys: []Key{k}, Policy: Policy{Threshold: 1}, History: []Step{}})
	floor, _ := marshalJSON(&Floor{Format: FloorFormat, Registry: digest.Sum([]byte("r")), Length: 2, Head: digest.Sum([]byte("h")), Providers: map[string]int64{"a": 1}})
	jour, _ := marshalJSON(&journal{Format: JournalFormat, LogSize: 10, Log: []byte("x\n"), Files: []journalFile{{Path: "trust.json", Data: []byte("{}")}}})
	for _, b := range [][]byte{trust, floor, jour} {
		for kind := range uint8(3) {
			f.Add(kind, b)
		}
	}
	f.Add(uint8(0), []byte(`{"format":"cruxible.trust/v1","root":{"name":"","role":"","pem":"","digest":null},"keys":[],"policy":{"threshold":1},"history":[]}`))
	f.Add(uint8(1), []byte(`{"format":"cruxible.floor/v1.9","length":1}`))
	f.Add(uint8(2), []byte(`{"format":"cruxprov.registry-journal/v1","log_size":-1}`))
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		var v, again any
		var err error
		parse := func(b []byte) (any, error) {
			switch kind % 3 {
			case 0:
				return parseTrust(b)
			case 1:
				return parseFloor("floor.json", b)
			default:
				return parseJournal(b)
			}
		}
		if v, err = parse(b); err != nil {
			if refusal.CodeOf(err) != refusal.RegistryCorrupt {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		out, err := marshalJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		if again, err = parse(out); err != nil {
			t.Fatalf("%q re-encoded as %q: %v", b, out, err)
		}
		if !reflect.DeepEqual(v, again) {
			j1, _ := json.Marshal(v)
			j2, _ := json.Marshal(again)
			t.Fatalf("round trip %s -> %s", j1, j2)
		}
	})
}
