package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/sign"
)

// TestKeyGenerateFullDisk: a key generate that runs out of space leaves no
// file behind, so that the same command, once there is room, makes the
// pair. It left an empty PREFIX.key (no room for it) or a PREFIX.key
// beside an empty PREFIX.pub (room for one page), and the retry refused
// "exists: not overwriting a key". A real 12 KiB tmpfs (three pages), with
// no page free, then one.
func TestKeyGenerateFullDisk(t *testing.T) {
	for _, free := range []int{0, 1} {
		dir := testdir.Tmpfs(t, "12k")
		fill := filepath.Join(dir, "fill")
		if err := os.WriteFile(fill, make([]byte, (3-free)*4096), 0o644); err != nil {
			t.Fatal(err)
		}
		prefix := filepath.Join(dir, "keys", "alice")
		gen := func() result {
			cmd := exec.Command(bin, "key", "generate", "--out", prefix)
			cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir(), "CRUXPROV_KEY_PASSWORD=pw")
			return runCmd(t, cmd)
		}
		// One line naming the file of the pair and what to do (it named
		// only a temp file: "write …/.tmp-alice.key-…: no space left").
		if r := gen(); r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: --out: cannot write "+prefix+".") ||
			!strings.Contains(r.stderr, "its file system is full: free space there") {
			t.Fatalf("%d pages free: a full disk: %+v", free, r)
		}
		for _, p := range []string{prefix + ".key", prefix + ".pub"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%d pages free: %s left behind", free, p)
			}
		}
		os.Remove(fill)
		if r := gen(); r.code != 0 {
			t.Fatalf("%d pages free: the retry with room: %+v", free, r)
		}
	}
}

// keyGen runs key generate --out prefix --json with password pw (none:
// unset) and decodes what it says when it exits 0.
func keyGen(t *testing.T, prefix, pw string) (genResult, result) {
	t.Helper()
	cmd := exec.Command(bin, "key", "generate", "--out", prefix, "--json")
	cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir(), "CRUXPROV_KEY_PASSWORD="+pw)
	r := runCmd(t, cmd)
	var v genResult
	if r.code == 0 {
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("key generate: %v: %+v", err, r)
		}
	}
	return v, r
}

// genResult is what key generate --json says.
type genResult struct {
	PrivateKey string `json:"private_key"`
	PublicKey  string `json:"public_key"`
	Digest     string
	Completed  bool
}

// keyTemps lists the temp files beside prefix's key pair.
func keyTemps(t *testing.T, prefix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(filepath.Dir(prefix), ".tmp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// wantPair checks that prefix holds a whole key pair that opens with
// "pw", modes 0600 and 0644, whose .key is wantKey (when not nil) and
// whose .pub is wantPub (when not nil), and no temp file beside it.
func wantPair(t *testing.T, prefix string, wantKey, wantPub []byte) {
	t.Helper()
	kb, err := os.ReadFile(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	pb, err := os.ReadFile(prefix + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if wantKey != nil && !bytes.Equal(kb, wantKey) {
		t.Errorf("%s.key was rewritten", prefix)
	}
	if wantPub != nil && !bytes.Equal(pb, wantPub) {
		t.Errorf("%s.pub is not the original:\n%s\nwant\n%s", prefix, pb, wantPub)
	}
	k, err := sign.LoadPrivateKey(kb, []byte("pw"))
	if err != nil {
		t.Fatalf("%s.key does not open: %v", prefix, err)
	}
	if !bytes.Equal(k.Public().PEM(), pb) {
		t.Errorf("%s.pub is not %s.key's public key", prefix, prefix)
	}
	for p, m := range map[string]os.FileMode{".key": 0o600, ".pub": 0o644} {
		if fi, err := os.Stat(prefix + p); err != nil || fi.Mode().Perm() != m {
			t.Errorf("%s%s: mode %v, want %v", prefix, p, fi.Mode(), m)
		}
	}
	if tmp := keyTemps(t, prefix); len(tmp) != 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

// TestKeyGenerateInterrupted: key generate run again finishes what a
// run killed between its writes left, and never overwrites a key. It
// refused a lone PREFIX.key ("exists: not overwriting a key"), whose
// remedy, moving it away, loses the key. Each state a kill leaves is made
// here from a real pair: PREFIX.key alone (killed before PREFIX.pub's
// link), with a temp file that is its second name (killed before the
// temp's removal); the pair with a temp file that is PREFIX.pub's second
// name; temp files alone (killed before PREFIX.key's link). A wrong
// password changes nothing; a pair (without such a temp file) and a lone
// PREFIX.pub are refused as before, and so is a PREFIX.key that is no
// key (an older cruxprov killed while writing it), which is kept.
func TestKeyGenerateInterrupted(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "keys", "alice")
	orig, r := keyGen(t, prefix, "pw")
	if r.code != 0 || orig.Completed || strings.Contains(r.stdout, "completed") {
		t.Fatalf("key generate: %+v", r)
	}
	key, _ := os.ReadFile(prefix + ".key")
	pub, _ := os.ReadFile(prefix + ".pub")
	second := func(p, tmp string) {
		t.Helper()
		if err := os.Link(p, filepath.Join(filepath.Dir(p), tmp)); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("lone key, a wrong password", func(t *testing.T) {
		os.Remove(prefix + ".pub")
		second(prefix+".key", ".tmp-alice.key-1234")
		_, r := keyGen(t, prefix, "not the password")
		if r.code != exitFailure || !strings.Contains(r.stderr, "does not open") || !strings.Contains(r.stderr, "nothing was written") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("a wrong password: %+v", r)
		}
		if _, err := os.Lstat(prefix + ".pub"); err == nil {
			t.Error("a wrong password wrote the public key")
		}
		if b, _ := os.ReadFile(prefix + ".key"); !bytes.Equal(b, key) {
			t.Error("a wrong password changed the private key")
		}
		if tmp := keyTemps(t, prefix); len(tmp) != 1 {
			t.Errorf("a wrong password changed the temp files: %v", tmp)
		}
	})
	t.Run("lone key completed", func(t *testing.T) {
		v, r := keyGen(t, prefix, "pw")
		if r.code != 0 || !v.Completed || v.Digest != orig.Digest || v.PublicKey != prefix+".pub" {
			t.Fatalf("the same command again: %+v", r)
		}
		wantPair(t, prefix, key, pub)
		cmd := exec.Command(bin, "key", "generate", "--out", prefix)
		cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir(), "CRUXPROV_KEY_PASSWORD=pw")
		os.Remove(prefix + ".pub")
		if r := runCmd(t, cmd); r.code != 0 || !strings.Contains(r.stdout, "completed the pair of an interrupted key generate") || !strings.Contains(r.stdout, orig.Digest) {
			t.Fatalf("the text: %+v", r)
		}
		wantPair(t, prefix, key, pub)
	})
	t.Run("pair with the public key's temp", func(t *testing.T) {
		second(prefix+".pub", ".tmp-alice.pub-99")
		if _, r := keyGen(t, prefix, "wrong"); r.code != exitFailure || len(keyTemps(t, prefix)) != 1 {
			t.Errorf("a wrong password: %+v", r)
		}
		v, r := keyGen(t, prefix, "pw")
		if r.code != 0 || !v.Completed || v.Digest != orig.Digest {
			t.Fatalf("the same command again: %+v", r)
		}
		wantPair(t, prefix, key, pub)
	})
	t.Run("pair refused", func(t *testing.T) {
		// A temp file that is not PREFIX.pub's second name says nothing
		// about the pair: refused, and the temp file stays.
		os.WriteFile(filepath.Join(dir, "keys", ".tmp-alice.pub-5"), pub, 0o644)
		if _, r := keyGen(t, prefix, "pw"); r.code != exitFailure || !strings.Contains(r.stderr, "alice.key exists: not overwriting a key") {
			t.Errorf("both files there: %+v", r)
		}
		if b, _ := os.ReadFile(prefix + ".key"); !bytes.Equal(b, key) {
			t.Error("the private key changed")
		}
		os.Remove(filepath.Join(dir, "keys", ".tmp-alice.pub-5"))
	})
	t.Run("lone public key refused", func(t *testing.T) {
		p := filepath.Join(dir, "keys", "bob")
		os.WriteFile(p+".pub", pub, 0o644)
		if _, r := keyGen(t, p, "pw"); r.code != exitFailure || !strings.Contains(r.stderr, "bob.pub exists: not overwriting a key") {
			t.Errorf("a lone public key: %+v", r)
		}
		if _, err := os.Lstat(p + ".key"); err == nil {
			t.Error("wrote a private key beside a lone public key")
		}
	})
	t.Run("temp files alone", func(t *testing.T) {
		p := filepath.Join(dir, "keys", "carol")
		os.WriteFile(filepath.Join(dir, "keys", ".tmp-carol.key-77"), key[:100], 0o600)
		os.WriteFile(filepath.Join(dir, "keys", ".tmp-carol.pub-78"), nil, 0o600)
		v, r := keyGen(t, p, "pw")
		if r.code != 0 || v.Completed {
			t.Fatalf("a new pair beside a killed run's temp files: %+v", r)
		}
		wantPair(t, p, nil, nil)
		if b, _ := os.ReadFile(p + ".key"); bytes.Equal(b, key) {
			t.Error("carol has alice's key")
		}
	})
	t.Run("empty key kept", func(t *testing.T) {
		p := filepath.Join(dir, "keys", "dave")
		os.WriteFile(p+".key", nil, 0o600)
		if _, r := keyGen(t, p, "pw"); r.code != exitFailure || !strings.Contains(r.stderr, "not a PEM private key") || !strings.Contains(r.stderr, "move it away") {
			t.Errorf("an empty PREFIX.key: %+v", r)
		}
		if _, err := os.Lstat(p + ".key"); err != nil {
			t.Error("removed a file named as a key")
		}
		if _, err := os.Lstat(p + ".pub"); err == nil {
			t.Error("wrote a public key for no key")
		}
	})
}

// TestKeyGenerateKilled kills key generate (SIGKILL, strace's fault
// injection) at its n-th fsync, then its n-th link, then its n-th unlink,
// for each n until it runs through: the sync of the directory it makes,
// and for the private key and then the public key the temp file's sync
// (written, not synced), the link that names the file, the directory's
// sync and the temp name's removal (strace counts per thread: a kill
// may come later than the n-th of the process, never earlier). After
// each kill the same command run again exits 0 with a whole pair; a
// PREFIX.key the kill left is kept as it was, and the run says it
// completed the pair; no temp file is left. It refused "PREFIX.key
// exists" once PREFIX.key was named.
func TestKeyGenerateKilled(t *testing.T) {
	strace := straceOrSkip(t)
	seen := map[string]bool{}
	for _, sc := range []string{"fsync", "link,linkat", "unlink,unlinkat"} {
		for n := 1; ; n++ {
			if n > 10 {
				t.Fatalf("%s: not through after 10 kills", sc)
			}
			prefix := filepath.Join(t.TempDir(), "keys", "alice")
			cmd := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace="+sc,
				"-e", "inject="+sc+":signal=SIGKILL:when="+strconv.Itoa(n), bin, "key", "generate", "--out", prefix)
			cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir(), "CRUXPROV_KEY_PASSWORD=pw")
			if r := runCmd(t, cmd); r.code == 0 {
				if n == 1 {
					t.Fatalf("%s: not killed at the first: %+v", sc, r)
				}
				break
			}
			key, kerr := os.ReadFile(prefix + ".key")
			_, perr := os.Lstat(prefix + ".pub")
			state := fmt.Sprintf("key %v, pub %v, %d temp files", kerr == nil, perr == nil, len(keyTemps(t, prefix)))
			seen[state] = true
			v, r := keyGen(t, prefix, "pw")
			if r.code != 0 || v.Completed != (kerr == nil) {
				t.Fatalf("killed at %s %d (%s): the same command again: %+v", sc, n, state, r)
			}
			if kerr != nil {
				key = nil
			}
			wantPair(t, prefix, key, nil)
		}
	}
	t.Logf("states the kills left: %v", seen)
	// Killed before PREFIX.key's link, before PREFIX.pub's, and before
	// the removal of PREFIX.pub's temp name, at least.
	for _, s := range []string{"key false, pub false, 1 temp files", "key true, pub false, 1 temp files", "key true, pub true, 1 temp files"} {
		if !seen[s] {
			t.Errorf("no kill left %s", s)
		}
	}
}

// TestKeyGenerateCompletesOnlyItsOwn: a lone PREFIX.key that is not what
// key generate writes (mode 0600, this user's) was not left by an
// interrupted run: key generate refuses it as it did before, writes no
// PREFIX.pub and leaves the key as it is. It "completed the pair" of a
// private key readable by everyone and said "private key PREFIX.key
// (0600)" of it.
func TestKeyGenerateCompletesOnlyItsOwn(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "keys", "alice")
	if _, r := keyGen(t, prefix, "pw"); r.code != 0 {
		t.Fatalf("key generate: %+v", r)
	}
	os.Remove(prefix + ".pub")
	if err := os.Chmod(prefix+".key", 0o644); err != nil {
		t.Fatal(err)
	}
	_, r := keyGen(t, prefix, "pw")
	if r.code != exitFailure || !strings.Contains(r.stderr, "alice.key exists") || !strings.Contains(r.stderr, "0644") || strings.Contains(r.stdout, "completed") {
		t.Errorf("a lone PREFIX.key of mode 0644: %+v", r)
	}
	if _, err := os.Lstat(prefix + ".pub"); err == nil {
		t.Error("wrote a public key for a key key generate did not leave")
	}
	if fi, err := os.Stat(prefix + ".key"); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the key: %v %v", fi, err)
	}
	if os.Geteuid() != 0 {
		return
	}
	// Another user's key, 0600 (root reads it): refused too.
	if err := os.Chmod(prefix+".key", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(prefix+".key", 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, r := keyGen(t, prefix, "pw"); r.code != exitFailure || !strings.Contains(r.stderr, "alice.key exists") || !strings.Contains(r.stderr, "uid 65534") {
		t.Errorf("another user's lone PREFIX.key: %+v", r)
	}
	if _, err := os.Lstat(prefix + ".pub"); err == nil {
		t.Error("wrote a public key for another user's key")
	}
}

// TestKeyGenerateNoHardLinks: a directory on a file system without hard
// links (vfat, exFAT: a key kept on a USB stick), whose link(2) fails
// EPERM, still gets a whole key pair, written exclusively, as key
// generate wrote it before it linked its temp files; and never over a
// file. strace fails every link(2) with EPERM. It failed "operation not
// permitted" and wrote nothing.
func TestKeyGenerateNoHardLinks(t *testing.T) {
	strace := straceOrSkip(t)
	gen := func(prefix string) result {
		cmd := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=link,linkat",
			"-e", "inject=link,linkat:error=EPERM", bin, "key", "generate", "--out", prefix)
		cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir(), "CRUXPROV_KEY_PASSWORD=pw")
		return runCmd(t, cmd)
	}
	prefix := filepath.Join(t.TempDir(), "keys", "alice")
	if r := gen(prefix); r.code != 0 {
		t.Fatalf("key generate where link(2) fails EPERM: %+v", r)
	}
	wantPair(t, prefix, nil, nil)
	key, _ := os.ReadFile(prefix + ".key")
	os.Remove(prefix + ".pub")
	if err := os.WriteFile(prefix+".pub", []byte("another file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := gen(prefix); r.code != exitFailure || !strings.Contains(r.stderr, "exists") {
		t.Errorf("a pair there: %+v", r)
	}
	if b, _ := os.ReadFile(prefix + ".key"); !bytes.Equal(b, key) {
		t.Error("the private key was overwritten")
	}
	if b, _ := os.ReadFile(prefix + ".pub"); string(b) != "another file" {
		t.Error("the file at PREFIX.pub was overwritten")
	}
}

// TestKeyGenerateConcurrent: a key generate held up (strace delays it)
// before linking PREFIX.key, or between linking PREFIX.key and PREFIX.pub,
// while the same command runs again. The second run waits for the first
// (a lock on the directory), says so, then finds the pair whole and
// refuses to overwrite it; the first exits 0 and its pair stays. Without
// the lock, the second removed the first's temp file as a killed run's:
// held before PREFIX.key, the first then failed (its temp file gone) and
// the second made a pair of its own; held before PREFIX.pub, the second
// completed the pair, and where it linked PREFIX.pub first, the first
// removed PREFIX.key, the key the second had just reported.
func TestKeyGenerateConcurrent(t *testing.T) {
	strace := straceOrSkip(t)
	for _, held := range []string{".key", ".pub"} {
		t.Run("held before "+held, func(t *testing.T) {
			prefix := filepath.Join(t.TempDir(), "keys", "alice")
			// The link of that file, whichever thread makes it (strace
			// counts a when= per thread, and Go's syscalls move between
			// threads).
			cmd := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-P", prefix+held, "-e", "trace=link,linkat",
				"-e", "inject=link,linkat:delay_enter=3000000", bin, "key", "generate", "--out", prefix, "--json")
			cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir(), "CRUXPROV_KEY_PASSWORD=pw")
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The first run is in its delay once its temp file of that
			// file is there (and, for PREFIX.pub, PREFIX.key).
			deadline := time.Now().Add(30 * time.Second)
			for {
				temps, _ := atomicfile.Temps(prefix + held)
				if len(temps) > 0 {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("the first key generate wrote no temp file of PREFIX%s", held)
				}
				time.Sleep(10 * time.Millisecond)
			}
			_, r := keyGen(t, prefix, "pw")
			if err := cmd.Wait(); err != nil {
				t.Fatalf("the first key generate: %v: %s", err, errb.String())
			}
			if r.code != 1 || !strings.Contains(r.stderr, "another key generate is writing in "+filepath.Dir(prefix)+"; waiting for it to finish") ||
				!strings.Contains(r.stderr, "alice.key exists: not overwriting a key") {
				t.Fatalf("the second key generate: %+v", r)
			}
			var first genResult
			if err := json.Unmarshal([]byte(out.String()), &first); err != nil {
				t.Fatalf("the first key generate said %q: %v", out.String(), err)
			}
			key, err := os.ReadFile(prefix + ".key")
			if err != nil {
				t.Fatalf("the key is gone: %v", err)
			}
			wantPair(t, prefix, key, nil)
			pb, _ := os.ReadFile(prefix + ".pub")
			if pk, err := sign.ParsePublicKey(pb); err != nil || pk.Digest().String() != first.Digest {
				t.Errorf("PREFIX.pub is not the key the first run reported, %s (%v)", first.Digest, err)
			}
		})
	}
}

// TestKeyGenerateOutNamesADirectory: an --out that ends in a directory
// ("DIR/", "DIR/.", "DIR/..") is a usage error writing nothing. It wrote
// the pair as the hidden DIR/.key and DIR/.pub (DIR/..key for "DIR/."),
// which key trust then refused to name (a key named "").
func TestKeyGenerateOutNamesADirectory(t *testing.T) {
	dir := t.TempDir()
	for _, out := range []string{dir + "/", dir + "/.", dir + "/sub/.."} {
		cmd := exec.Command(bin, "key", "generate", "--out", out)
		cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir(), "CRUXPROV_KEY_PASSWORD=pw")
		r := runCmd(t, cmd)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--out "+out+" ends in a directory, not a file name: give --out DIR/NAME") {
			t.Errorf("--out %s: %+v", out, r)
		}
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("key generate wrote in %s: %v %v", dir, ents, err)
	}
}

// TestKeyGenerateOutUnderAFile: an --out whose directory is a file says
// which file stands in the way and what to do; it said only "mkdir DIR:
// not a directory".
func TestKeyGenerateOutUnderAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "key", "generate", "--out", filepath.Join(file, "keys", "alice"))
	cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir(), "CRUXPROV_KEY_PASSWORD=pw")
	r := runCmd(t, cmd)
	if r.code != exitFailure || !strings.Contains(r.stderr, file+" is a file, not a directory: give --out a prefix in a directory (DIR/NAME), and run again") {
		t.Fatalf("%+v", r)
	}
}
