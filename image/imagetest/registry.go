package imagetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
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
	host, _ := dockerRegistry(t, registryConfig{user: user, password: password})
	return host
}

// TLSDockerRegistry is DockerRegistry without auth serving HTTPS alone,
// under a certificate for 127.0.0.2 that a private CA made for the test
// signed, on 127.0.0.2: a loopback address that go-containerregistry and
// podman speak HTTPS to and never plain HTTP, as to a registry on another
// host (127.0.0.1 and localhost they read over plain HTTP after HTTPS
// failed). It returns the registry's host:port and the PEM file of the
// CA, which nothing on this host trusts.
func TLSDockerRegistry(t testing.TB) (host, caFile string) {
	t.Helper()
	dir := t.TempDir()
	ca := newCA(t, dir, "cruxprov test registry CA")
	cert, key := ca.issue(t, dir, net.ParseIP("127.0.0.2"))
	host, _ = dockerRegistry(t, registryConfig{ip: "127.0.0.2", certFile: cert, keyFile: key, roots: ca.pool()})
	return host, ca.file
}

// UntrustedCA is the PEM file of a CA made for the test that signed no
// registry's certificate: a --ca-bundle that does not help.
func UntrustedCA(t testing.TB) string {
	t.Helper()
	return newCA(t, t.TempDir(), "cruxprov test other CA").file
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM
}

func newCA(t testing.TB, dir, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return testCA{cert, key, file}
}

func (ca testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue writes a server certificate for ip that ca signed, and its key.
func (ca testCA) issue(t testing.TB, dir string, ip net.IP) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()}, IPAddresses: []net.IP{ip},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// ReadOnlyDockerRegistry is DockerRegistry without auth in its read-only
// maintenance mode (storage.maintenance.readonly): it serves what it
// holds (nothing) and refuses every upload, as a registry under
// maintenance or a pull-only mirror does.
func ReadOnlyDockerRegistry(t testing.TB) string {
	t.Helper()
	host, _ := dockerRegistry(t, registryConfig{readOnly: true})
	return host
}

// StoppedDockerRegistry is the host:port of a DockerRegistry that
// answered and was then stopped: nothing listens there any more.
func StoppedDockerRegistry(t testing.TB) string {
	t.Helper()
	host, stop := dockerRegistry(t, registryConfig{})
	stop()
	return host
}

// registryConfig is how dockerRegistry serves: with a user, its
// password (htpasswd); readOnly, in maintenance mode; on ip ("":
// 127.0.0.1); with certFile and keyFile, over TLS alone, its certificate
// signed by roots.
type registryConfig struct {
	user, password    string
	readOnly          bool
	ip                string
	certFile, keyFile string
	roots             *x509.CertPool
}

// dockerRegistry starts the registry; stop ends it (and the test's
// cleanup does, when it was not).
func dockerRegistry(t testing.TB, rc registryConfig) (host string, stop func()) {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Skip("docker-registry is not installed (apt-get install docker-registry): no real registry to test against")
	}
	dir := t.TempDir()
	var auth string
	if rc.user != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(rc.password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(rc.user+":"+string(hash)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: test\n    path: %s\n", htpasswd)
	}
	ip := rc.ip
	if ip == "" {
		ip = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	host = l.Addr().String()
	l.Close()
	var maintenance string
	if rc.readOnly {
		maintenance = "  maintenance:\n    readonly:\n      enabled: true\n"
	}
	var tlsConf string
	scheme, client := "http", &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if rc.certFile != "" {
		tlsConf = fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", rc.certFile, rc.keyFile)
		scheme = "https"
		client.Transport = &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: rc.roots, MinVersion: tls.VersionTLS12}}
	}
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n%shttp:\n  addr: %s\n%s%s",
		filepath.Join(dir, "data"), maintenance, host, tlsConf, auth)), 0o644); err != nil {
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
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if resp, err := client.Get(scheme + "://" + host + "/v2/"); err == nil {
			resp.Body.Close() // 401 with auth: it answers
			return host, stop
		}
		if time.Now().After(deadline) {
			t.Fatal("docker-registry did not start")
		}
	}
}
