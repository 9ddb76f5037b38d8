package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/sign"
)

// TestImageBuildsIntoOneLayoutTakeTurns: two image builds into one
// layout at once (two CI jobs, each with its own store) both end in it.
// Each held only its store's lock: both read index.json before either
// wrote it, and the one that wrote last dropped the other's image and its
// .sig and .att entries, both builds exiting 0 (image verify of the lost
// one: "has no signature"). Here strace holds build A's read of
// index.json (its open returns 6 s late) once A's image is in the blobs;
// build B runs then, whole. Now B waits for the layout, says so, and
// writes after A: index.json names both images, and each verifies.
// Interrupted while it waits, a build says so and leaves the layout as
// it was.
func TestImageBuildsIntoOneLayoutTakeTurns(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	strace := straceOrSkip(t)
	baseLayout, baseDigest := imagetest.Base(t)
	dir := testdir.New(t)
	fx, idx := fixtureindex.Serve(t, dir)
	priv, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyPath, pubPath := filepath.Join(dir, "builder.key"), filepath.Join(dir, "builder.pub")
	os.WriteFile(keyPath, priv, 0o600)
	os.WriteFile(pubPath, pub, 0o644)
	const repo = "localhost/acme/img"
	env := append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000")
	args := func(home, wheel, out string) []string {
		return []string{"--home", home, "image", "build", "--wheel", wheel, "--index", idx, "--platform", imagetest.Platform,
			"--base", "oci:" + baseLayout + "@" + baseDigest.String(), "--shim", imagetest.Shim(t), "--output", "oci:" + out,
			"--sign-key", keyPath, "--repo", repo, "--json"}
	}
	digestOf := func(what string, r result) string {
		t.Helper()
		var doc struct{ Digest string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Digest == "" {
			t.Fatalf("%s: %+v", what, r)
		}
		return doc.Digest
	}
	build := func(what string, a []string) result {
		t.Helper()
		cmd := exec.Command(bin, a...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	// Each job's store, with its env layer cached, and its image's digest
	// (the same inputs build the same digest).
	homeA, homeB := filepath.Join(dir, "homeA"), filepath.Join(dir, "homeB")
	dA := digestOf("build A alone", build("build A alone", args(homeA, fx.Echo.Path, filepath.Join(dir, "aloneA"))))
	dB := digestOf("build B alone", build("build B alone", args(homeB, fx.Scripts.Path, filepath.Join(dir, "aloneB"))))

	layout := filepath.Join(dir, "layout")
	a := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null", "-P", filepath.Join(layout, "index.json"),
		"-e", "trace=openat,open", "-e", "inject=openat,open:delay_exit=6000000", bin}, args(homeA, fx.Echo.Path, layout)...)...)
	a.Env = env
	var aOut, aErr syncBuffer
	a.Stdout, a.Stderr = &aOut, &aErr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	aDone := make(chan error, 1)
	go func() { aDone <- a.Wait() }()
	// A writes its image's blobs, then its signature's and attestations',
	// then reads index.json (held 6 s).
	manifestA := filepath.Join(layout, "blobs", "sha256", strings.TrimPrefix(dA, "sha256:"))
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(manifestA); err == nil {
			break
		}
		select {
		case err := <-aDone:
			t.Fatalf("build A ended before it wrote its image (%v): stdout %q, stderr %q", err, aOut.String(), aErr.String())
		default:
		}
		if time.Now().After(deadline) {
			a.Process.Kill()
			<-aDone
			t.Fatalf("build A wrote no image in 2 minutes: stderr %q", aErr.String())
		}
	}
	rB := build("build B beside A", args(homeB, fx.Scripts.Path, layout))
	if err := <-aDone; err != nil {
		t.Fatalf("build A beside B: %v, stderr %q", err, aErr.String())
	}
	if got := digestOf("build A beside B", result{stdout: aOut.String(), stderr: aErr.String()}); got != dA {
		t.Fatalf("build A beside B built %s, alone %s", got, dA)
	}
	if got := digestOf("build B beside A", rB); got != dB {
		t.Fatalf("build B beside A built %s, alone %s", got, dB)
	}
	if want := "waiting for the layout " + layout + ": another image build is writing into it; Ctrl-C stops waiting"; strings.Count(rB.stderr, want) != 1 {
		t.Errorf("build B, beside A's write, did not say once that it waits: stderr %q", rB.stderr)
	}
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ix struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, m := range ix.Manifests {
		names[m.Annotations["org.opencontainers.image.ref.name"]] = m.Digest
	}
	for _, d := range []string{dA, dB} {
		for _, n := range []string{"sha256-" + strings.TrimPrefix(d, "sha256:") + ".sig", "sha256-" + strings.TrimPrefix(d, "sha256:") + ".att"} {
			if names[n] == "" {
				t.Errorf("index.json has no %s:\n%s", n, b)
			}
		}
	}
	if names["acme-echo"] != dA || names["acme-scripts"] != dB || len(ix.Manifests) != 6 {
		t.Fatalf("index.json after two builds at once, want %s (acme-echo) and %s (acme-scripts), each with its .sig and .att:\n%s", dA, dB, b)
	}
	for _, d := range []string{dA, dB} {
		cmd := exec.Command(bin, "--home", homeA, "image", "verify", "oci:"+layout+"@"+d, "--key", pubPath, "--repo", repo)
		cmd.Env = env
		if r := runCmd(t, cmd); r.code != 0 {
			t.Errorf("image verify %s: %+v", d, r)
		}
	}

	// Waiting, a build stops at Ctrl-C: it says so, and writes nothing.
	held := filepath.Join(dir, "held")
	if err := os.Mkdir(held, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := unix.Flock(int(h.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(bin, args(homeA, fx.Echo.Path, held)...)
	c.Env = env
	var so, se syncBuffer
	c.Stdout, c.Stderr = &so, &se
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	line := "waiting for the layout " + held + ": "
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(se.String(), line); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.Process.Kill()
			c.Wait()
			t.Fatalf("a build into a held layout said nothing of its wait: stderr %q", se.String())
		}
	}
	time.Sleep(300 * time.Millisecond) // still waiting, and not saying it again
	c.Process.Signal(syscall.SIGINT)
	werr := c.Wait()
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != exitFailure || strings.Count(se.String(), "waiting for the layout") != 1 || !strings.Contains(se.String(), "error: interrupted by a signal while it waited for the layout") {
		t.Errorf("interrupted while it waits for the layout: %v, stderr %q", werr, se.String())
	}
	var doc struct {
		Error struct{ Kind string }
	}
	if dec := json.NewDecoder(strings.NewReader(so.String())); dec.Decode(&doc) != nil || dec.More() || doc.Error.Kind != "interrupted" {
		t.Errorf("interrupted while it waits for the layout, --json: stdout %q is not the one interrupted document", so.String())
	}
	if ents, err := os.ReadDir(held); err != nil || len(ents) != 0 {
		t.Errorf("a build interrupted while it waited wrote into the layout: %v %v", ents, err)
	}
	h.Close() // lets the layout go
	if r := build("build into the layout let go", args(homeA, fx.Echo.Path, held)); r.code != 0 || strings.Contains(r.stderr, "waiting") {
		t.Errorf("a build into the layout let go: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(held, "index.json")); errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no index.json in %s", held)
	}
}
