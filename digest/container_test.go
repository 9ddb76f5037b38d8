package digest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/image"
)

// containerVector is one vector of testdata/digests/materialization-container.json.
type containerVector struct {
	Name  string `json:"name"`
	Note  string `json:"note"`
	Input struct {
		Platform string   `json:"platform"`
		Image    string   `json:"image"`
		Blobs    []string `json:"blobs"`
	} `json:"input"`
	Digest string `json:"digest"`
}

// rawImage is an image of a manifest and a config as they are (its layers
// not at hand), for go-containerregistry's partial, as image.Verify reads
// one from a layout or a registry.
type rawImage struct{ manifest, config []byte }

func (r rawImage) RawManifest() ([]byte, error)        { return r.manifest, nil }
func (r rawImage) RawConfigFile() ([]byte, error)      { return r.config, nil }
func (r rawImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (r rawImage) LayerByDigest(v1.Hash) (partial.CompressedLayer, error) {
	return nil, errors.New("the vector holds no layers")
}

// TestContainerVectors: the container materialization digest of each
// vector of materialization-container.json (expected outputs computed
// by gen.mjs, and by fromdoc.py from docs/digests.md's prose: TestDocProse)
// is the digest go-containerregistry gives the platform's manifest, the
// image's or, for an index, that of the entry whose config's
// image.LabelPlatform is the platform (verify/container.Materializations
// pins each so), every blob named rehashing to its descriptor; and the
// doc's vector table names each vector with that digest.
func TestContainerVectors(t *testing.T) {
	b, err := os.ReadFile("../testdata/digests/materialization-container.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []containerVector
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&vs); err != nil || len(vs) == 0 {
		t.Fatalf("materialization-container.json: %v, %d vectors", err, len(vs))
	}
	doc, err := os.ReadFile("../docs/digests.md")
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(materialization-container[a-z0-9.-]*)` \\|.*\\| `(sha256:[0-9a-f]{64})` \\|$").FindAllStringSubmatch(string(doc), -1) {
		table[m[1]] = m[2]
	}
	for _, v := range vs {
		blobs := map[v1.Hash][]byte{}
		for _, s := range v.Input.Blobs {
			h, _, err := v1.SHA256(bytes.NewReader([]byte(s)))
			if err != nil {
				t.Fatal(err)
			}
			blobs[h] = []byte(s)
		}
		blob := func(d v1.Descriptor) []byte {
			t.Helper()
			b, ok := blobs[d.Digest]
			if !ok || int64(len(b)) != d.Size {
				t.Fatalf("%s: no blob %s of %d bytes", v.Name, d.Digest, d.Size)
			}
			return b
		}
		manifests := [][]byte{[]byte(v.Input.Image)}
		var probe struct{ MediaType types.MediaType }
		if err := json.Unmarshal([]byte(v.Input.Image), &probe); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if probe.MediaType.IsIndex() {
			ix, err := v1.ParseIndexManifest(bytes.NewReader([]byte(v.Input.Image)))
			if err != nil {
				t.Fatalf("%s: %v", v.Name, err)
			}
			manifests = nil
			for _, d := range ix.Manifests {
				manifests = append(manifests, blob(d))
			}
		}
		got := map[string]v1.Hash{}
		for _, raw := range manifests {
			m, err := v1.ParseManifest(bytes.NewReader(raw))
			if err != nil {
				t.Fatalf("%s: %v", v.Name, err)
			}
			img, err := partial.CompressedToImage(rawImage{manifest: raw, config: blob(m.Config)})
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatalf("%s: %v", v.Name, err)
			}
			d, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			got[cf.Config.Labels[image.LabelPlatform]] = d
		}
		d, ok := got[v.Input.Platform]
		switch {
		case !ok:
			t.Errorf("%s: no image of %s in %v", v.Name, v.Input.Platform, got)
		case d.String() != v.Digest:
			t.Errorf("%s: go-containerregistry gives %s, the vector says %s", v.Name, d, v.Digest)
		case table[v.Name] != v.Digest:
			t.Errorf("docs/digests.md: %s is %q, the code computes %s", v.Name, table[v.Name], d)
		}
		delete(table, v.Name)
	}
	for name := range table {
		t.Errorf("docs/digests.md names vector %q, which materialization-container.json does not have", name)
	}
}
