package manifest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/manifest"
	"github.com/cruxible/cruxprov/refusal"
)

// fetchManifest is the manifest of the acme-web-fetch wheels these tests
// embed into.
const fetchManifest = `schema = 1
name = "acme-web-fetch"
protocol = [1, 1]

[[entrypoints]]
name = "fetch"
object = "acme_web_fetch.impl:Fetch"
interface = { id = "web.fetch", digest = "sha256:5f17d3aafa95a59a05c1abece31b23a7a0e003f715ee229f6ea3d089ea5c41e2" }
`

// TestEmbedFileOtherNameSaysNoFlag: an output named for another wheel is
// refused saying what to do in words: it said "pass -o DIR", the CLI's
// flag, which a Go caller of EmbedFile has not (the CLI refuses it as a
// usage error first, naming its flag itself). internal/archtest's
// TestLibrariesNameNoCLI checks long flags only.
func TestEmbedFileOtherNameSaysNoFlag(t *testing.T) {
	dir := t.TempDir()
	src := wheeltest.Write(t, dir, "acme_echo-1.0.0-py3-none-any.whl", map[string]string{"acme_echo/__init__.py": ""})
	_, err := manifest.EmbedFile(context.Background(), src, filepath.Join(dir, "acme_echo-2.0.0-py3-none-any.whl"), nil, nil)
	if refusal.CodeOf(err) != refusal.WheelInvalid || !strings.Contains(err.Error(), "write it into a directory to keep the name") || strings.Contains(err.Error(), "-o") {
		t.Fatalf("%v: want wheel_invalid saying to write it into a directory, naming no flag", err)
	}
}

// TestEmbedLockAdviceExportsWithoutTheProject: both lock_invalid
// refusals of package embed say how to make the lock it wants, and that
// way works: uv export without --no-emit-project lists the project
// itself (its directory, editable), which the second refusal is about.
// The Requires-Dist one advised "uv export --format pylock.toml", whose
// lock package embed refused in turn; the provider-itself one said what
// was wrong and not what to do.
func TestEmbedLockAdviceExportsWithoutTheProject(t *testing.T) {
	dir := t.TempDir()
	src := wheeltest.Write(t, dir, "acme_web_fetch-1.0.0-py3-none-any.whl", map[string]string{
		"acme_web_fetch/__init__.py": "",
		"DI/METADATA":                "Metadata-Version: 2.1\nName: acme-web-fetch\nVersion: 1.0.0\nRequires-Dist: cruxible-provider-runtime==0.2.0\nRequires-Dist: httpx==0.27.2\n",
	})
	mf := []byte(fetchManifest)
	const runtime = `lock-version = "1.0"
created-by = "uv"

[[packages]]
name = "cruxible-provider-runtime"
version = "0.2.0"
wheels = [{ url = "https://x/cruxible_provider_runtime-0.2.0-py3-none-any.whl", hashes = { sha256 = "8b6deb8bc45804aad0ff783fac88426dd8dadd7ea98f3cdeb0c626e286dcde0d" } }]
`
	// What uv export --format pylock.toml writes for the project itself
	// unless --no-emit-project.
	const self = `
[[packages]]
name = "acme-web-fetch"
directory = { path = ".", editable = true }
`
	for _, tc := range []struct {
		name, lock string
		want       []string
	}{
		{"a requirement the lock lacks", runtime, []string{`"httpx==0.27.2", but the lock has no httpx`, "uv export --format pylock.toml --no-emit-project"}},
		{"the provider itself", runtime + self, []string{"lists acme-web-fetch, the provider itself", "export it without the project", "uv export --format pylock.toml --no-emit-project", "embed that lock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := manifest.EmbedFile(context.Background(), src, filepath.Join(t.TempDir(), "acme_web_fetch-1.0.0-py3-none-any.whl"), mf, []byte(tc.lock))
			if refusal.CodeOf(err) != refusal.LockInvalid {
				t.Fatalf("%v: want lock_invalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
		})
	}
}

// TestEmbedRefusesLockCredentials: a lock whose URLs carry credentials
// (an index's user:token@) is refused lock_invalid, naming the key and
// never the secret, and nothing is written: embedded, the lock would ship
// the token inside the wheel to everyone who gets it. It was embedded
// silently (messages redact such URLs, the wheel did not).
func TestEmbedRefusesLockCredentials(t *testing.T) {
	dir := t.TempDir()
	src := wheeltest.Write(t, dir, "acme_web_fetch-1.0.0-py3-none-any.whl", map[string]string{
		"acme_web_fetch/__init__.py": "",
		"DI/METADATA":                "Metadata-Version: 2.1\nName: acme-web-fetch\nVersion: 1.0.0\nRequires-Dist: cruxible-provider-runtime==0.2.0\n",
	})
	mf := []byte(fetchManifest)
	lock := func(index, url string) []byte {
		return []byte(`lock-version = "1.0"
created-by = "uv"

[[packages]]
name = "cruxible-provider-runtime"
version = "0.2.0"
index = "` + index + `"
wheels = [{ url = "` + url + `", hashes = { sha256 = "8b6deb8bc45804aad0ff783fac88426dd8dadd7ea98f3cdeb0c626e286dcde0d" } }]
`)
	}
	const file = "/files/cruxible_provider_runtime-0.2.0-py3-none-any.whl"
	for _, tc := range []struct {
		name, index, url, key string
	}{
		{"the index's user and password", "https://__token__:s3cr3t@pkgs.example/simple/", "https://pkgs.example" + file, "packages[0] (cruxible-provider-runtime).index"},
		{"the wheel URL's token as its user", "https://pkgs.example/simple/", "https://s3cr3t@pkgs.example" + file, "packages[0] (cruxible-provider-runtime).wheels[0].url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "acme_web_fetch-1.0.0-py3-none-any.whl")
			_, err := manifest.EmbedFile(context.Background(), src, out, mf, lock(tc.index, tc.url))
			if refusal.CodeOf(err) != refusal.LockInvalid || !strings.Contains(err.Error(), tc.key+" is a URL with credentials") || strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("%v: want lock_invalid naming %s, not the secret", err, tc.key)
			}
			if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
				t.Errorf("left %v", ents)
			}
		})
	}
	// The same lock without credentials embeds.
	if _, err := manifest.EmbedFile(context.Background(), src, filepath.Join(t.TempDir(), "acme_web_fetch-1.0.0-py3-none-any.whl"), mf, lock("https://pkgs.example/simple/", "https://pkgs.example"+file)); err != nil {
		t.Fatal(err)
	}
	// A wheel that carries such a lock all the same (embedded by hand)
	// is inspected with a warning naming the key, not the secret.
	hand := wheeltest.Write(t, t.TempDir(), "acme_web_fetch-1.0.0-py3-none-any.whl", map[string]string{
		"acme_web_fetch/__init__.py": "",
		"DI/METADATA":                "Metadata-Version: 2.1\nName: acme-web-fetch\nVersion: 1.0.0\nRequires-Dist: cruxible-provider-runtime==0.2.0\n",
		"DI/cruxible/provider.toml":  string(mf),
		"DI/cruxible/pylock.toml":    string(lock("https://__token__:s3cr3t@pkgs.example/simple/", "https://s3cr3t@pkgs.example"+file)),
	})
	r, err := manifest.Inspect(context.Background(), hand)
	if err != nil {
		t.Fatal(err)
	}
	var warned bool
	for _, w := range r.Warnings {
		if strings.Contains(w.Key+w.Detail, "s3cr3t") {
			t.Errorf("warning %+v shows the secret", w)
		}
		warned = warned || w.Key == "packages[0] (cruxible-provider-runtime).index" && strings.Contains(w.Detail, "with credentials")
	}
	if !warned {
		t.Errorf("warnings %+v: none of the credentials", r.Warnings)
	}
}

// TestEmbedRefusesUninstallableLock: a package with no marker that no
// platform can install (only an sdist, only another source, no wheel
// with a sha256) is refused at embed with the code resolution gives it,
// and nothing is written; with a marker it is left to resolution. Such
// locks were embedded without a word and failed at every operator's
// install.
func TestEmbedRefusesUninstallableLock(t *testing.T) {
	dir := t.TempDir()
	src := wheeltest.Write(t, dir, "acme_web_fetch-1.0.0-py3-none-any.whl", map[string]string{
		"acme_web_fetch/__init__.py": "",
		"DI/METADATA":                "Metadata-Version: 2.1\nName: acme-web-fetch\nVersion: 1.0.0\n",
	})
	mf := []byte(fetchManifest)
	const h = "8b6deb8bc45804aad0ff783fac88426dd8dadd7ea98f3cdeb0c626e286dcde0d"
	lock := func(pkg string) []byte {
		return []byte("lock-version = \"1.0\"\ncreated-by = \"uv\"\n\n[[packages]]\nname = \"six\"\nversion = \"1.16.0\"\n" + pkg)
	}
	for _, tc := range []struct {
		name, pkg string
		code      refusal.Code // "": embeds
	}{
		{"sdist only", `sdist = { url = "https://x/six-1.16.0.tar.gz", hashes = { sha256 = "` + h + `" } }` + "\n", refusal.SdistNotAllowed},
		{"archive", `archive = { url = "https://x/six.zip", hashes = { sha256 = "` + h + `" } }` + "\n", refusal.SourceNotAllowed},
		{"vcs", `vcs = { type = "git", url = "https://x/six.git", commit-id = "0123456789abcdef0123456789abcdef01234567" }` + "\n", refusal.SourceNotAllowed},
		{"no source", "", refusal.NoCompatibleWheel},
		{"wheels without sha256", `wheels = [{ url = "https://x/six-1.16.0-py2.py3-none-any.whl", hashes = { sha512 = "` + h + h + `" } }]` + "\n", refusal.HashMissing},
		{"sdist only, with a marker", "marker = \"sys_platform == 'win32'\"\n" + `sdist = { url = "https://x/six-1.16.0.tar.gz", hashes = { sha256 = "` + h + `" } }` + "\n", ""},
		{"one wheel of two with sha256", `wheels = [{ url = "https://x/six-1.16.0-py2-none-any.whl", hashes = { md5 = "0123456789abcdef0123456789abcdef" } }, { url = "https://x/six-1.16.0-py3-none-any.whl", hashes = { sha256 = "` + h + `" } }]` + "\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "acme_web_fetch-1.0.0-py3-none-any.whl")
			_, err := manifest.EmbedFile(context.Background(), src, out, mf, lock(tc.pkg))
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if refusal.CodeOf(err) != tc.code || !strings.Contains(err.Error(), "packages[0] (six)") || !strings.Contains(err.Error(), "embed the new lock") {
				t.Fatalf("%v: want %s naming the package and what to do", err, tc.code)
			}
			if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
				t.Errorf("left %v", ents)
			}
		})
	}
}
