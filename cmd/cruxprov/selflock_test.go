package main

import (
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/wheeltest"
)

// TestLockResolveRootInItsOwnLock: lock resolve --wheel of a wheel whose
// embedded lock lists the provider itself is refused lock_invalid (exit
// 78), as inspect, package embed and the install pipeline refuse it
// (DESIGN §3: the root is not in its own lock); it printed the root as
// one of its own dependencies, with a resolution digest.
func TestLockResolveRootInItsOwnLock(t *testing.T) {
	const mf = `schema = 1
name = "acme-web-fetch"
protocol = [1, 1]

[[entrypoints]]
name = "fetch"
object = "acme_web_fetch.impl:Fetch"
interface = { id = "web.fetch", digest = "sha256:5f17d3aafa95a59a05c1abece31b23a7a0e003f715ee229f6ea3d089ea5c41e2" }
`
	const lock = `lock-version = "1.0"
created-by = "hand"

[[packages]]
name = "acme-web-fetch"
version = "0.9.0"
wheels = [{ url = "https://x/acme_web_fetch-0.9.0-py3-none-any.whl", hashes = { sha256 = "8b6deb8bc45804aad0ff783fac88426dd8dadd7ea98f3cdeb0c626e286dcde0d" } }]
`
	w := wheeltest.Write(t, t.TempDir(), "acme_web_fetch-1.0.0-py3-none-any.whl", map[string]string{
		"acme_web_fetch/__init__.py": "",
		"DI/cruxible/provider.toml":  mf,
		"DI/cruxible/pylock.toml":    lock,
	})
	r := cruxprov(t, "lock", "resolve", "--wheel", w, "--platform", "cp312-manylinux_2_28_x86_64")
	wantRefusal(t, r, "lock_invalid", "lock resolve --wheel of a root in its own lock")
	if !strings.Contains(r.stderr, "lists acme-web-fetch, the provider itself") {
		t.Errorf("stderr %q does not name the provider itself", r.stderr)
	}
}
