package pipeline_test

import (
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
)

// TestRebuildFromV1SealNamesItsInputs: env create --replace ENV of an env
// whose seal names its root but not the root wheel's file (a v1 seal, of
// cruxprov 2026-11-29 and -30) is refused with the rebuild that works,
// from the inputs the seal names (rebuild_env: NAME==VERSION@sha256:HEX,
// the platform, the interpreter); it said "rebuild it from its wheel",
// with no command, after env verify had advised this very rebuild.
func TestRebuildFromV1SealNamesItsInputs(t *testing.T) {
	root := &seal.Root{Name: "acme-echo", Version: "1.0.0", SHA256: digest.Sum([]byte("wheel"))}
	s := &seal.Seal{Format: seal.FormatV1}
	s.Materialization.Root = root
	s.Materialization.Platform = "cp311-manylinux_2_36_x86_64"
	s.Materialization.Interpreter = digest.Interpreter{Path: "/usr/bin/python3.11", Version: "3.11.7"}
	s.Env.Compiled = true
	const dir = "/store/envs/0123"
	err := pipeline.FromSeal(s, dir)
	rem := refusal.RemedyOf(err)
	if refusal.CodeOf(err) != refusal.SealInvalid || rem == nil || rem.Action != refusal.ActionRebuildEnv || rem.Target != dir ||
		rem.Package != "acme-echo==1.0.0@sha256:"+root.SHA256.Hex() || len(rem.Platforms) != 1 || rem.Platforms[0] != s.Materialization.Platform ||
		rem.Python != "/usr/bin/python3.11" || rem.NoBytecode {
		t.Fatalf("a v1 seal: %v (remedy %+v)", err, rem)
	}
	// One that names the root wheel's file is rebuilt from.
	s.Resolution.Root = &seal.Package{Name: root.Name, Version: root.Version, Filename: "acme_echo-1.0.0-py3-none-any.whl", SHA256: root.SHA256, Size: 5}
	if err := pipeline.FromSeal(s, dir); err != nil {
		t.Fatalf("a seal naming its root wheel: %v", err)
	}
}
