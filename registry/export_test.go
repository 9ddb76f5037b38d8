package registry

import (
	"os"
	"path/filepath"

	"github.com/cruxible/cruxprov/digest"
)

// SetCrashAt sets the hook a commit calls at each of its steps
// ("journal", "file", "history-torn", "history"), for the crash tests;
// an error it returns is that step's.
func SetCrashAt(f func(step string) error) { crashAt = f }

// FloorRefusal is the refusal of fe as the floor's reads and writes
// make it (floorRefusal).
func FloorRefusal(fe *FloorError) error { return floorRefusal(fe, "floor %s", fe.Path) }

// AppendForged appends e to the history of the registry at root as the
// next link of its chain, as a writer of the directory could: for the
// tests of what VerifyHistory finds in a history.
func AppendForged(root string, e Entry) error {
	b, err := os.ReadFile(filepath.Join(root, "log.jsonl"))
	if err != nil {
		return err
	}
	recs, err := parseLog(b)
	if err != nil {
		return err
	}
	var prev digest.Digest
	if len(recs) > 0 {
		prev = recs[len(recs)-1].hash
		e.Seq = recs[len(recs)-1].e.Seq + 1
	}
	r, err := newLogRec(prev, e)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(root, "log.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(r.line())
	return err
}
