package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvByHexNamesTheDirectoryHere: in the envs/ of a store that is not
// the one --home (or CRUXPROV_HOME) names, the env's name as env list and
// ls show it, its whole hex digest, was taken for a digest of the other
// store: env verify said ok of that store's env of the same digest (the
// same inputs make the same digest in every store), and env remove
// removed it, not the one named. A bare hex that names a file here is
// that path, as a bare prefix already was; sha256:HEX is still the
// digest. Found walking operator.md §5 as a new operator.
func TestEnvByHexNamesTheDirectoryHere(t *testing.T) {
	here, lock := envHome(t, 1, 3)
	out := createJSON(t, createArgs(here, lock, "--no-compile")...)
	other, otherLock := envHome(t, 1, 3) // the same wheels
	if o := createJSON(t, createArgs(other, otherLock, "--no-compile")...); o.Digest != out.Digest {
		t.Fatalf("the same inputs made %s and %s", o.Digest, out.Digest)
	}
	hex := out.Digest.Hex()
	envs := filepath.Join(here, "envs")
	otherEnv := filepath.Join(other, "envs", hex)
	run := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+other)
		cmd.Dir = envs
		return runCmd(t, cmd)
	}
	r := run("env", "verify", hex, "--json")
	var doc struct{ Env string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Env != out.Path {
		t.Errorf("env verify %s in %s: %+v, want the env %s", hex, envs, r, out.Path)
	}
	r = run("env", "remove", hex)
	if r.code != exitUsage || !strings.Contains(r.stderr, out.Path+" is not an env of the store "+other+": give its store: --home "+here) {
		t.Errorf("env remove %s in %s with another store's home: %+v", hex, envs, r)
	}
	if _, err := os.Stat(otherEnv); err != nil {
		t.Fatalf("env remove %s in %s removed the other store's env: %v", hex, envs, err)
	}
	// sha256:HEX is the digest: the env of the store named.
	if r := run("env", "verify", "sha256:"+hex, "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Env != otherEnv {
		t.Errorf("env verify sha256:%s: %+v, want the env %s", hex, r, otherEnv)
	}
}

// TestEnvByDigestUnderARelativeHome: under a relative --home an env named
// by its digest, whole or a prefix, was named relative to it ("ok
// rel/envs/<hex>", "env": "rel/envs/<hex>" in --json, the refusals too)
// where the same env named by its path, and env create, name it by its
// absolute path. It is named so too. Found walking operator.md §5.
func TestEnvByDigestUnderARelativeHome(t *testing.T) {
	other, lock := envHome(t, 1, 3)
	otherEnv := createJSON(t, createArgs(other, lock, "--no-compile")...).Path
	hex := filepath.Base(otherEnv)
	var doc struct{ Env string }
	for _, arg := range []string{hex, hex[:12], "sha256:" + hex[:12]} {
		cmd := exec.Command(bin, "--home", filepath.Base(other), "env", "verify", arg, "--json")
		cmd.Dir = filepath.Dir(other)
		r := runCmd(t, cmd)
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Env != otherEnv {
			t.Errorf("--home %s env verify %s: %+v, want the env %s", filepath.Base(other), arg, r, otherEnv)
		}
	}
}
