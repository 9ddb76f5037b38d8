package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"testing"

	"github.com/cruxible/cruxprov/sign"
)

// FuzzParseRef: any string is parsed or refused, never a panic; a parsed
// reference names a sha256 digest.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"oci:dir@sha256:" + hex64, "registry.example/a/b:1@sha256:" + hex64, "a/b:latest", "oci:@sha256:x", "@", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err == nil && r.Digest.Algorithm != "sha256" {
			t.Fatalf("%q parsed with digest %s", s, r.Digest)
		}
	})
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// FuzzScanLayer: a hostile base layer (any bytes, or any tar of
// symlinks, whiteouts and files) never panics the scan nor the
// interpreter search, and symlink loops end.
func FuzzScanLayer(f *testing.F) {
	mk := func(entries ...tar.Header) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		for _, h := range entries {
			h := h
			tw.WriteHeader(&h)
			if h.Typeflag == tar.TypeReg {
				tw.Write(make([]byte, h.Size))
			}
		}
		tw.Close()
		zw.Close()
		return buf.Bytes()
	}
	f.Add(mk(tar.Header{Name: "usr/bin/python3", Typeflag: tar.TypeSymlink, Linkname: "python3.11"},
		tar.Header{Name: "usr/bin/python3.11", Typeflag: tar.TypeReg, Size: 16, Mode: 0o755}), "")
	f.Add(mk(tar.Header{Name: "usr/bin/python3", Typeflag: tar.TypeSymlink, Linkname: "/usr/bin/python3"}), "")
	f.Add(mk(tar.Header{Name: "usr/bin/.wh.python3", Typeflag: tar.TypeReg}, tar.Header{Name: "usr/.wh..wh..opq", Typeflag: tar.TypeReg}), "/usr/bin/python3")
	f.Add([]byte("not gzip"), "/x")
	f.Fuzz(func(t *testing.T, layer []byte, want string) {
		fs := map[string]*node{}
		_ = scanLayer(bytes.NewReader(layer), fs, want, newScanBudget())
		_, _ = findInterpreter(fs, want)
	})
}

// FuzzVersionIn: the version search over any bytes.
func FuzzVersionIn(f *testing.F) {
	f.Add([]byte("\x003.11.2\x00"), "3.11")
	f.Add([]byte("\x003.12.0rc1\x00\x003.12.1\x00"), "3.12")
	f.Fuzz(func(t *testing.T, b []byte, xy string) {
		vs, err := newScanBudget().versionsIn(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		fs := map[string]*node{"/p": {typeflag: tar.TypeReg, versions: vs}}
		_, _ = versionIn(fs, "/p", xy)
	})
}

// FuzzOpenEnvelope: any envelope bytes are refused or opened under the
// key, never a panic.
func FuzzOpenEnvelope(f *testing.F) {
	priv, _, _ := sign.Generate([]byte("pw"))
	k, _ := sign.LoadPrivateKey(priv, []byte("pw"))
	e, _ := envelope(k, []byte(`{"_type":"https://in-toto.io/Statement/v1"}`))
	f.Add(e)
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"sig":"AAAA"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		body, signer, err := openEnvelope(b, []*sign.PublicKey{k.Public()})
		if err == nil && (signer == nil || body == nil) {
			t.Fatal("opened without a signer")
		}
	})
}
