package seal_test

import (
	"crypto/sha256"
	"fmt"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/treehash"
)

// An index pins both its own bytes (the seal records their sha256) and,
// through its records, the tree digest of DESIGN §5. The tree digest below
// was computed independently in Python:
//
//	sha256(b"D- 0 - bin\0" + b"L- 10 " + sha256hex(b"python3.11") + b" bin/python\0"
//	       + b"F- 6 " + sha256hex(b"home =") + b" pyvenv.cfg\0")
func ExampleStatIndex() {
	ix := &seal.StatIndex{Entries: []seal.Entry{
		{Path: "bin", Kind: treehash.Dir, Mode: 0o555, MtimeNS: 1700000000000000000, CtimeNS: 1700000000000000001, Ino: 11},
		{Path: "bin/python", Kind: treehash.Symlink, Mode: 0o777, Size: 10, Ino: 12, SHA256: sha256.Sum256([]byte("python3.11"))},
		{Path: "pyvenv.cfg", Kind: treehash.File, Mode: 0o444, Size: 6, Ino: 13, SHA256: sha256.Sum256([]byte("home =")), MtimeNS: 5, CtimeNS: 6},
	}}
	b, err := ix.MarshalBinary()
	if err != nil {
		panic(err)
	}
	fmt.Println(len(b), digest.Sum(b))
	fmt.Println(ix.TreeDigest())
	// Output:
	// 150 sha256:a62afcdf8961feacac6f1d36a4eed40f0ad642b3269667514e818bc0aa8a1717
	// sha256:0bc0ccb6f393eef3086327654072ed12d1f8a9eabbab47df02692ab36049859c
}
