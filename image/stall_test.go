package image

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

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
			go func() { // read the request, answer nothing
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = Verify(ctx, l.Addr().String()+"/acme/echo@sha256:"+strings.Repeat("ab", 32), VerifyOptions{Keys: []*sign.PublicKey{testKey(t).Public()}})
	t.Logf("%v: %v", time.Since(start), err)
	if refusal.CodeOf(err) != refusal.FetchFailed || ctx.Err() != nil {
		t.Fatalf("a registry that says nothing: %v after %v", err, time.Since(start))
	}
}
