package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDamagedCacheEntryWarned: env create meeting an unpacked-cache entry
// of the wrong size (extended, cut short) replaces it, as before, and says
// so: a warning on stderr naming the entry and what was wrong, and in the
// --json document's "warnings". It was replaced silently, where an entry
// whose bytes differ was warned of.
func TestDamagedCacheEntryWarned(t *testing.T) {
	home, lock := envHome(t, 1, 3)
	first := createJSON(t, createArgs(home, lock, "--no-compile")...)
	ents, err := filepath.Glob(filepath.Join(home, "cache", "unpacked-v1", "*"))
	if err != nil || len(ents) != 1 {
		t.Fatalf("cache entries %v (%v)", ents, err)
	}
	entry := ents[0]
	good, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	damage := func(b []byte) {
		t.Helper()
		if err := os.Remove(entry); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(entry, b, 0o444); err != nil {
			t.Fatal(err)
		}
		if r := cruxprov(t, "--home", home, "env", "remove", first.Path); r.code != 0 {
			t.Fatalf("env remove: %+v", r)
		}
	}
	says := entry + " is damaged: "

	damage(append(append([]byte{}, good...), "tampered"...))
	r := cruxprov(t, createArgs(home, lock, "--no-compile")...)
	var doc struct {
		TreeDigest string `json:"tree_digest"`
		Warnings   []string
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil {
		t.Fatalf("env create --json: %+v", r)
	}
	if !containsWith(doc.Warnings, says, " bytes, the wheel's members are ") {
		t.Errorf("--json warnings %q name no damaged %s", doc.Warnings, entry)
	}
	if doc.TreeDigest != first.TreeDigest.String() {
		t.Errorf("tree %s, want %s (the archive's)", doc.TreeDigest, first.TreeDigest)
	}

	damage(good[:len(good)-1])
	var text []string
	for _, a := range createArgs(home, lock, "--no-compile") {
		if a != "--json" {
			text = append(text, a)
		}
	}
	r = cruxprov(t, text...)
	if r.code != 0 || !strings.Contains(r.stderr, "warning: the unpacked-wheel cache entry "+says) {
		t.Errorf("env create: %+v", r)
	}
	if b, err := os.ReadFile(entry); err != nil || string(b) != string(good) {
		t.Errorf("the entry was not written again: %v", err)
	}
}

// containsWith reports whether one of ss contains every one of parts.
func containsWith(ss []string, parts ...string) bool {
	for _, s := range ss {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(s, p)
		}
		if all {
			return true
		}
	}
	return false
}
