package image

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/cruxible/cruxprov/internal/strictjson"
	"github.com/cruxible/cruxprov/refusal"
)

// TestLayoutWriteRefusesIndexKeyTwice: a write into a layout whose
// index.json says a key twice ("manifests" twice, or "Manifests" and
// "manifests"), or is no index at all, is refused image_digest_mismatch
// with index.json left byte for byte as it was, as image verify of the
// layout refuses it. The writer read it with encoding/json: it kept the
// last "manifests" and rewrote the file without the first's entries (or
// failed, for one that is no JSON, with a plain error). Moved away, as
// the refusal says, the write makes index.json anew.
func TestLayoutWriteRefusesIndexKeyTwice(t *testing.T) {
	for _, c := range []struct {
		name, prefix string
		key          bool
	}{
		{"manifests twice", `{"manifests":[],`, true},
		{"Manifests and manifests", `{"Manifests":[],`, true},
		{"no JSON", `{,`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _, index0 := randomLayout(t)
			file := filepath.Join(dir, "index.json")
			tampered := append([]byte(c.prefix), index0[1:]...)
			if err := os.WriteFile(file, tampered, 0o644); err != nil {
				t.Fatal(err)
			}
			img, err := random.Image(1024, 1)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := img.Digest()
			err = writeLayout(context.Background(), dir, img, d, "two", nil, nil)
			var r *refusal.Error
			if !errors.As(err, &r) || r.Code != refusal.ImageDigestMismatch {
				t.Fatalf("write onto %s: %v (%T), want image_digest_mismatch", c.name, err, err)
			}
			if ke := (*strictjson.KeyError)(nil); c.key != errors.As(err, &ke) {
				t.Errorf("%v: a *strictjson.KeyError under it: %v, want %v", err, !c.key, c.key)
			}
			if !strings.HasPrefix(err.Error(), "image_digest_mismatch: "+file) || !strings.Contains(err.Error(), "; it was not rewritten") ||
				!strings.Contains(err.Error(), "or move it away and write the image again") {
				t.Errorf("%v: want it to name %s, say it was not rewritten, and what to do", err, file)
			}
			if b, _ := os.ReadFile(file); !bytes.Equal(b, tampered) {
				t.Errorf("index.json rewritten: %s", b)
			}
			// Moved away, as advised: written anew.
			if err := os.Rename(file, file+".moved"); err != nil {
				t.Fatal(err)
			}
			if err := writeLayout(context.Background(), dir, img, d, "two", nil, nil); err != nil {
				t.Fatalf("the write after index.json was moved away: %v", err)
			}
			if ms := indexEntries(t, dir); len(ms) != 1 || ms[0].Digest != d {
				t.Errorf("index.json written anew: %+v", ms)
			}
		})
	}
}
