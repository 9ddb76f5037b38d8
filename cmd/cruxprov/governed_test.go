package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
)

// governedWorld is a governed store's world: fixture wheels served from a
// pinned index, and the two people who act on it.
type governedWorld struct {
	base, index, echo, echo2 string
	schemas                  string
	url                      string // the index served on loopback (…/simple/)
	// operator owns the store; executor only reads it and has its own
	// state directory (floors, receipts).
	operator, executor func(args ...string) result
	exState            string // the executor's XDG_STATE_HOME, which it may write
}

// newGovernedWorld lays the world out under base (world-readable).
func newGovernedWorld(t *testing.T, base string, fx *fixtures.Set) *governedWorld {
	t.Helper()
	w := &governedWorld{base: base}
	wheels := filepath.Join(base, "wheels")
	os.MkdirAll(wheels, 0o755)
	src := filepath.Dir(fx.Runtime.Path)
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(src, e.Name()))
		os.WriteFile(filepath.Join(wheels, e.Name()), b, 0o644)
	}
	w.echo = filepath.Join(wheels, filepath.Base(fx.Echo.Path))
	// acme-echo 2.0.0: the same code, manifest and lock in a new version.
	files := map[string]string{}
	for n, b := range members(t, w.echo) {
		if strings.HasPrefix(n, "acme_echo/") {
			files[n] = string(b)
		}
	}
	files["DI/cruxible/provider.toml"], files["DI/cruxible/pylock.toml"] = string(fx.Echo.Manifest), string(fx.Echo.Lock)
	v2dir := filepath.Join(base, "v2")
	os.MkdirAll(v2dir, 0o755)
	w.echo2 = wheeltest.Write(t, v2dir, "acme_echo-2.0.0-py3-none-any.whl", files)
	w.schemas = filepath.Join(base, "interfaces")
	os.MkdirAll(w.schemas, 0o755)
	for id, i := range fx.Interfaces {
		b, err := os.ReadFile(i.Path)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(w.schemas, id+".json"), b, 0o644)
	}
	w.index = filepath.Join(base, "index")
	if r := cruxprov(t, "index", "build", w.index, "--from", wheels, "--quiet"); r.code != 0 {
		t.Fatalf("index build: %+v", r)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(w.index)))
	t.Cleanup(srv.Close)
	w.url = srv.URL + "/simple/"
	return w
}

// governedFlow is the governed path end to end (issue 13, 14): register
// interfaces, install, diff, approve, verify, run with a secret and its
// receipt, tamper (refused, recorded, repaired without a new approval),
// upgrade v1 → v2 (diff, stale proposal, approval, the v1 env no longer
// pinned, gc --envs).
func governedFlow(t *testing.T, w *governedWorld, idx string) {
	t.Helper()
	const python = "/usr/bin/python3.11"
	op, ex := w.operator, w.executor
	must := func(r result, what string) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return r
	}
	refused := func(r result, code refusal.Code, what string) result {
		t.Helper()
		if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(code)+":") {
			t.Fatalf("%s: want %s: %+v", what, code, r)
		}
		return r
	}
	jsonOf := func(r result) map[string]any {
		t.Helper()
		var v map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("%v: %q", err, r.stdout)
		}
		return v
	}
	csID := func(r result) string {
		t.Helper()
		v := jsonOf(r)
		if cs, ok := v["changeSet"].(map[string]any); ok {
			return cs["metadata"].(map[string]any)["id"].(string)
		}
		t.Fatalf("no change-set in %v", v)
		return ""
	}
	install := func(wheelPath string) result {
		return op("install", wheelPath, "--platform", "host", "--python", python, "--index", idx, "--json")
	}
	must(op("interface", "register", "acme.echo", "--schema", filepath.Join(w.schemas, "acme.echo.json")), "register acme.echo")
	refused(install(w.echo), refusal.InterfaceUnregistered, "install before acme.diagnostics is registered")
	must(op("interface", "register", "acme.diagnostics", "--schema", filepath.Join(w.schemas, "acme.diagnostics.json")), "register acme.diagnostics")
	id1 := csID(must(install(w.echo), "install v1"))
	r := must(op("changeset", "diff", id1), "diff v1")
	if !strings.Contains(r.stdout, "acme-echo 1.0.0") || !strings.Contains(r.stdout, "+ cruxible-provider-runtime") || !strings.Contains(r.stdout, " changes.\n") {
		t.Errorf("diff v1: %s", r.stdout)
	}
	// Its change-set is proposed, and no key is trusted yet to approve
	// it: the root of trust first (then the approval, below).
	if r := refused(ex("verify", "acme-echo"), refusal.PinUnapproved, "verify before approval"); !strings.Contains(r.stderr, "its change-set "+id1+" is proposed, not yet approved") || !strings.Contains(r.stderr, "to fix: cruxprov key trust PUB --role approver") {
		t.Errorf("pin_unapproved without its advice: %s", r.stderr)
	}
	keys := filepath.Join(w.base, "keys")
	must(op("key", "generate", "--out", filepath.Join(keys, "alice")), "key generate")
	must(op("key", "trust", filepath.Join(keys, "alice.pub"), "--name", "alice"), "key trust")
	must(op("changeset", "approve", id1, "--key", filepath.Join(keys, "alice.key")), "approve v1")
	v := jsonOf(must(ex("verify", "acme-echo", "--entrypoint", "echo", "--json"), "verify v1"))
	env1 := v["env"].(string)
	// A flag after the positional is honoured (DESIGN §13: an ignored
	// --deep would fail open).
	if v := jsonOf(must(ex("verify", "acme-echo", "--deep", "--json"), "verify --deep")); v["mode"] != "deep" {
		t.Errorf("verify NAME --deep ran %v", v["mode"])
	}
	// It names the entrypoints there are: the line said only which was not.
	if r := refused(ex("verify", "acme-echo", "--entrypoint", "nope"), refusal.EntrypointUnknown, "unknown entrypoint"); !strings.Contains(r.stderr, `has no entrypoint "nope"; give one of: `) || !strings.Contains(r.stderr, "echo") {
		t.Errorf("unknown entrypoint: %s", r.stderr)
	}

	// Run with a secret; the receipt names both digests, the seal and the
	// protocol version.
	secret := filepath.Join(w.base, "token")
	os.WriteFile(secret, []byte("s3cr3t-\"quote\n"), 0o644)
	input := filepath.Join(w.base, "input.json")
	os.WriteFile(input, []byte(`{"hello": "world"}`), 0o644)
	r = must(ex("run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@"+secret), "run echo")
	if !strings.Contains(r.stdout, `"hello":"world"`) || strings.Contains(r.stdout+r.stderr, "s3cr3t") {
		t.Errorf("run: %+v", r)
	}
	// A refusal the ledger records names its receipt, on stderr and in
	// --json (it named none, though the ledger had it).
	// And says what to give (it said only "no --secret given for …").
	if r := refused(ex("run", "acme-echo", "echo", "--input", input), refusal.SecretUnresolved, "run without its secret"); !strings.Contains(r.stderr, "; its receipt: cruxprov receipts show att_") ||
		!strings.Contains(r.stderr, "give --secret acme/api-token=@FILE or acme/api-token=env:VAR") {
		t.Errorf("a recorded refusal that does not name its receipt: %s", r.stderr)
	} else {
		att := strings.TrimSpace(r.stderr[strings.Index(r.stderr, "receipts show ")+len("receipts show "):])
		if s := must(ex("receipts", "show", att), "receipts show of the refused run"); !strings.Contains(s.stdout, "status           refused") {
			t.Errorf("receipts show of the refused run: %s", s.stdout)
		}
		var doc struct {
			Refused struct {
				Code      string
				AttemptID string `json:"attempt_id"`
				Ledger    string
			}
		}
		r := ex("run", "acme-echo", "echo", "--input", input, "--json")
		if json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Refused.Code != "secret_unresolved" || !strings.HasPrefix(doc.Refused.AttemptID, "att_") || !strings.HasSuffix(doc.Refused.Ledger, ".jsonl") {
			t.Errorf("run --json of a recorded refusal: %+v", r)
		}
	}
	// It says so as its remedy too (name_secret): the run again with
	// --secret REF=@FILE, a --secret given for REF replaced, one for a
	// ref the manifest does not declare (a typo) dropped, the rest kept;
	// run as printed with FILE the secret's, it runs. It had only the
	// words, then kept the typo, which drew its warning again.
	for _, given := range [][]string{nil, {"--secret", "acme/api-token=@" + filepath.Join(w.base, "no-such-token")}, {"--secret", "acme/api-tokn=@" + secret}} {
		r := refused(ex(append([]string{"run", "acme-echo", "echo", "--input", input}, given...)...), refusal.SecretUnresolved, "run without its secret")
		_, fix, ok := strings.Cut(r.stderr, "; to fix: ")
		fix, _, _ = strings.Cut(fix, "; its receipt: ")
		if !ok || !strings.HasPrefix(fix, "cruxprov ") || strings.Count(fix, "--secret") != 1 || !strings.Contains(fix, " --secret acme/api-token=@FILE") || strings.Contains(fix, "no-such-token") || strings.Contains(fix, "api-tokn") {
			t.Fatalf("run %v: want the fix line with --secret acme/api-token=@FILE alone: %s", given, r.stderr)
		}
		var args []string
		fields := strings.Fields(strings.TrimSpace(fix))[1:]
		for i := 0; i < len(fields); i++ {
			if fields[i] == "--home" { // ex gives its own
				i++
				continue
			}
			args = append(args, strings.ReplaceAll(fields[i], "@FILE", "@"+secret))
		}
		must(ex(args...), "the fix line of a run without its secret")
		j := jsonOf(ex(append([]string{"run", "acme-echo", "echo", "--input", input, "--json"}, given...)...))
		rem, _ := j["refused"].(map[string]any)["remedy"].(map[string]any)
		if rem["action"] != "name_secret" || rem["target"] != "acme/api-token" {
			t.Errorf("run --json %v: remedy %v, want name_secret of acme/api-token", given, rem)
		}
	}
	// A secret file larger than the whole bundle may be is that refusal
	// (pass a smaller secret), not secret_unresolved (supply it).
	big := filepath.Join(filepath.Dir(secret), "big-secret")
	if err := os.WriteFile(big, bytes.Repeat([]byte("s"), 64<<10+1), 0o644); err != nil {
		t.Fatal(err)
	}
	refused(ex("run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@"+big), refusal.SecretBundleTooLarge, "run with a secret over 64 KiB")
	// A --secret the manifest does not declare (a typo of a ref) is
	// warned of, not delivered; it was passed over without a word.
	if r := must(ex("run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@"+secret, "--secret", "acme/api-tokn=@"+secret), "run with an undeclared secret"); !strings.Contains(r.stderr, "warning: --secret acme/api-tokn: acme-echo declares no such secret (it declares acme/api-token); it is not delivered") {
		t.Errorf("run with an undeclared --secret: %+v", r)
	}
	// --state-dir DIR holds the executor's ledger as well as its floors,
	// and receipts --state-dir reads it there.
	sd := filepath.Join(w.exState, "state-dir")
	if r := must(ex("run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@"+secret, "--state-dir", sd, "--json"), "run --state-dir"); !strings.HasPrefix(jsonOf(r)["ledger"].(string), sd+"/receipts/") {
		t.Errorf("run --state-dir %s kept its ledger elsewhere: %s", sd, r.stdout)
	}
	if l := jsonOf(must(ex("receipts", "list", "--state-dir", sd, "--json"), "receipts list --state-dir")); len(l["attempts"].([]any)) != 1 {
		t.Errorf("receipts list --state-dir: %v", l)
	}
	if r := ex("receipts", "list", "--state-dir", sd+"-typo"); r.code != exitUsage || !strings.Contains(r.stderr, "no state directory at "+sd+"-typo") {
		t.Errorf("receipts list --state-dir of a directory that is not there: %+v", r)
	}
	for i := 0; i < 2; i++ {
		r = must(ex("run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@"+secret, "--idempotency-key", "k1", "--json"), "idempotent run")
		if replayed, _ := jsonOf(r)["replayed"].(bool); replayed != (i == 1) {
			t.Errorf("run %d with a key: replayed %v", i, replayed)
		}
	}
	if d, _ := jsonOf(r)["result_digest"].(string); !strings.HasPrefix(d, "sha256:") {
		t.Errorf("a replay without the recorded result's digest: %s", r.stdout)
	}
	// On a terminal or a pipe, a replay says what it is on stderr and
	// prints no value (the ledger keeps none): never a bare empty line.
	r = must(ex("run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@"+secret, "--idempotency-key", "k1"), "replayed run")
	if r.stdout != "" || !strings.HasPrefix(r.stderr, "replayed: attempt ") || !strings.Contains(r.stderr, "sha256:") {
		t.Errorf("a replay's output: %+v", r)
	}
	// The key again with another input: idempotency_conflict (DESIGN
	// §10, as payment APIs refuse it), exit 78, nothing run or written.
	other := filepath.Join(w.base, "input-other.json")
	os.WriteFile(other, []byte(`{"hello": "another world"}`), 0o644)
	count := func() int {
		t.Helper()
		l := jsonOf(must(ex("receipts", "list", "--json"), "receipts list"))
		return len(l["attempts"].([]any)) + len(l["orphans"].([]any))
	}
	n := count()
	r = refused(ex("run", "acme-echo", "echo", "--input", other, "--secret", "acme/api-token=@"+secret, "--idempotency-key", "k1"), refusal.IdempotencyConflict, "a key reused with another input")
	if !strings.HasPrefix(r.stderr, "refused: idempotency_conflict: ") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || r.stdout != "" {
		t.Errorf("a key reused with another input: %+v, want one refused line", r)
	}
	j := jsonOf(ex("run", "acme-echo", "echo", "--input", other, "--secret", "acme/api-token=@"+secret, "--idempotency-key", "k1", "--json"))
	if rf, _ := j["refused"].(map[string]any); rf == nil || rf["code"] != string(refusal.IdempotencyConflict) {
		t.Errorf("run --json of a key reused with another input: %v", j)
	}
	if m := count(); m != n {
		t.Errorf("a refused reuse of a key wrote to the ledger: %d attempts, then %d", n, m)
	}
	if r = ex("run", "acme-echo", "fail", "--input", input, "--secret", "acme/api-token=@"+secret); r.code != exitFailure || !strings.Contains(r.stderr, "provider_error") {
		t.Errorf("a failing entrypoint: %+v", r)
	}
	// The failure line says how to see the receipt; receipts show shows
	// it, and list's filters find it.
	_, show, _ := strings.Cut(strings.TrimSpace(r.stderr), "its stderr and egress: ")
	show = strings.TrimSuffix(show, ")")
	att := strings.TrimPrefix(show, "cruxprov receipts show ")
	if !strings.HasPrefix(att, "att_") || strings.Contains(att, " ") {
		t.Fatalf("the failure line names no receipts show: %q", r.stderr)
	}
	r = must(ex("receipts", "show", att[:12]), "receipts show (a prefix)")
	for _, want := range []string{"attempt          " + att, "run              acme-echo fail, backend local", "status           error, exit 0", "error            provider_error: ", "egress observed  -"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("receipts show lacks %q:\n%s", want, r.stdout)
		}
	}
	if doc := jsonOf(must(ex("receipts", "show", att, "--json"), "receipts show --json")); doc["schema"] != "cruxprov.receipts.show/v1" || doc["outcome"].(map[string]any)["status"] != "error" {
		t.Errorf("receipts show --json: %v", doc)
	}
	if r := ex("receipts", "show", "att_nope"); r.code != exitFailure || !strings.Contains(r.stderr, "no attempt att_nope in this host and user's ledger") {
		t.Errorf("receipts show of an unknown attempt: %+v", r)
	}
	if r := ex("receipts", "show", "att_"); r.code != exitUsage || !strings.Contains(r.stderr, "give more of it") {
		t.Errorf("receipts show of an ambiguous prefix: %+v", r)
	}
	last := jsonOf(must(ex("receipts", "list", "--status", "error", "--last", "1", "--json"), "receipts list --status error --last 1"))
	if as := last["attempts"].([]any); len(as) != 1 || as[0].(map[string]any)["intent"].(map[string]any)["attempt_id"] != att {
		t.Errorf("receipts list --status error --last 1: %v", last)
	}
	if r := must(ex("receipts", "list", "--provider", "acme-other"), "receipts list --provider"); strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("receipts list --provider of another provider: %q", r.stdout)
	}
	if r := ex("receipts", "list", "--status", "fine"); r.code != exitUsage {
		t.Errorf("receipts list --status fine: %+v", r)
	}
	// A timeout says so once ("ended timeout: killed after…", not "timeout: timeout:").
	if r = ex("run", "acme-echo", "sleep", "--input", input, "--secret", "acme/api-token=@"+secret, "--timeout", "300ms"); r.code != exitFailure || !strings.Contains(r.stderr, "ended timeout: killed after the 300 ms timeout (attempt ") {
		t.Errorf("a run past its timeout: %+v", r)
	}
	// An output flood is an outcome too, not a refusal (DESIGN §2): exit
	// 1, never 78, and --json says output_limit, not refused.
	r = ex("run", "acme-echo", "flood", "--input", input, "--secret", "acme/api-token=@"+secret, "--output-bytes", "65536", "--json")
	var flood map[string]any
	if r.code != exitFailure || !strings.Contains(r.stderr, "ended output_limit: ") || strings.Contains(r.stderr, "refused") ||
		json.Unmarshal([]byte(r.stdout), &flood) != nil || flood["status"] != "output_limit" || flood["refused"] != nil {
		t.Errorf("a run past its output budget: %+v", r)
	}
	rec := jsonOf(must(ex("receipts", "scan", "--json"), "receipts scan"))
	atts := rec["attempts"].([]any)
	if len(atts) < 4 {
		t.Fatalf("receipts: %v", rec)
	}
	for _, k := range []string{"torn", "corrupt", "unmatched", "tails", "orphans"} {
		if l, ok := rec[k].([]any); !ok || len(l) != 0 {
			t.Errorf("receipts scan %s: %v, want []", k, rec[k])
		}
	}
	first := atts[0].(map[string]any)
	in := first["intent"].(map[string]any)
	if first["outcome"].(map[string]any)["status"] != "ok" || in["materialization_digest"] == "" || in["implementation_digest"] == "" || in["seal_digest"] == "" || in["protocol_version"] != float64(1) {
		t.Errorf("receipt: %v", first)
	}

	// Rotating the ledger, as docs/receipts.md says to: renamed aside, the
	// next run starts a new one, and a key whose ok is only in the old file
	// runs again instead of being replayed; receipts scan reads both.
	ledger, _ := first["ledger"].(string)
	if err := os.Rename(ledger, ledger+".1"); err != nil {
		t.Fatalf("rotate the ledger: %v", err)
	}
	r = must(ex("run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@"+secret, "--idempotency-key", "k1", "--json"), "a run under k1 after the rotation")
	if replayed, _ := jsonOf(r)["replayed"].(bool); replayed {
		t.Errorf("a run under a key only the rotated ledger knows was replayed: %s", r.stdout)
	}
	if _, err := os.Stat(ledger); err != nil {
		t.Errorf("the run after the rotation started no new ledger: %v", err)
	}
	both := jsonOf(must(ex("receipts", "scan", "--ledger", ledger+".1", "--ledger", ledger, "--json"), "receipts scan of both ledgers"))
	if n := len(both["attempts"].([]any)); n != len(atts)+1 {
		t.Errorf("receipts scan of both ledgers: %d attempts, want %d", n, len(atts)+1)
	}

	// A ledger past the checkpoint's threshold (docs/receipts.md
	// "Checkpoint"): the next run writes <ledger>.checkpoint, the one
	// after starts from it, and k1, whose ok the checkpoint covers, is
	// replayed from the row it points at.
	padLedger(t, ledger, 200)
	must(ex("run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@"+secret), "a run on a ledger of 200 receipts more")
	if _, err := os.Stat(ledger + ".checkpoint"); err != nil {
		t.Errorf("the run wrote no checkpoint of its ledger: %v", err)
	}
	r = must(ex("run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@"+secret, "--idempotency-key", "k1", "--json"), "a run under k1 from the checkpoint")
	if replayed, _ := jsonOf(r)["replayed"].(bool); !replayed {
		t.Errorf("a run under k1, whose ok the checkpoint covers, was not replayed: %s", r.stdout)
	}

	// Tamper with the env: verify and run refuse (the run is recorded);
	// the advised rebuild needs no new approval.
	target := filepath.Join(env1, "pyvenv.cfg")
	os.Chmod(target, 0o644)
	if err := os.WriteFile(target, []byte("home = /tmp\n"), 0o644); err != nil {
		// the operator (who owns it) does it in the non-root world
		must(op("env", "remove", "--help"), "noop")
	}
	r = refused(ex("verify", "acme-echo"), refusal.EnvDrift, "verify a tampered env")
	if !strings.Contains(r.stderr, "cruxprov env create --replace "+env1) {
		t.Errorf("no remedy: %s", r.stderr)
	}
	// --explain --json lists the differences beside the refusal.
	if r := ex("verify", "acme-echo", "--explain", "--json"); r.code != exitRefused {
		t.Errorf("verify --explain --json: %+v", r)
	} else {
		var doc struct {
			OK   *bool `json:"ok"`
			Seal struct {
				Differences []struct{ Path string } `json:"differences"`
			} `json:"seal"`
			Refused struct{ Code string } `json:"refused"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.OK == nil || *doc.OK || doc.Refused.Code != "env_drift" ||
			len(doc.Seal.Differences) == 0 || doc.Seal.Differences[0].Path != "pyvenv.cfg" {
			t.Errorf("verify --explain --json: %v %s", err, r.stdout)
		}
	}
	refused(ex("run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@"+secret), refusal.EnvDrift, "run a tampered env")
	r = must(ex("receipts", "list", "--json"), "receipts list")
	if !strings.Contains(r.stdout, `"refused"`) {
		t.Errorf("the refused run is not in the ledger: %s", r.stdout)
	}
	must(op("env", "create", "--replace", env1, "--offline"), "the advised --replace")
	must(ex("verify", "acme-echo", "--deep"), "verify after --replace")
	// One difference (its mode): --explain prints its "drift:" line, as
	// env verify --explain does; it printed none for one difference.
	if os.Chmod(target, 0o644) == nil {
		if r := ex("verify", "acme-echo", "--explain"); r.code != exitRefused || strings.Count(r.stdout, "drift: ") != 1 || !strings.HasPrefix(r.stdout, "drift: pyvenv.cfg: mode") {
			t.Errorf("verify --explain of one difference: %+v", r)
		}
		must(op("env", "create", "--replace", env1, "--offline"), "the advised --replace, again")
	}
	if r := op("env", "remove", env1); r.code != exitUsage {
		t.Errorf("env remove of a pinned env: %+v", r)
	}

	// Upgrade v1 → v2: two proposals, one goes stale when the other is
	// accepted; the v1 env is no longer what the pin names.
	id2 := csID(must(install(w.echo2), "install v2"))
	r = must(op("changeset", "diff", id2), "diff v2")
	if !strings.Contains(r.stdout, "acme-echo 1.0.0") || !strings.Contains(r.stdout, "2.0.0") {
		t.Errorf("diff v2: %s", r.stdout)
	}
	// install never changes what runs (DESIGN §8): proposed, not
	// approved, v2 leaves verify on v1's pin and env.
	if v := jsonOf(must(ex("verify", "acme-echo", "--json"), "verify with v2 proposed")); v["env"] != env1 || v["revision"] != float64(1) {
		t.Errorf("install v2 changed what runs before its approval: %v", v)
	}
	retire := csID(must(op("provider", "retire", "acme-echo", "--json"), "retire proposal"))
	must(op("changeset", "approve", id2, "--key", filepath.Join(keys, "alice.key")), "approve v2")
	refused(op("changeset", "approve", retire, "--key", filepath.Join(keys, "alice.key")), refusal.ChangesetStale, "approve a stale proposal")
	v = jsonOf(must(ex("verify", "acme-echo", "--json"), "verify v2"))
	if v["env"] == env1 || v["revision"] != float64(2) {
		t.Errorf("after v2: %v", v)
	}
	must(op("env", "verify", env1), "the v1 env is intact")
	removed := func(r result) []any {
		v := jsonOf(r)
		l, _ := v["removed"].([]any)
		return l
	}
	drun, rrun := must(op("gc", "--envs", "--dry-run", "--json"), "gc --envs --dry-run"), must(op("gc", "--envs", "--json"), "gc --envs")
	dry, real := removed(drun), removed(rrun)
	// The bytes count the env's files (its tree alone is over 10 KiB), and
	// the dry run says the same.
	if db, rb := jsonOf(drun)["removed_bytes"], jsonOf(rrun)["removed_bytes"]; db != rb || rb.(float64) < 10<<10 {
		t.Errorf("gc --envs removed_bytes: dry run %v, run %v", db, rb)
	}
	if !strings.Contains(fmt.Sprint(real), filepath.Base(env1)) {
		t.Errorf("gc --envs kept the unpinned v1 env: %v", real)
	}
	// The dry run lists what the run removes: the env, and the blobs
	// (and caches) only its seal kept.
	if fmt.Sprint(dry) != fmt.Sprint(real) || len(real) < 2 {
		t.Errorf("gc --envs --dry-run listed %v, gc --envs removed %v", dry, real)
	}
	must(ex("verify", "acme-echo", "--deep"), "verify v2 after gc")
}

func TestGovernedFlow(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3.11"); err != nil {
		t.Skip("needs /usr/bin/python3.11")
	}
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	home := filepath.Join(base, "home")
	state := filepath.Join(base, "state")
	os.MkdirAll(filepath.Join(base, "keys"), 0o700)
	run := func(args ...string) result {
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+state)
		return runCmd(t, cmd)
	}
	w.operator, w.executor, w.exState = run, run, state
	governedFlow(t, w, w.url)
	// Verification makes no network call: it works in a network
	// namespace with nothing in it (DESIGN §8).
	t.Run("no network", func(t *testing.T) {
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("no unshare")
		}
		// An unprivileged user gets a network namespace inside a user
		// namespace of its own (-r: mapped to root there).
		netns := []string{"-n"}
		if os.Geteuid() != 0 {
			netns = []string{"-r", "-n"}
			if out, err := exec.Command("unshare", append(netns, "true")...).CombinedOutput(); err != nil {
				t.Skipf("unshare -r -n: %v: %s (no user namespaces for this user here)", err, out)
			}
		}
		cmd := exec.Command("unshare", append(netns, bin, "--home", home, "verify", "acme-echo", "--deep")...)
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
		if r := runCmd(t, cmd); r.code != 0 {
			t.Errorf("verify under unshare -n: %+v", r)
		}
	})
	// A run whose outcome cannot be written after it ran (its ledger's
	// file system filled up meanwhile) is not a refusal: nothing was
	// refused, it ran. It exits 1, says so, and the ledger shows the
	// attempt as an orphan.
	t.Run("outcome unrecorded", func(t *testing.T) {
		// The ledger made immutable while the run runs (chattr +i stops
		// root too): its outcome cannot be appended.
		if os.Geteuid() != 0 {
			t.Skip("makes the ledger immutable: needs root")
		}
		if _, err := exec.LookPath("chattr"); err != nil {
			t.Skip("no chattr (e2fsprogs)")
		}
		in, tok := filepath.Join(base, "unrec-in.json"), filepath.Join(base, "unrec-tok")
		os.WriteFile(in, []byte(`{"message":"hi"}`), 0o644)
		os.WriteFile(tok, []byte("s3cr3t-token"), 0o600)
		ledger := filepath.Join(base, "unrec", "l.jsonl")
		cmd := exec.Command(bin, "--home", home, "run", "acme-echo", "sleep", "--input", in, "--secret", "acme/api-token=@"+tok, "--timeout", "1500ms", "--ledger", ledger, "--json")
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if st, err := os.Stat(ledger); err == nil && st.Size() > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no intent in the ledger")
			}
		}
		if out, err := exec.Command("chattr", "+i", ledger).CombinedOutput(); err != nil {
			cmd.Wait()
			t.Skipf("chattr +i: %v %s (the file system has no immutable flag)", err, out)
		}
		defer exec.Command("chattr", "-i", ledger).Run()
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		var doc map[string]any
		if code != exitFailure || !strings.Contains(stderr.String(), "ended timeout") || !strings.Contains(stderr.String(), "its outcome could not be written to the ledger (ledger_write_failed") || json.Unmarshal(stdout.Bytes(), &doc) != nil || doc["receipt_error"] == nil || doc["status"] != "timeout" {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
		}
		// The code once, the detail without it, and what to do about an
		// immutable file (the advice was "free the ledger's file system
		// or fix its mode" whatever the cause), in the detail a Go
		// executor reads too, and said once.
		if re := doc["receipt_error"].(map[string]any); re["code"] != "ledger_write_failed" || strings.HasPrefix(re["detail"].(string), "ledger_write_failed") ||
			!strings.Contains(re["detail"].(string), "operation not permitted; an immutable attribute (lsattr)") ||
			strings.Contains(stderr.String(), "ledger_write_failed: ledger_write_failed") || strings.Count(stderr.String(), "an immutable attribute (lsattr)") != 1 {
			t.Errorf("receipt_error %v\nstderr %s", re, stderr.String())
		}
		r := run("receipts", "list", "--ledger", ledger)
		if r.code != 0 || !strings.Contains(r.stdout, "ORPHAN") {
			t.Errorf("receipts list: %+v", r)
		}
	})
	// A ledger that cannot take the intent refuses the run before it
	// spawns, with what to do (a full file system said "short write",
	// an immutable file "operation not permitted", and nothing more).
	t.Run("intent unrecorded", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("makes the ledger immutable: needs root")
		}
		if _, err := exec.LookPath("chattr"); err != nil {
			t.Skip("no chattr (e2fsprogs)")
		}
		in, tok := filepath.Join(base, "unint-in.json"), filepath.Join(base, "unint-tok")
		os.WriteFile(in, []byte(`{"message":"hi"}`), 0o644)
		os.WriteFile(tok, []byte("s3cr3t-token"), 0o600)
		ledger := filepath.Join(base, "unint", "l.jsonl")
		args := []string{"run", "acme-echo", "echo", "--input", in, "--secret", "acme/api-token=@" + tok, "--ledger", ledger}
		if r := run(args...); r.code != 0 {
			t.Fatalf("first run: %+v", r)
		}
		if out, err := exec.Command("chattr", "+i", ledger).CombinedOutput(); err != nil {
			t.Skipf("chattr +i: %v %s (the file system has no immutable flag)", err, out)
		}
		defer exec.Command("chattr", "-i", ledger).Run()
		r := run(append(args, "--json")...)
		var doc struct {
			Refused struct{ Code, Detail string }
		}
		// Once: receipts' refusal says it itself (for a Go executor), and
		// the line added it again.
		if r.code != exitRefused || !strings.Contains(r.stderr, "refused: ledger_write_failed") || strings.Count(r.stderr, "; an immutable attribute (lsattr)") != 1 ||
			json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Refused.Code != "ledger_write_failed" || !strings.Contains(doc.Refused.Detail, "an immutable attribute (lsattr)") {
			t.Errorf("%+v", r)
		}
	})
	// The ledger on a real tmpfs that fills up: before the run (its
	// intent does not fit), the run is refused ledger_write_failed before
	// it spawns, saying to free space on the ledger's file system; while
	// the provider runs (its outcome does not fit), it exits 1 saying
	// the outcome could not be written. Either way no torn line is left:
	// with room again the ledger scans whole, the run that ran an orphan.
	t.Run("ledger full", func(t *testing.T) {
		mnt := smallTmpfs(t, "size=256k,mode=0755")
		in, tok := filepath.Join(base, "full-in.json"), filepath.Join(base, "full-tok")
		os.WriteFile(in, []byte(`{"message":"hi"}`), 0o644)
		os.WriteFile(tok, []byte("s3cr3t-token"), 0o600)
		ledger := filepath.Join(mnt, "l.jsonl")
		args := []string{"run", "acme-echo", "echo", "--input", in, "--secret", "acme/api-token=@" + tok, "--ledger", ledger}
		if r := run(args...); r.code != 0 {
			t.Fatalf("first run: %+v", r)
		}
		fill := func() (free func()) {
			f, err := os.Create(filepath.Join(mnt, "fill"))
			if err != nil {
				t.Fatal(err)
			}
			for chunk := make([]byte, 512); err == nil; {
				_, err = f.Write(chunk)
			}
			f.Close()
			return func() { os.Remove(f.Name()) }
		}
		// scanned scans the ledger with room again: it must scan whole
		// (no torn row, no corrupt line, no unterminated tail); it
		// returns the summary line.
		scanned := func() string {
			r := run("receipts", "scan", "--ledger", ledger)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			sum := lines[len(lines)-1]
			if r.code != 0 || !strings.Contains(sum, " 0 torn rows, 0 corrupt lines, 0 unterminated tails ") {
				t.Fatalf("receipts scan of the ledger after it filled: %+v", r)
			}
			return sum
		}
		orphans := func(sum string) string { return sum[strings.Index(sum, ", ")+2 : strings.Index(sum, " orphaned")] }
		t.Run("intent", func(t *testing.T) {
			// What is left of the ledger's last page may take a receipt or
			// two: runs until one is refused.
			free := fill()
			var r result
			for i := 0; i < 20; i++ {
				if r = run(args...); r.code != 0 {
					break
				}
			}
			free()
			if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: ledger_write_failed: ") || strings.Count(r.stderr, "\n") != 1 ||
				!strings.Contains(r.stderr, "no space left on device; free space on the ledger's file system") {
				t.Fatalf("a run whose intent does not fit: %+v", r)
			}
			if n := orphans(scanned()); n != "0" {
				t.Errorf("a run refused at its intent left %s orphaned intents", n)
			}
		})
		t.Run("outcome", func(t *testing.T) {
			// The outcome fits in what is left of the ledger's last page
			// after the intent unless that page is nearly full: each
			// try that fits moves the end on by a receipt.
			for try := 0; ; try++ {
				if try == 8 {
					t.Skip("every outcome fitted in what was left of the ledger's last page")
				}
				cmd := exec.Command(bin, "--home", home, "run", "acme-echo", "sleep", "--input", in, "--secret", "acme/api-token=@"+tok, "--timeout", "1000ms", "--ledger", ledger)
				cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				st0, _ := os.Stat(ledger)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if st, err := os.Stat(ledger); err == nil && st.Size() > st0.Size() {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("no intent in the ledger")
					}
				}
				free := fill()
				err := cmd.Wait()
				free()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
				if code == exitFailure && !strings.Contains(stderr.String(), "could not be written") && strings.Contains(stderr.String(), "ended timeout") {
					continue // its outcome fitted
				}
				if code != exitFailure || !strings.Contains(stderr.String(), "its outcome could not be written to the ledger (ledger_write_failed") ||
					!strings.Contains(stderr.String(), "free space on the ledger's file system") {
					t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
				}
				if n := orphans(scanned()); n != "1" {
					t.Errorf("the run whose outcome did not fit: %s orphaned intents, want 1", n)
				}
				return
			}
		})
	})
	retireAndRestore(t, w, home)
}

// retireAndRestore retires the provider governedFlow left accepted, then
// puts its last pin file back (a backup restored, or an attacker): the
// executor that ran that pin refuses it (its floor holds the revision it
// ran, not the retirement's), and so do a verifier that never ran it and
// registry log --verify, by the history's last pin entry.
func retireAndRestore(t *testing.T, w *governedWorld, home string) {
	t.Helper()
	pinFile := filepath.Join(home, "registry", "pins", "acme-echo.json")
	last, err := os.ReadFile(pinFile)
	if err != nil {
		t.Fatal(err)
	}
	r := w.operator("provider", "retire", "acme-echo", "--json")
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil {
		t.Fatalf("retire: %v %+v", err, r)
	}
	id, _ := v["changeSet"].(map[string]any)["metadata"].(map[string]any)["id"].(string)
	if r := w.operator("changeset", "approve", id, "--key", filepath.Join(w.base, "keys", "alice.key")); r.code != 0 {
		t.Fatalf("approve the retirement: %+v", r)
	}
	wantRefused := func(r result, code refusal.Code, what string) {
		t.Helper()
		if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(code)+":") {
			t.Errorf("%s: want %s: %+v", what, code, r)
		}
	}
	wantRefused(w.executor("verify", "acme-echo"), refusal.PinUnapproved, "verify a retired provider")
	if err := os.WriteFile(pinFile, last, 0o644); err != nil {
		t.Fatal(err)
	}
	wantRefused(w.executor("verify", "acme-echo"), refusal.PinRollback, "verify the last pin put back after retirement")
	fresh := filepath.Join(w.base, "fresh-state") // any executor's to write
	os.Mkdir(fresh, 0o777)
	os.Chmod(fresh, 0o777)
	wantRefused(w.executor("verify", "acme-echo", "--state-dir", fresh), refusal.PinRollback, "the same, by a verifier without a floor")
	wantRefused(w.operator("registry", "log", "--verify"), refusal.PinRollback, "registry log --verify with the pin put back")
}

// TestGovernedFlowUnprivileged: the same, with the operator an ordinary
// user owning the store (uid 65534) and the executor another one (uid
// 65533) that can only read it and keeps its own state.
func TestGovernedFlowUnprivileged(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-governed-", "/usr/bin/python3.11")
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	home := filepath.Join(base, "home")
	os.MkdirAll(filepath.Join(base, "keys"), 0o700)
	for _, d := range []string{home, filepath.Join(base, "keys")} {
		os.MkdirAll(d, 0o755)
		chownTree(t, d)
	}
	os.Chmod(filepath.Join(base, "keys"), 0o700)
	exState := filepath.Join(base, "exstate")
	os.Mkdir(exState, 0o700)
	os.Chown(exState, 65533, 65533)
	as := func(uid string, env ...string) func(args ...string) result {
		return func(args ...string) result {
			cmd := exec.Command("setpriv", append([]string{"--reuid=" + uid, "--regid=" + uid, "--clear-groups", "--", exe, "--home", home}, args...)...)
			cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "CRUXPROV_KEY_PASSWORD=pw"}, env...)
			return runCmd(t, cmd)
		}
	}
	w.operator = as("65534", "XDG_STATE_HOME="+filepath.Join(home, ".state"))
	w.executor, w.exState = as("65533", "XDG_STATE_HOME="+exState), exState
	// The tamper step writes as root (an attacker with root, or the owner).
	governedFlow(t, w, w.url)
	// A state directory the executor cannot write, its ledger elsewhere:
	// the floors stay in the state directory, and the refusal says so
	// and where they may go. It said to make the ledger writable.
	rootState := filepath.Join(base, "root-state")
	os.Mkdir(rootState, 0o755)
	input := filepath.Join(w.base, "input.json")
	for _, args := range [][]string{
		{"verify", "acme-echo", "--state-dir", rootState},
		{"run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@" + filepath.Join(w.base, "token"),
			"--state-dir", rootState, "--ledger", filepath.Join(exState, "elsewhere.jsonl")},
	} {
		r := w.executor(args...)
		if r.code != exitRefused || !strings.Contains(r.stderr, "refused: ledger_write_failed: cannot make the verifier floors directory "+rootState+"/floors") ||
			!strings.Contains(r.stderr, "give the verifier a state directory it can write") ||
			!strings.Contains(r.stderr, "; to fix: cruxprov --home "+home+" "+args[0]+" acme-echo") || !strings.HasSuffix(r.stderr, " --state-dir DIR\n") {
			t.Errorf("%s with a state directory it cannot write: %+v", args[0], r)
		}
	}
	retireAndRestore(t, w, home)
}

// TestInstallSources: install by NAME==VERSION --sha256 from the pinned
// index, with another platform as its resolution alone; an interface
// registered under another schema refuses; a changed manifest inside an
// accepted env refuses verify.
func TestInstallSources(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3.11"); err != nil {
		t.Skip("needs /usr/bin/python3.11")
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	idx := w.url
	home := filepath.Join(base, "home")
	run := func(args ...string) result {
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+filepath.Join(base, "state"))
		return runCmd(t, cmd)
	}
	// acme.diagnostics registered with another schema: the wheel's
	// entrypoints name a digest the registry does not have.
	other := filepath.Join(base, "other.json")
	os.WriteFile(other, []byte(`{"type": "object", "title": "not the provider's"}`), 0o644)
	for _, a := range [][]string{
		{"interface", "register", "acme.echo", "--schema", filepath.Join(w.schemas, "acme.echo.json")},
		{"interface", "register", "acme.diagnostics", "--schema", other},
	} {
		if r := run(a...); r.code != 0 {
			t.Fatalf("%v: %+v", a, r)
		}
	}
	sha := strings.TrimPrefix(fx.Echo.SHA256.String(), "sha256:")
	r := run("install", "acme-echo==1.0.0", "--sha256", sha, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", idx)
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: interface_digest_mismatch") {
		t.Fatalf("another schema: %+v", r)
	}
	// It says what to do (it named the two digests and no more).
	if !strings.Contains(r.stderr, "the provider was built against another schema of acme.diagnostics than the one registered; install a provider built against the registered schema, or one whose manifest names a new interface id") {
		t.Errorf("another schema: the refusal does not say what to do: %s", r.stderr)
	}
	home = filepath.Join(base, "home2")
	for _, a := range [][]string{
		{"interface", "register", "acme.echo", "--schema", filepath.Join(w.schemas, "acme.echo.json")},
		{"interface", "register", "acme.diagnostics", "--schema", filepath.Join(w.schemas, "acme.diagnostics.json")},
	} {
		if r := run(a...); r.code != 0 {
			t.Fatalf("%v: %+v", a, r)
		}
	}
	if r := run("install", "acme-echo==1.0.0", "--sha256", strings.Repeat("0", 64), "--platform", "host", "--index", idx); r.code != exitRefused || !strings.Contains(r.stderr, "refused: fetch_failed") {
		t.Fatalf("a sha256 the index does not have: %+v", r)
	}
	r = run("install", "acme-echo==1.0.0", "--sha256", sha, "--platform", "host,cp312-musllinux_1_2_aarch64", "--python", "/usr/bin/python3.11", "--index", idx, "--json")
	if r.code != 0 {
		t.Fatalf("install by name: %+v", r)
	}
	var out struct {
		Provider struct {
			Materializations []struct{ Backend, Platform string }
		}
		ChangeSet struct {
			Metadata struct{ ID string }
		} `json:"changeSet"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Provider.Materializations) != 2 ||
		out.Provider.Materializations[0].Backend != "local" || out.Provider.Materializations[1].Backend != "resolution" {
		t.Fatalf("%v %s", err, r.stdout)
	}
	keys := filepath.Join(base, "keys")
	os.MkdirAll(keys, 0o700)
	for _, a := range [][]string{
		{"key", "generate", "--out", filepath.Join(keys, "k")},
		{"key", "trust", filepath.Join(keys, "k.pub")},
		{"changeset", "approve", out.ChangeSet.Metadata.ID, "--key", filepath.Join(keys, "k.key")},
		{"verify", "acme-echo", "--platform", "cp311-manylinux_2_36_x86_64"},
	} {
		if r := run(a...); r.code != 0 {
			t.Fatalf("%v: %+v", a, r)
		}
	}
	// The embedded manifest inside the accepted env, edited.
	v := run("verify", "acme-echo", "--json")
	var vr struct{ Env string }
	json.Unmarshal([]byte(v.stdout), &vr)
	man, _ := filepath.Glob(filepath.Join(vr.Env, "lib/python3.11/site-packages/acme_echo-1.0.0.dist-info/cruxible/provider.toml"))
	if len(man) != 1 {
		t.Fatalf("no installed manifest under %s", vr.Env)
	}
	os.Chmod(man[0], 0o644)
	os.WriteFile(man[0], []byte("schema = 1\n"), 0o644)
	if r := run("verify", "acme-echo"); r.code != exitRefused {
		t.Fatalf("an edited manifest: %+v", r)
	}
}

// TestPinAfterInterpreterUpdate: an interpreter updated in place under an
// accepted pin is interpreter_drift; the advised rebuild keeps the env's
// digest but changes its seal content digest, which the pin refuses
// (pin_mismatch) until the operator proposes it again and approves.
func TestPinAfterInterpreterUpdate(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	python := filepath.Join(base, "py", "python3.11")
	os.MkdirAll(filepath.Dir(python), 0o755)
	b, _ := os.ReadFile(debian)
	if err := os.WriteFile(python, b, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	keys := filepath.Join(base, "keys")
	run, must, approveInstall := approvingStore(t, w, base, python)
	approveInstall()
	must("verify", "acme-echo")
	f, _ := os.OpenFile(python, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte("security update\n"))
	f.Close()
	r := run("verify", "acme-echo")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.InterpreterDrift)) {
		t.Fatalf("interpreter updated in place: %+v", r)
	}
	if fix := runFix(t, r, base, "CRUXPROV_HOME="+home); fix.code != 0 {
		t.Fatalf("the advised rebuild: %+v", fix)
	}
	r = run("verify", "acme-echo")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.PinMismatch)) {
		t.Fatalf("a rebuilt env whose interpreter changed, under the old pin: %+v", r)
	}
	// The advice proposes the pinned package again, for the pin's own
	// platform and interpreter (it said --platform PLATFORM --python
	// PYTHON, which the operator had to look up); its change-set,
	// approved, is the new pin.
	if strings.Contains(r.stderr, "PLATFORM") || strings.Contains(r.stderr, "PYTHON") || !strings.Contains(r.stderr, " --platform cp311-") || !strings.Contains(r.stderr, " --python "+python+" ") {
		t.Fatalf("the advice does not name the pin's platform and interpreter: %s", r.stderr)
	}
	r.stderr = strings.NewReplacer("--index URL", "--index "+w.url+" --no-compile --quiet").Replace(r.stderr)
	fix := runFix(t, r, base, "CRUXPROV_HOME="+home)
	if fix.code != 0 {
		t.Fatalf("the advised proposal: %+v", fix)
	}
	must("changeset", "approve", strings.TrimSpace(fix.stdout), "--key", filepath.Join(keys, "k.key"))
	must("verify", "acme-echo", "--deep")
}

// approvingStore is a store under base/home with acme.echo and
// acme.diagnostics registered and one trusted approver key (base/keys/k):
// run and must run the CLI on it (must fails the test on a non-zero
// exit), approveInstall proposes w's acme-echo on python (no bytecode)
// and approves it.
func approvingStore(t *testing.T, w *governedWorld, base, python string) (run, must func(args ...string) result, approveInstall func()) {
	t.Helper()
	home := filepath.Join(base, "home")
	run = func(args ...string) result {
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+filepath.Join(base, "state"))
		return runCmd(t, cmd)
	}
	must = func(args ...string) result {
		t.Helper()
		r := run(args...)
		if r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
		return r
	}
	keys := filepath.Join(base, "keys")
	os.MkdirAll(keys, 0o700)
	must("interface", "register", "acme.echo", "--schema", filepath.Join(w.schemas, "acme.echo.json"))
	must("interface", "register", "acme.diagnostics", "--schema", filepath.Join(w.schemas, "acme.diagnostics.json"))
	must("key", "generate", "--out", filepath.Join(keys, "k"))
	must("key", "trust", filepath.Join(keys, "k.pub"))
	approveInstall = func() {
		t.Helper()
		id := strings.TrimSpace(must("install", w.echo, "--platform", "host", "--python", python, "--index", w.url, "--no-compile", "--quiet").stdout)
		must("changeset", "approve", id, "--key", filepath.Join(keys, "k.key"))
	}
	return run, must, approveInstall
}

// TestChangeSetKeyAcrossCommands: every command whose --json document
// carries a change-set carries it under "changeSet" (install said
// "changeset"), and no other spelling of it; install's document, whose
// key moved, is cruxprov.install/v2, its refusals too.
func TestChangeSetKeyAcrossCommands(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3.11"); err != nil {
		t.Skip("needs /usr/bin/python3.11")
	}
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	home := filepath.Join(base, "home")
	keys := filepath.Join(base, "keys")
	os.MkdirAll(keys, 0o700)
	run := func(args ...string) result {
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+filepath.Join(base, "state"))
		return runCmd(t, cmd)
	}
	doc := func(schema string, args ...string) map[string]any {
		t.Helper()
		r := run(append(args, "--json")...)
		var v map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil {
			t.Fatalf("%v: %v %+v", args, err, r)
		}
		if v["schema"] != schema {
			t.Errorf("%v: schema %v, want %s", args, v["schema"], schema)
		}
		return v
	}
	// proposed is the id of the change-set doc v carries under
	// "changeSet", after checking that no other key names one.
	proposed := func(v map[string]any, what string) string {
		t.Helper()
		for k := range v {
			if k != "changeSet" && strings.EqualFold(strings.NewReplacer("_", "", "-", "").Replace(k), "changeset") {
				t.Errorf("%s: a change-set under %q, not \"changeSet\"", what, k)
			}
		}
		cs, _ := v["changeSet"].(map[string]any)
		md, _ := cs["metadata"].(map[string]any)
		id, _ := md["id"].(string)
		if !strings.HasPrefix(id, "sha256:") {
			t.Fatalf("%s: no change-set under \"changeSet\": %v", what, v)
		}
		return id
	}
	for _, n := range []string{"alice", "bob"} {
		doc("cruxprov.key.generate/v1", "key", "generate", "--out", filepath.Join(keys, n))
	}
	doc("cruxprov.key.trust/v1", "key", "trust", filepath.Join(keys, "alice.pub"), "--name", "alice")
	approve := func(id, what string) {
		t.Helper()
		v := doc("cruxprov.changeset.approve/v1", "changeset", "approve", id, "--key", filepath.Join(keys, "alice.key"))
		if got := proposed(v, "changeset approve ("+what+")"); got != id {
			t.Errorf("changeset approve (%s) names %s, approved %s", what, got, id)
		}
	}
	approve(proposed(doc("cruxprov.key.trust/v1", "key", "trust", filepath.Join(keys, "bob.pub"), "--name", "bob"), "key trust"), "key trust")
	for _, i := range []string{"acme.echo", "acme.diagnostics"} {
		doc("cruxprov.interface.register/v1", "interface", "register", i, "--schema", filepath.Join(w.schemas, i+".json"))
	}
	install := []string{"install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url}
	approve(proposed(doc("cruxprov.install/v2", install...), "install"), "install")
	retire := proposed(doc("cruxprov.provider.retire/v1", "provider", "retire", "acme-echo"), "provider retire")
	if got := proposed(doc("cruxprov.changeset.reject/v1", "changeset", "reject", retire, "--reason", "not yet"), "changeset reject"); got != retire {
		t.Errorf("changeset reject names %s, rejected %s", got, retire)
	}
	proposed(doc("cruxprov.key.untrust/v1", "key", "untrust", "bob"), "key untrust")
	proposed(doc("cruxprov.policy.set/v1", "policy", "set", "--threshold", "2"), "policy set")
	// A refusal of install carries install's schema.
	r := run("install", w.echo, "--platform", "no-such-platform", "--index", w.url, "--json")
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != exitRefused || v["schema"] != "cruxprov.install/v2" {
		t.Errorf("a failed install's document: %v %+v", err, r)
	}
}

// padLedger appends n receipts of another entrypoint to the ledger at
// path, as the executor's own runs would (unkeyed: no key locks are made,
// so that the executor, another user, can open it after).
func padLedger(t *testing.T, path string, n int) {
	t.Helper()
	ctx := context.Background()
	l, err := receipts.Open(ctx, path, receipts.Options{NoCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := digest.Sum([]byte("pad")).String()
	for range n {
		in := receipts.Intent{Provider: "acme-echo", Entrypoint: "pad", SealDigest: d, Backend: "local",
			Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test", InputDigest: d,
			ImplementationDigest: d, MaterializationDigest: d}
		dec, err := l.Begin(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Finish(ctx, receipts.Outcome{AttemptID: dec.AttemptID, Status: receipts.StatusOK, ResultDigest: d}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEnvRemoveNamesWhatNamesIt: walking operator.md as
// cruxprov-rootless, `env remove` of an env an open change-set named said
// "is named by an accepted pin or an open change-set (cruxprov provider
// list and changeset list show which)", commands that, without the
// --home given, listed another store's. It now names the open change-set
// (then the accepted pin) and the command that lets the env go, with
// that --home; still exit 64.
func TestEnvRemoveNamesWhatNamesIt(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	home := filepath.Join(base, "home")
	_, must, _ := approvingStore(t, w, base, debian)
	id := strings.TrimPrefix(strings.TrimSpace(must("install", w.echo, "--platform", "host", "--python", debian, "--index", w.url, "--no-compile", "--quiet").stdout), "sha256:")[:12]
	var list struct{ Envs []struct{ Path string } }
	if err := json.Unmarshal([]byte(must("env", "list", "--json").stdout), &list); err != nil || len(list.Envs) != 1 {
		t.Fatalf("env list: %v %+v", err, list)
	}
	env := list.Envs[0].Path
	r := runCmd(t, exec.Command(bin, "--home", home, "env", "remove", env))
	if r.code != exitUsage || !strings.Contains(r.stderr, "is named by the open change-set "+id+": reject "+id+" (cruxprov changeset reject "+id+" --reason TEXT --home "+home+") first") {
		t.Errorf("env remove of an env an open change-set names: %+v", r)
	}
	must("changeset", "approve", id, "--key", filepath.Join(base, "keys", "k.key"))
	r = runCmd(t, exec.Command(bin, "--home", home, "env", "remove", env))
	if r.code != exitUsage || !strings.Contains(r.stderr, "is named by the accepted pin of acme-echo: retire acme-echo (cruxprov provider retire acme-echo --home "+home+", and approve that change-set) first") {
		t.Errorf("env remove of a pinned env: %+v", r)
	}
}

// TestInstallShowsDownloadRetries: index.md says every retry is shown,
// and install (unlike fetch and env create) gave its downloads no event
// handler: a wheel whose first download failed was retried in silence
// (and a damaged blob fetched again without its warning). Its retry is
// now a line on stderr, as fetch's, and stdout stays the document under
// --json.
func TestInstallShowsDownloadRetries(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	for _, asJSON := range []bool{false, true} {
		var failed sync.Map
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(path.Base(r.URL.Path), "cruxible_provider_runtime-") && strings.HasSuffix(r.URL.Path, ".whl") {
				if _, again := failed.LoadOrStore(r.URL.Path, true); !again {
					rw.WriteHeader(http.StatusServiceUnavailable)
					return
				}
			}
			http.FileServer(http.Dir(w.index)).ServeHTTP(rw, r)
		}))
		defer srv.Close()
		home := filepath.Join(base, fmt.Sprintf("home-%v", asJSON))
		for _, id := range []string{"acme.echo", "acme.diagnostics"} {
			if r := cruxprov(t, "--home", home, "interface", "register", id, "--schema", filepath.Join(w.schemas, id+".json")); r.code != 0 {
				t.Fatalf("%+v", r)
			}
		}
		args := []string{"--home", home, "install", w.echo, "--platform", "host", "--python", debian, "--index", srv.URL + "/simple/", "--no-compile"}
		if asJSON {
			args = append(args, "--json")
		}
		r := runCmd(t, exec.Command(bin, args...))
		if r.code != 0 || !strings.Contains(r.stderr, "retry: cruxible_provider_runtime-0.2.0-py3-none-any.whl: attempt 1 failed") {
			t.Errorf("json %v: the download's retry is not shown: %+v", asJSON, r)
		}
		if asJSON && !json.Valid([]byte(r.stdout)) {
			t.Errorf("--json: stdout is not one document: %q", r.stdout)
		}
	}
}
