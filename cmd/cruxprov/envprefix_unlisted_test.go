package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvPrefixUnlistedSaysWhatToDo: env verify of an env named by 8 or
// more of its hex digits, by a user who may not list the store's envs/
// (an executor that only reads the store, the directory 0711 or 0700 to
// it), exited 1 with "error: open …/envs: permission denied", nothing of
// what to do; the same env by its path was refused seal_invalid with the
// chmod that gives read access. It is refused so too, saying that the
// path or the whole digest needs no listing (found walking executor.md).
// Root lists whatever the modes: as root the test reads as uid 65534.
func TestEnvPrefixUnlistedSaysWhatToDo(t *testing.T) {
	base, reader := modesReader(t, "cruxprov-envs-unlisted-")
	home := filepath.Join(base, "store")
	envs := filepath.Join(home, "envs")
	if err := os.MkdirAll(envs, 0o755); err != nil {
		t.Fatal(err)
	}
	mode := os.FileMode(0o711) // another user may enter, not list
	if os.Geteuid() != 0 {
		mode = 0o311 // its owner too
	}
	if err := os.Chmod(envs, mode); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(envs, 0o755)
	const prefix = "9a85df66"
	fix := "; to fix: chmod a+rX " + envs
	// As root the reader (65534) is another user than envs/' owner:
	// that owner is to give read access. Then, and as an unprivileged
	// user, an envs/ that is the reader's own (0311 by its own hand):
	// "have the owner give read access" sent the owner to itself.
	type want struct{ name, says string }
	cases := []want{{"its own", "…: permission denied on " + envs + ", which is this user's own; "}}
	if os.Geteuid() == 0 {
		cases = append([]want{{"another's", "…: permission denied to this user (uid 65534) on " + envs + " (its owner: uid 0); "}}, cases...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "its own" && os.Geteuid() == 0 {
				if err := os.Chown(envs, 65534, 65534); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(envs, 0o311); err != nil {
					t.Fatal(err)
				}
			}
			r := reader("--home", home, "env", "verify", prefix)
			if r.code != exitRefused || strings.Count(r.stderr, "\n") != 1 ||
				!strings.HasPrefix(r.stderr, "refused: seal_invalid: cannot list "+envs+" to find the env sha256:"+prefix+c.says) ||
				!strings.Contains(r.stderr, "give the env's path or its whole digest, which need no listing") ||
				!strings.HasSuffix(strings.TrimSpace(r.stderr), fix) {
				t.Errorf("env verify %s of an envs/ this user may not list: %+v, want seal_invalid saying %q, ending %q", prefix, r, c.says, fix)
			}
			r = reader("--home", home, "env", "verify", "sha256:"+prefix, "--json")
			var doc struct {
				Refused struct {
					Code   string
					Remedy struct{ Action, Target, Command string }
				}
			}
			if r.code != exitRefused || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Refused.Code != "seal_invalid" ||
				doc.Refused.Remedy.Action != "grant_read" || doc.Refused.Remedy.Target != envs {
				t.Errorf("env verify sha256:%s --json: %+v", prefix, r)
			}
		})
	}
}
