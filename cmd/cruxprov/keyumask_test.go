package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestKeyGenerateModesWhateverTheUmask: key generate writes PREFIX.key
// 0600 and PREFIX.pub 0644 under any umask (DESIGN §14: the modes are
// asserted), a permissive one (000: a private key readable by every user
// is a signing key anyone on the host can use) and a strict one (077).
func TestKeyGenerateModesWhateverTheUmask(t *testing.T) {
	for _, umask := range []string{"000", "077"} {
		t.Run(umask, func(t *testing.T) {
			prefix := filepath.Join(t.TempDir(), "k")
			cmd := exec.Command("sh", "-c", "umask "+umask+" && exec \"$0\" \"$@\"", bin, "key", "generate", "--out", prefix, "--quiet")
			cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir(), "CRUXPROV_KEY_PASSWORD=pw")
			if r := runCmd(t, cmd); r.code != 0 {
				t.Fatalf("%+v", r)
			}
			for p, m := range map[string]os.FileMode{".key": 0o600, ".pub": 0o644} {
				if fi, err := os.Stat(prefix + p); err != nil || fi.Mode().Perm() != m {
					t.Errorf("%s: %v %v, want %v", p, fi.Mode().Perm(), err, m)
				}
			}
		})
	}
}
