package imagetest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// DockerRegistry runs Debian's docker-registry (distribution) on
// 127.0.0.1 with a config and storage of its own until the test ends, and
// returns its host:port; it skips the test when the package is missing.
// With a user, the registry asks for that user and password (htpasswd).
// Its log is shown when the test fails.
func DockerRegistry(t testing.TB, user, password string) string {
	t.Helper()
	host, _ := dockerRegistry(t, user, password, false)
	return host
}

// ReadOnlyDockerRegistry is DockerRegistry without auth in its read-only
// maintenance mode (storage.maintenance.readonly): it serves what it
// holds (nothing) and refuses every upload, as a registry under
// maintenance or a pull-only mirror does.
func ReadOnlyDockerRegistry(t testing.TB) string {
	t.Helper()
	host, _ := dockerRegistry(t, "", "", true)
	return host
}

// StoppedDockerRegistry is the host:port of a DockerRegistry that
// answered and was then stopped: nothing listens there any more.
func StoppedDockerRegistry(t testing.TB) string {
	t.Helper()
	host, stop := dockerRegistry(t, "", "", false)
	stop()
	return host
}

// dockerRegistry starts the registry; stop ends it (and the test's
// cleanup does, when it was not).
func dockerRegistry(t testing.TB, user, password string, readOnly bool) (host string, stop func()) {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Skip("docker-registry is not installed (apt-get install docker-registry): no real registry to test against")
	}
	dir := t.TempDir()
	var auth string
	if user != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(user+":"+string(hash)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: test\n    path: %s\n", htpasswd)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host = l.Addr().String()
	l.Close()
	var maintenance string
	if readOnly {
		maintenance = "  maintenance:\n    readonly:\n      enabled: true\n"
	}
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n%shttp:\n  addr: %s\n%s",
		filepath.Join(dir, "data"), maintenance, host, auth)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfg)
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
	t.Cleanup(func() {
		stop()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("docker-registry log:\n%s", b)
		}
	})
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if resp, err := c.Get("http://" + host + "/v2/"); err == nil {
			resp.Body.Close() // 401 with auth: it answers
			return host, stop
		}
		if time.Now().After(deadline) {
			t.Fatal("docker-registry did not start")
		}
	}
}
