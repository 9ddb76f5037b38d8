package image

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestVerifyRegistryStalls: a registry that accepts the connection and
// then says nothing, or answers the version check and then drips, is
// fetch_failed once registryStall passes without a byte, not a verify
// (the check before every container run) that waits for ever. Before,
// go-containerregistry's transport had no deadline but the dial's.
func TestVerifyRegistryStalls(t *testing.T) {
	defer func(s time.Duration) { registryStall = s }(registryStall)
	registryStall = 500 * time.Millisecond
	addr := silentRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Verify(ctx, addr+"/acme/echo@sha256:"+strings.Repeat("ab", 32), VerifyOptions{Keys: []*sign.PublicKey{testKey(t).Public()}})
	t.Logf("%v: %v", time.Since(start), err)
	if refusal.CodeOf(err) != refusal.FetchFailed || ctx.Err() != nil {
		t.Fatalf("a registry that says nothing: %v after %v", err, time.Since(start))
	}
}

// TestVerifySilentRegistryOneDeadline: a registry that accepts the
// connection and says nothing costs one stall deadline, not four. Its
// TLS handshake times out first (go-containerregistry's transport allows
// 10 s, the stall 30 s), and go-containerregistry retried that timeout
// as a temporary error, three tries with 1 s and 3 s between: 34 s for
// the https ping alone, 4×30 s where a dial timed out. A timeout or a
// stall is not retried now. The test keeps production's order (the
// handshake's timeout under the stall) at a smaller scale.
func TestVerifySilentRegistryOneDeadline(t *testing.T) {
	defer func(s time.Duration, rt http.RoundTripper) { registryStall, remote.DefaultTransport = s, rt }(registryStall, remote.DefaultTransport)
	registryStall = time.Second
	tr := remote.DefaultTransport.(*http.Transport).Clone()
	tr.TLSHandshakeTimeout = 200 * time.Millisecond
	remote.DefaultTransport = tr
	addr := silentRegistry(t)
	keys := []*sign.PublicKey{testKey(t).Public()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Verify(ctx, addr+"/acme/echo@sha256:"+strings.Repeat("ab", 32), VerifyOptions{Keys: keys})
	took := time.Since(start)
	t.Logf("%v: %v", took, err)
	if refusal.CodeOf(err) != refusal.FetchFailed || ctx.Err() != nil {
		t.Fatalf("a registry that says nothing: %v after %v", err, took)
	}
	if took > 2*registryStall {
		t.Fatalf("a registry that says nothing held verify %v, more than one stall deadline (%v)", took, registryStall)
	}
}

// silentRegistry is the address of a listener on loopback that accepts
// every connection, reads what it is sent and answers nothing.
func silentRegistry(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return l.Addr().String()
}
