package invoketest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/sign"
	"github.com/cruxible/cruxprov/store"
)

// Container is the hostile provider's image as a container executor's
// battery needs it: the Fixtures (Image set, Verify running image.Verify
// under the builder key) and the build's result.
type Container struct {
	Fixtures
	// Build is what image.Build made.
	Build *image.Result
	// Layout is the OCI layout directory the image was written to.
	Layout string
	// Key is the builder key that signed it.
	Key *sign.PrivateKey
}

// BuilderID is the builder id BuildContainer's provenance names.
const BuilderID = "https://cruxprov.test/invoketest"

// BuildContainer builds the fixture wheels and the hostile provider into
// dir/fixtures, stores them in a store at dir/store, and builds the
// provider's image for platform (a preset id the base's interpreter runs)
// on base (REF@sha256:… or oci:DIR@sha256:…) with shimPath (cruxshim for
// the base's architecture) at its ENTRYPOINT, signed by a fresh builder
// key, into the OCI layout dir/oci. The host needs a CPython of the
// image interpreter's X.Y at its path (image.Build compiles with it).
func BuildContainer(ctx context.Context, dir, base, shimPath, platform string) (*Container, error) {
	set, err := fixtures.Build(filepath.Join(dir, "fixtures"), fixtures.Options{})
	if err != nil {
		return nil, err
	}
	prov, err := fixtures.BuildHostile(filepath.Join(dir, "fixtures"), set.Runtime, fixtures.Options{})
	if err != nil {
		return nil, err
	}
	st, err := store.Open(filepath.Join(dir, "store"))
	if err != nil {
		return nil, err
	}
	for _, w := range append([]fixtures.Wheel{prov.Wheel}, prov.Dependencies...) {
		b, err := os.ReadFile(w.Path)
		if err != nil {
			return nil, err
		}
		if err := st.Put(ctx, w.SHA256, w.Size, bytes.NewReader(b)); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(prov.Path)
	if err != nil {
		return nil, err
	}
	root, err := pipeline.OpenRoot(ctx, st, f, filepath.Base(prov.Path), prov.SHA256)
	f.Close()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	privPEM, _, err := sign.Generate([]byte("invoketest"))
	if err != nil {
		return nil, err
	}
	key, err := sign.LoadPrivateKey(privPEM, []byte("invoketest"))
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "oci")
	res, err := image.Build(ctx, st, image.Options{
		Root: root, Platforms: []string{platform},
		Base: base, Shims: map[string]string{"": shimPath}, Epoch: time.Unix(1700000000, 0),
		Key: key, BuilderID: BuilderID, Tool: "cruxprov-invoketest", Output: out,
	})
	if err != nil {
		return nil, err
	}
	m := root.Manifest
	pi := res.Platforms[0]
	md, err := digest.Parse(pi.Digest.String())
	if err != nil {
		return nil, err
	}
	ref := image.LayoutPrefix + out + "@" + pi.Digest.String()
	pub := key.Public()
	c := &Container{Build: res, Layout: out, Key: key, Fixtures: Fixtures{
		Image: ref, Runtime: set.Runtime.Version, Provider: m.Name, Platform: pi.Platform, MaterializationDigest: md, Manifest: m,
		Entrypoints: map[string]Entrypoint{}, RuntimeEnv: []string{"HOME", "HOSTNAME"},
		Verify: func(ctx context.Context) error {
			_, err := image.Verify(ctx, ref, image.VerifyOptions{Keys: []*sign.PublicKey{pub}, SkipBlobs: true,
				Expect: image.Expect{PackageSHA256: prov.SHA256, BuilderID: BuilderID}})
			return err
		},
	}}
	for _, e := range prov.Entrypoints {
		c.Entrypoints[e.Name] = Entrypoint{Object: e.Object, ImplementationDigest: e.ImplementationDigest}
	}
	return c, nil
}
