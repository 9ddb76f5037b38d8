package index

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
)

// TestClientCertificateRefusalAfterReset: a TLS 1.3 server that requires a
// client certificate refuses it only after the client's side of the
// handshake is done; the request written meanwhile can meet the reset of
// the server's close before the alert is read (python's ssl server: about
// one fetch in seven). That reset was retried as any reset, a retry line
// each, and where every attempt met it the refusal said only "check the
// index and retry". Here a front to the server cuts the first connection
// so, deterministically: the client asks the port again, reads the alert,
// and refuses at once, saying what the server wants.
func TestClientCertificateRefusalAfterReset(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS13}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	back := strings.TrimPrefix(srv.URL, "https://")

	// The front: the first connection passes the handshake (the client's
	// ClientHello, the server's flight), then, once the client sends its
	// second flight, forwards nothing more from the server and resets
	// the client: the alert is lost, as a reset loses it. Later
	// connections pass through.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			first := conns.Add(1) == 1
			go front(c, back, first)
		}
	}()

	var retries int
	base := "https://" + ln.Addr().String() + "/simple/"
	c, err := New(base, Options{HTTPClient: &http.Client{Transport: srv.Client().Transport}, Attempts: 4, Backoff: time.Millisecond, Events: func(e Event) {
		if e.Kind == EventRetry {
			retries++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Project(context.Background(), "alpha")
	if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), "asks for a TLS client certificate") {
		t.Fatalf("Project: %v, want fetch_failed saying it asks for a client certificate", err)
	}
	if retries != 0 {
		t.Errorf("%d retries of a server that refuses the client's certificate", retries)
	}
}

// front forwards c to back; cut: as described above.
func front(c net.Conn, back string, cut bool) {
	defer c.Close()
	b, err := net.Dial("tcp", back)
	if err != nil {
		return
	}
	defer b.Close()
	if !cut {
		go io.Copy(b, c)
		io.Copy(c, b)
		return
	}
	stop := make(chan struct{})
	go func() {
		buf := make([]byte, 64<<10)
		for n := 0; ; n++ {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			if n == 1 {
				close(stop) // the client's second flight: the server's answer is the alert
			}
			b.Write(buf[:k])
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		k, err := b.Read(buf)
		select {
		case <-stop:
			time.Sleep(50 * time.Millisecond)
			c.(*net.TCPConn).SetLinger(0) // close with a reset
			return
		default:
		}
		if k > 0 {
			c.Write(buf[:k])
		}
		if err != nil && !isTimeout(err) {
			return
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
