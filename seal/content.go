package seal

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/cruxible/cruxprov/canonical"
	"github.com/cruxible/cruxprov/digest"
)

// TypeContent is the type field of the seal content digest's document.
const TypeContent = "cruxprov.seal-content/v1"

// ContentDigest is the seal content digest (DESIGN §9): the sha256 of the
// RFC 8785 form of
//
//	{"type":"cruxprov.seal-content/v1","seal":SEAL}
//
// where SEAL is the seal document (as Marshal writes it) with "index" (the
// stat-index reference), "tool", and the interpreter's and libpython's
// "mtime_ns", "ctime_ns" and "ino" left out. It keeps everything else —
// the format, the materialization and its inputs, the resolution with every
// package's size, the tree digest and counts, the interpreter's real path,
// version, implementation, size and sha256 (and libpython's), the env
// layout — so an `env create --replace` or a copy of the env to another
// host reproduces it and needs no new approval, while an interpreter
// updated in place changes it. The accepted pin records it (DESIGN §8).
func ContentDigest(s *Seal) (digest.Digest, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return digest.Digest{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // sizes stay exact
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return digest.Digest{}, err
	}
	delete(m, "index")
	delete(m, "tool")
	if in, ok := m["interpreter"].(map[string]any); ok {
		dropStats(in)
		if lp, ok := in["libpython"].(map[string]any); ok {
			dropStats(lp)
		}
	}
	doc, err := json.Marshal(map[string]any{"type": TypeContent, "seal": m})
	if err != nil {
		return digest.Digest{}, err
	}
	c, err := canonical.Transform(doc)
	if err != nil {
		return digest.Digest{}, fmt.Errorf("the seal has no canonical form: %w", err)
	}
	return digest.Sum(c), nil
}

func dropStats(m map[string]any) {
	delete(m, "mtime_ns")
	delete(m, "ctime_ns")
	delete(m, "ino")
}
