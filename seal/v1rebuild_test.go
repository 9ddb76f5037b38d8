package seal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// TestV1SealDriftAdvisesItsInputs: a drifted env with a v1 seal (cruxprov
// of 2026-11-29 and -30), which names its root by name, version and
// sha256 but not the root wheel's file, is advised the rebuild from the
// inputs it names (rebuild_env with NAME==VERSION@sha256:HEX, its
// platform and interpreter), not the rebuild from its seal (replace_env),
// which refuses such a seal; a v2 seal is still advised the rebuild from
// the seal.
func TestV1SealDriftAdvisesItsInputs(t *testing.T) {
	e := sealTree(t, func(t testing.TB, root string) {
		if err := os.WriteFile(root+"/a.py", []byte("print(1)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	s, err := Load(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	root := &Root{Name: "acme-echo", Version: "1.0.0", SHA256: digest.Sum([]byte("acme_echo-1.0.0-py3-none-any.whl"))}
	v1, err := digest.LocalMaterializationDigestV1(s.Materialization.Platform, s.Materialization.Interpreter, s.Resolution.Digest, root)
	if err != nil {
		t.Fatal(err)
	}
	s.Format, s.Materialization.Digest, s.Materialization.Bytecode, s.Materialization.Root, s.Resolution.Root = FormatV1, v1, nil, root, nil
	s.Env.Location = ""
	dir := filepath.Join(filepath.Dir(e.dir), v1.Hex())
	os.Chmod(e.dir, 0o755)
	if err := os.Rename(e.dir, dir); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o555)
	os.Rename(StatIndexPath(e.dir), StatIndexPath(dir))
	os.Remove(SealPath(e.dir))
	b, _ := s.Marshal()
	writeSeal(t, dir, b)
	if _, err := Verify(context.Background(), dir, Options{}); err != nil {
		t.Fatalf("the v1 seal: %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, "a.py"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Verify(context.Background(), dir, Options{})
	rem := refusal.RemedyOf(err)
	if refusal.CodeOf(err) != refusal.EnvDrift || rem == nil || rem.Action != refusal.ActionRebuildEnv || rem.Target != dir ||
		rem.Package != "acme-echo==1.0.0@sha256:"+root.SHA256.Hex() || len(rem.Platforms) != 1 || rem.Platforms[0] != s.Materialization.Platform ||
		rem.Python != s.Materialization.Interpreter.Path || !strings.Contains(err.Error(), "a v1 seal names the root acme-echo 1.0.0, not its wheel file") {
		t.Fatalf("a drifted v1 env: %v (remedy %+v)", err, rem)
	}
	// A seal that names its root wheel's file is rebuilt from the seal.
	w := &Package{Name: root.Name, Version: root.Version, Filename: "acme_echo-1.0.0-py3-none-any.whl", SHA256: root.SHA256, Size: 1}
	s.Resolution.Root = w
	if !s.RebuildsAlone() {
		t.Fatal("a seal with its root wheel cannot rebuild alone")
	}
	if rem := refusal.RemedyOf(s.RebuildRemedy(refusal.New(refusal.EnvDrift, "x"), dir)); rem == nil || rem.Action != refusal.ActionReplaceEnv || rem.Target != dir {
		t.Fatalf("a seal with its root wheel: remedy %+v", rem)
	}
}
