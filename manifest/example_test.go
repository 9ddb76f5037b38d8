package manifest_test

import (
	"fmt"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/manifest"
)

// The implementation digest of DESIGN §3's example entrypoint in a wheel
// whose sha256 is that of the bytes "wheel": a known answer another
// implementation can reproduce (Python: sha256 of json.dumps(doc,
// sort_keys=True, separators=(",", ":")) gives the same for this ASCII doc).
func ExampleEntrypoint_ImplementationDigest() {
	m, err := manifest.Parse([]byte(`schema = 1
name = "acme-web-fetch"
protocol = [1, 1]
secrets = ["acme/api-token"]
egress = ["https://api.acme.example/*"]
[budgets]
timeout_ms = 30000
output_bytes = 1048576
[[entrypoints]]
name = "fetch"
object = "acme_web_fetch.impl:Fetch"
interface = { id = "web.fetch", digest = "sha256:0000000000000000000000000000000000000000000000000000000000000001" }
`), "acme_web_fetch")
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := m.Entrypoints[0].ImplementationDigest(digest.Sum([]byte("wheel")))
	fmt.Println(d, err)
	// Output: sha256:b7c1eeb2c40a1f5b2a62b9d474938a9c7205f40babbb94c5c6906742e96f21cf <nil>
}
