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
// stat-index reference), "tool", the interpreter's and libpython's
// "mtime_ns", "ctime_ns" and "ino", and "env"."location" left out, and
// "format" written as its major ("cruxprov.seal/v2" for v2.1). The
// location and the minor are out so that a pinned env sealed before v2.1
// (a v2 seal, no location), rebuilt by `env create --replace`, keeps the
// content digest its pin records: where the env is is already in the tree
// digest (its scripts and pyvenv.cfg name it), and Verify checks the
// location against the env's path. It keeps everything else —
// the format, the materialization and its inputs, the resolution with every
// package's size, the tree digest and counts, the interpreter's real path,
// version, implementation, size and sha256 (and libpython's), the env
// layout — so an `env create --replace` or a copy of the env to another
// host reproduces it and needs no new approval, while an interpreter
// updated in place changes it. The accepted pin records it (DESIGN §8).
func ContentDigest(s *Seal) (digest.Digest, error) {
	c, err := contentJSON(s)
	if err != nil {
		return digest.Digest{}, err
	}
	return digest.Sum(c), nil
}

// contentJSON is the canonical bytes ContentDigest hashes.
func contentJSON(s *Seal) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // sizes stay exact
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	delete(m, "index")
	delete(m, "tool")
	if major, _, ok := formatVersion(s.Format); ok {
		m["format"] = "cruxprov.seal/v" + major
	}
	if env, ok := m["env"].(map[string]any); ok {
		delete(env, "location")
	}
	if in, ok := m["interpreter"].(map[string]any); ok {
		dropStats(in)
		if lp, ok := in["libpython"].(map[string]any); ok {
			dropStats(lp)
		}
	}
	doc, err := json.Marshal(map[string]any{"type": TypeContent, "seal": m})
	if err != nil {
		return nil, err
	}
	c, err := canonical.Transform(doc)
	if err != nil {
		return nil, fmt.Errorf("the seal has no canonical form: %w", err)
	}
	return c, nil
}

func dropStats(m map[string]any) {
	delete(m, "mtime_ns")
	delete(m, "ctime_ns")
	delete(m, "ino")
}
