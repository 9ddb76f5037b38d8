package verify

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/seal"
)

// TestProviderFilesNotWaitedOn: the installed provider.toml and
// pylock.toml are read after the seal's check, so a FIFO put at either
// path in between was opened with os.ReadFile and verify waited in
// open(2) for a writer that never came. Each is refused at once with the
// file's drift code.
func TestProviderFilesNotWaitedOn(t *testing.T) {
	for _, tc := range []struct {
		name string
		code refusal.Code
	}{{"provider.toml", refusal.ManifestDrift}, {"pylock.toml", refusal.LockDrift}} {
		t.Run(tc.name, func(t *testing.T) {
			env := t.TempDir()
			sp := "lib/python3.11/site-packages"
			di := filepath.Join(env, sp, "acme_echo-1.0.dist-info", "cruxible")
			if err := os.MkdirAll(di, 0o755); err != nil {
				t.Fatal(err)
			}
			manifest, lock := []byte("manifest\n"), []byte("lock\n")
			for name, b := range map[string][]byte{"provider.toml": manifest, "pylock.toml": lock} {
				if name == tc.name {
					if err := syscall.Mkfifo(filepath.Join(di, name), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.WriteFile(filepath.Join(di, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := &seal.Seal{
				Resolution: seal.Resolution{Root: &seal.Package{Name: "acme-echo", Version: "1.0", Filename: "acme_echo-1.0-py3-none-any.whl"}},
				Env:        seal.Env{SitePackages: sp},
			}
			spec := &registry.Provider{ManifestDigest: digest.Sum(manifest), LockDigest: digest.Sum(lock)}
			done := make(chan error, 1)
			go func() { done <- checkProviderFiles(s, env, spec) }()
			select {
			case err := <-done:
				var re *refusal.Error
				if !errors.As(err, &re) || re.Code != tc.code {
					t.Fatalf("a FIFO at the installed %s: %v, want %s", tc.name, err, tc.code)
				}
			case <-time.After(10 * time.Second):
				// Unblock the open so the goroutine ends with the test.
				if f, err := os.OpenFile(filepath.Join(di, tc.name), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				t.Fatalf("a FIFO at the installed %s: verify waited on it for 10 s", tc.name)
			}
		})
	}
}
