package seal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/treehash"
)

// TestDeepFindsWhatFastCannot holds DESIGN §9's line between the two
// modes for the env's own files (TestInterpreterSameStatOtherBytes holds
// it for the interpreter): fast verify detects drift by metadata,
// rehashing only what changed its stat, and --deep by content, rehashing
// every file. A file whose bytes differ while its stat is the indexed one
// (an edit that kept its ctime and inode: a raw block write, a clock set
// back; a ctime cannot be set from user space, so the index is rewritten
// here to stand for it) passes fast verify and is refused env_drift
// (content) by --deep, whatever --jobs. A --deep that trusted the index
// for unchanged stats, as fast does, passed it.
func TestDeepFindsWhatFastCannot(t *testing.T) {
	env := sealTree(t, manyEntries(3, 4))
	ix := indexOf(t, env.dir)
	i := -1
	for j, e := range ix.Entries {
		if e.Kind == treehash.File {
			i = j
		}
	}
	if i < 0 {
		t.Fatal("no file in the env")
	}
	rel := ix.Entries[i].Path
	p := filepath.Join(env.dir, filepath.FromSlash(rel))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20 // same size, other bytes
	mode := os.FileMode(ix.Entries[i].Mode)
	time.Sleep(10 * time.Millisecond) // a ctime tick later on any kernel
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(context.Background(), env.dir, Options{}); !errors.Is(err, refusal.EnvDrift) {
		t.Fatalf("fast, the file's stat changed: %v, want env_drift (its ctime changed, so it is rehashed)", err)
	}
	// The index now states the edited file's stat with the old sha256;
	// the seal names the new index's bytes. The tree digest, the
	// materialization digest and the seal content digest are unchanged.
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	e := &ix.Entries[i]
	e.MtimeNS, e.CtimeNS, e.Ino = st.Mtim.Nano(), st.Ctim.Nano(), st.Ino
	ib, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load(env.dir)
	if err != nil {
		t.Fatal(err)
	}
	before, err := ContentDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	s.Index.SHA256 = digest.Sum(ib)
	sb, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{StatIndexPath(env.dir): ib, SealPath(env.dir): sb} {
		os.Chmod(path, 0o644)
		if err := os.WriteFile(path, data, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if after, err := ContentDigest(s); err != nil || after != before {
		t.Fatalf("the seal content digest moved with the index: %s, %v; was %s", after, err, before)
	}
	if rep, err := Verify(context.Background(), env.dir, Options{}); err != nil || rep.Rehashed != 0 {
		t.Fatalf("fast, the indexed stat: %v, %d rehashed; want ok, none rehashed (fast mode trusts an unchanged stat)", err, rep.Rehashed)
	}
	for _, jobs := range []int{1, 4} {
		t.Run(fmt.Sprintf("jobs=%d", jobs), func(t *testing.T) {
			rep, err := Verify(context.Background(), env.dir, Options{Deep: true, Jobs: jobs})
			if !errors.Is(err, refusal.EnvDrift) || len(rep.Differences) == 0 || rep.Differences[0].Path != rel || rep.Differences[0].Change != Content {
				t.Fatalf("deep, the indexed stat, other bytes: %v %+v, want env_drift, content of %s", err, rep.Differences, rel)
			}
		})
	}
}

// TestFreezeRefusesWhatTheTreeDigestRefuses: the tree digest of DESIGN
// §5 has no record for a name that is not UTF-8 nor for a device, FIFO
// or socket, so an env holding one is never sealed (Freeze refuses,
// naming the path), and one planted in a sealed env is a difference
// (env_drift, added) in fast and deep verify alike, never skipped. Only
// treehash.Walk's refusals had tests; the seal walks the tree itself.
func TestFreezeRefusesWhatTheTreeDigestRefuses(t *testing.T) {
	plants := []struct {
		name  string
		path  string
		plant func(t *testing.T, p string)
	}{
		{"a name that is not UTF-8", "lib/bad\xffname.py", func(t *testing.T, p string) {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a directory whose name is not UTF-8", "lib/bad\xfedir", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"a FIFO", "lib/fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, pl := range plants {
		t.Run(pl.name, func(t *testing.T) {
			root := filepath.Join(testdir.New(t), "staging")
			if err := os.MkdirAll(filepath.Join(root, "lib"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "lib", "ok.py"), []byte("x = 1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			pl.plant(t, filepath.Join(root, filepath.FromSlash(pl.path)))
			if ix, err := Freeze(context.Background(), root, nil, 2); err == nil {
				t.Errorf("Freeze sealed a tree with %s: %d entries", pl.name, len(ix.Entries))
			}
			env := sealTree(t, manyEntries(1, 1))
			p := filepath.Join(env.dir, filepath.FromSlash(pl.path))
			lib := filepath.Dir(p)
			if err := os.MkdirAll(lib, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chmod(env.dir, 0o755)
			os.Chmod(lib, 0o755)
			pl.plant(t, p)
			// The modes put back: the planted entry is the difference.
			os.Chmod(lib, 0o555)
			os.Chmod(env.dir, 0o555)
			for _, deep := range []bool{false, true} {
				_, err := Verify(context.Background(), env.dir, Options{Deep: deep})
				if !errors.Is(err, refusal.EnvDrift) {
					t.Errorf("deep=%v, %s planted in the env: %v, want env_drift", deep, pl.name, err)
				}
			}
		})
	}
}
