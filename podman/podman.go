// Package podman is the container executor (DESIGN §10 "Container runs"):
// Executor implements invoke.Executor by running a provider's image with
// podman, behind the same interface, steps and receipts as the subprocess
// executor (invoke.Dispatch), so it passes the same conformance battery
// (invoke/invoketest).
//
// One run, in order: the Call's Verify hook (the pin and the image's
// digest, signature and provenance: verify/container); the image, by
// digest only (Call.Image, REF@sha256:… or oci:DIR@sha256:…, equal to
// Call.MaterializationDigest): its manifest is read and rehashed for its
// config digest, and the image podman holds under that config digest is
// the one run (pulled by digest when podman lacks it, then checked:
// podman runs its own copy, not the registry's, so its stored config
// digest must be the verified one: image_digest_mismatch otherwise); the
// intent; then `podman --runtime runc run` by image id with --network
// none, --read-only (and --read-only-tmpfs=false), --cap-drop ALL, --security-opt no-new-privileges,
// --user 65534:65534, --memory 256m, --cpus 1, --pids-limit 128, --ulimit
// nofile and nproc 1024 and core 0 (no core dump holds a secret), its
// own IPC, pid and UTS namespaces and a 64 MiB /dev/shm (--ipc, --pid,
// --uts private, --shm-size: not containers.conf's),
// --unsetenv-all, the working directory a tmpfs at /work private to the
// run, variables forwarded by name only (--env NAME,
// the value in podman's own environment, never on its argv), and the
// secret bundle through `cruxshim --secret-pipe-fd 3` with --preserve-fds
// 1 (or --secret-path on a tmpfs mounted for the run alone: SecretPath),
// and, for a runtime from python.HandoffVersion on (invoke.Call.Runtime,
// from the image's provenance), `cruxshim --protocol-fd-env
// CRUXIBLE_PROTOCOL_FD`, which moves the protocol channel off fd 1 before
// the harness's interpreter starts (docs/executor.md, "Start-up code").
// At the timeout the container gets SIGTERM, then SIGKILL after the
// grace; a flood kills it at once; it is removed afterwards whatever
// happened (what an executor killed mid-run leaves, Prune removes later).
// podman missing, or a container that cannot be created or
// started, is container_unavailable.
//
// Rootless: the executor may run as an operator who is not root (DESIGN
// §14), with podman's rootless mode (subordinate ids in /etc/subuid and
// /etc/subgid, newuidmap and newgidmap; docs/executor.md). A rootless
// podman applies --memory, --cpus and --pids-limit only through cgroups
// v2 with those controllers delegated to the user; elsewhere (cgroups v1)
// it ignores them with a warning, so before the first run of a rootless
// podman the executor asks it (podman info) and refuses
// container_unavailable where the limits would not hold, unless
// UnenforcedLimits says to run without them.
//
// This package does not verify pins or signatures (the Verify hook is
// the governance layer's: package verify), read the host environment, or
// print.
package podman

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/internal/strictjson"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/shim"
)

// Secret delivery modes.
const (
	// SecretPipe delivers the bundle through a pipe on fd 3
	// (cruxshim --secret-pipe-fd, podman --preserve-fds 1): the default.
	SecretPipe = "pipe"
	// SecretPath writes it to a file on a tmpfs mounted for this run alone
	// and bound into the container (cruxshim --secret-path), for runtimes
	// that cannot pass a descriptor. Mounting needs root.
	SecretPath = "path"
)

// Workdir is the run's working directory inside the container, a tmpfs.
const Workdir = "/work"

// Defaults are the container's limits where the Executor sets none
// (the seed executor's).
var Defaults = Limits{Memory: 256 << 20, CPUs: 1, Pids: 128, NoFile: 1024, NProc: 1024, WorkdirBytes: 64 << 20, ShmBytes: 64 << 20}

// Limits are a container's resource limits; 0 is unset (Defaults').
// They may be lowered, never raised above Defaults.
type Limits struct {
	Memory       int64   // bytes
	CPUs         float64 // --cpus
	Pids         int64
	NoFile       int64 // RLIMIT_NOFILE, soft and hard
	NProc        int64 // RLIMIT_NPROC, soft and hard
	WorkdirBytes int64 // the /work tmpfs's size
	// ShmBytes is /dev/shm's size (--shm-size), a tmpfs of the
	// container's own IPC namespace (--ipc private): writable, as
	// Python's multiprocessing needs, counted against Memory, and gone
	// with the container.
	ShmBytes int64
}

// Executor runs calls in containers with podman. The zero value is
// usable: podman on PATH, runc, pipe delivery, no ledger.
type Executor struct {
	// Podman is the podman binary ("": podman, found by os/exec).
	Podman string
	// Runtime is the OCI runtime ("": runc; crun fails in some VMs).
	Runtime string
	// Ledger records every dispatch (nil: nothing is recorded).
	Ledger invoke.Ledger
	// Defaults are the budgets where neither manifest nor caller sets one.
	Defaults invoke.Budgets
	// Grace is how long a container has between SIGTERM and SIGKILL
	// (0: invoke.DefaultGrace, 2s).
	Grace time.Duration
	// Limits lower the container's resource limits (zero fields: Defaults).
	Limits Limits
	// User is the container's uid:gid ("": 65534:65534); never 0.
	User string
	// SecretMode is SecretPipe ("") or SecretPath.
	SecretMode string
	// SecretDir is where SecretPath mounts each run's private tmpfs
	// ("": /run, which must exist).
	SecretDir string
	// Environ is podman's own environment ("K=V"; nil: DefaultPath
	// alone). A caller whose registry needs credentials adds AuthVars
	// from its own environment: where podman pull finds them.
	// Forwarded variables are added to it; none of it reaches the
	// container but what --env names.
	Environ []string
	// InsecureRegistry pulls without TLS verification; a registry on
	// localhost or 127.0.0.1 is pulled over plain HTTP anyway (as
	// go-containerregistry reads it).
	InsecureRegistry bool
	// Remote are go-containerregistry options for reading a registry's
	// manifest (nil: the docker config's credentials, as image.Verify).
	Remote []remote.Option
	// UnenforcedLimits lets a rootless podman that cannot apply the
	// memory, CPU and pids limits (cgroups v1, or v2 without the memory,
	// pids and cpu controllers delegated to the user) run containers
	// without them: the network, file system, capability, user and ulimit
	// confinement still holds. false: such a podman is
	// container_unavailable. A rootful podman applies the limits anyway.
	UnenforcedLimits bool

	// command replaces the harness argv after the shim's flags (tests).
	command []string
}

// pruneOnce starts Prune at a process's first run.
var pruneOnce sync.Once

// Run implements invoke.Executor.
func (e *Executor) Run(ctx context.Context, c *invoke.Call) (*invoke.Result, error) {
	pruneOnce.Do(func() {
		// What executors killed before this one left: best effort, beside
		// the run (its errors are podman's, which the run reports itself).
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _ = e.Prune(ctx)
		}()
	})
	return invoke.Dispatch(ctx, c, &backend{e: e}, invoke.DispatchOptions{Ledger: e.Ledger, Defaults: e.Defaults, Grace: e.Grace})
}

// backstopSeconds is how long after a run's timeout podman itself kills
// its container (run --timeout), for an executor that died before it.
const backstopSeconds = 5

type backend struct {
	e  *Executor
	id string // the image's config digest hex: podman's image id
	// unenforced are the limits podman cannot apply here, which Check
	// found and the Executor accepted (UnenforcedLimits): Start does not
	// pass their flags.
	unenforced []string
}

func (b *backend) Name() string { return "container" }

func (e *Executor) podman() string {
	if e.Podman != "" {
		return e.Podman
	}
	return "podman"
}

func (e *Executor) env() []string {
	if e.Environ != nil {
		return append([]string(nil), e.Environ...)
	}
	return []string{DefaultPath}
}

// DefaultPath is podman's PATH where Executor.Environ is nil.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// AuthVars are the variables that tell podman where registry credentials
// are: a caller that reads its environment passes them on in Environ
// (this package reads none).
var AuthVars = []string{"DOCKER_CONFIG", "REGISTRY_AUTH_FILE"}

// globals are podman's flags before the subcommand.
func (e *Executor) globals() []string {
	rt := e.Runtime
	if rt == "" {
		rt = "runc"
	}
	return []string{"--runtime", rt}
}

// podmanOut runs one short podman command and returns its stdout.
func (e *Executor) podmanOut(ctx context.Context, args ...string) ([]byte, error) {
	return e.podmanWithin(ctx, commandTimeout, args...)
}

// commandTimeout bounds a podman command but a pull (pullTimeout).
const commandTimeout = 2 * time.Minute

// pullTimeout bounds podman pull: an image's layers over a slow link take
// longer than a command's two minutes (a 300 MB image at 2 MB/s), and a
// run that cannot pull its image never runs; a signal still ends it at
// once (ctx).
var pullTimeout = 20 * time.Minute

// podmanWithin runs one podman command, ended after d, and returns its
// stdout.
func (e *Executor) podmanWithin(ctx context.Context, d time.Duration, args ...string) ([]byte, error) {
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cmd := exec.CommandContext(tctx, e.podman(), append(e.globals(), args...)...)
	cmd.Env = e.env()
	// A podman (or a wrapper named as it) that exits but leaves a process
	// holding its output made Output wait for that process, past the
	// deadline and a signal alike: its pipes are closed 2 s after it ends.
	cmd.WaitDelay = 2 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.Is(err, exec.ErrWaitDelay) && ctx.Err() == nil {
			return out, refusal.Wrap(refusal.ContainerUnavailable, err, "%s %s exited but left a process running that holds its output open: check what %s runs (a wrapper script, hooks) so that it leaves none behind", e.podman(), args[0], e.podman())
		}
		if ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
			// Killed at the deadline: its stderr (none, with --quiet)
			// does not say so.
			return out, fmt.Errorf("podman %s did not finish in %v (killed): check the registry and the network to it, then run again", args[0], d)
		}
		if errors.As(err, &ee) {
			return out, fmt.Errorf("podman %s: %s", args[0], lastLine(stderr.String()))
		}
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			// It said "cannot run podman (podman): exec: … not found",
			// and nothing of what to do.
			return out, refusal.Wrap(refusal.ContainerUnavailable, err, "podman is not installed here (%s not found): install podman and runc (Debian: apt-get install podman runc) so that %s is found", e.podman(), e.podman())
		}
		return out, refusal.Wrap(refusal.ContainerUnavailable, err, "cannot run podman (%s)%s", e.podman(), outOfFDs(err))
	}
	return out, nil
}

// outOfFDs is what the message of a refusal caused by a descriptor limit
// adds, saying which limit and what to do (invoke.OutOfFDs); "" for any
// other cause.
func outOfFDs(err error) string {
	if todo := invoke.OutOfFDs(err); todo != "" {
		return "; " + todo
	}
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 512 {
		s = s[:512]
	}
	return s
}

// Check reads the pinned manifest for its config digest and makes sure
// podman holds the image under exactly that id (pulling it by digest
// when it does not).
func (b *backend) Check(ctx context.Context, c *invoke.Call) ([]string, error) {
	if err := forwardable(c); err != nil {
		return nil, err
	}
	unenforced, err := b.e.cgroupLimits(ctx)
	if err != nil {
		return nil, err
	}
	ref, err := image.ParseRef(c.Image)
	if err != nil {
		return nil, refusal.Wrap(refusal.ImageDigestMismatch, err, "the call's image %q is not pinned by digest", c.Image)
	}
	if !c.MaterializationDigest.IsZero() && c.MaterializationDigest.String() != ref.Digest.String() {
		return nil, refusal.New(refusal.ImageDigestMismatch, "the call runs %s, its materialization digest is %s", ref.Digest, c.MaterializationDigest)
	}
	m, err := b.e.manifest(ctx, ref)
	if err != nil {
		return nil, err
	}
	id, err := b.e.ensure(ctx, ref, m)
	if err != nil {
		return nil, err
	}
	b.id = id
	b.unenforced = unenforced
	return unenforced, nil
}

// limitsChecked holds, for each podman invocation (binary, globals,
// environment), the limits it was found unable to apply: podman info
// runs once per process for each.
var limitsChecked sync.Map

// cgroupLimits refuses a rootless podman that would ignore --memory,
// --cpus and --pids-limit (container_unavailable), unless
// UnenforcedLimits; then it returns the limits that will not hold
// ("memory", "cpus", "pids"), for the receipt. Root's podman is not
// asked: it applies them.
func (e *Executor) cgroupLimits(ctx context.Context) ([]string, error) {
	if os.Geteuid() == 0 {
		return nil, nil
	}
	key := strings.Join(append(append([]string{e.podman()}, e.globals()...), e.env()...), "\x00")
	v, ok := limitsChecked.Load(key)
	if !ok {
		lost, known := e.cgroupsV1()
		if !known {
			var err error
			if lost, err = e.unappliedLimits(ctx); err != nil {
				return nil, err
			}
		}
		limitsChecked.Store(key, lost)
		v = lost
	}
	lost := v.(unapplied)
	if len(lost.limits) == 0 || e.UnenforcedLimits {
		return slices.Clone(lost.limits), nil
	}
	return nil, refusal.New(refusal.ContainerUnavailable, "%s", lost.why).WithRemedy(refusal.ActionUnenforcedLimits, "")
}

// cgroupsV1 answers for podman info where the answer does not need it:
// a podman that is not root's on a host whose cgroup hierarchy is v1
// (/sys/fs/cgroup not a cgroup2 mount: podman's own test, statfs's
// magic) applies none of the limits, whatever its configuration. Running
// podman info costs half a second here (rootless podman joins its user
// namespace first), on every `cruxprov run --backend container`. The
// shortcut only ever concludes that the limits do not hold: any answer
// that they do still comes from podman info. A remote podman
// (CONTAINER_HOST, CONTAINER_CONNECTION) is asked, since the limits are
// its host's.
func (e *Executor) cgroupsV1() (unapplied, bool) {
	for _, kv := range e.env() {
		if k, _, _ := strings.Cut(kv, "="); k == "CONTAINER_HOST" || k == "CONTAINER_CONNECTION" {
			return unapplied{}, false
		}
	}
	var fs unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &fs); err != nil || fs.Type == unix.CGROUP2_SUPER_MAGIC {
		return unapplied{}, false
	}
	return v1Unapplied("v1"), true
}

// v1Unapplied is what a rootless podman on cgroups of version v (not
// v2) leaves unapplied.
func v1Unapplied(v string) unapplied {
	return unapplied{[]string{"memory", "cpus", "pids"}, fmt.Sprintf(
		"rootless podman on cgroups %s ignores --memory, --cpus and --pids-limit: run the executor as root, or rootless on cgroups v2 with the memory, pids and cpu controllers delegated to the user (docs/executor.md), or choose to run without those limits", v)}
}

// unapplied is what podman info said of the limits: the ones a run
// would go without, and why, as the refusal says it.
type unapplied struct {
	limits []string
	why    string
}

// unappliedLimits asks podman info whether it is rootless, on which
// cgroups version, with which controllers delegated.
func (e *Executor) unappliedLimits(ctx context.Context) (unapplied, error) {
	out, err := e.podmanOut(ctx, "info", "--format", "{{.Host.Security.Rootless}} {{.Host.CgroupsVersion}} {{range .Host.CgroupControllers}}{{.}},{{end}}")
	if err != nil {
		if refusal.CodeOf(err) == refusal.ContainerUnavailable {
			return unapplied{}, err
		}
		return unapplied{}, refusal.Wrap(refusal.ContainerUnavailable, err, "podman cannot report its cgroups (podman info)")
	}
	return readCgroups(string(out))
}

// readCgroups reads podman info's "ROOTLESS VERSION CONTROLLER,…" line.
func readCgroups(out string) (unapplied, error) {
	f := strings.Fields(out)
	if len(f) < 2 || (f[0] != "true" && f[0] != "false") || (f[1] != "v1" && f[1] != "v2") {
		// Not the answer asked for: whether the limits hold is unknown.
		return unapplied{}, refusal.New(refusal.ContainerUnavailable, "podman info said %q, not whether it is rootless and which cgroups version it has", lastLine(out))
	}
	if f[0] != "true" {
		return unapplied{}, nil
	}
	if f[1] != "v2" {
		return v1Unapplied(f[1]), nil
	}
	have := map[string]bool{}
	if len(f) > 2 {
		for _, c := range strings.Split(f[2], ",") {
			have[c] = true
		}
	}
	var missing, limits []string
	for _, c := range []struct{ controller, limit string }{{"memory", "memory"}, {"cpu", "cpus"}, {"pids", "pids"}} {
		if !have[c.controller] {
			missing = append(missing, c.controller)
			limits = append(limits, c.limit)
		}
	}
	if len(missing) == 0 {
		return unapplied{}, nil
	}
	return unapplied{limits, fmt.Sprintf(
		"rootless podman cannot apply the limits: the %s controller(s) are not delegated to the user's cgroup (systemd: Delegate=memory pids cpu for user@.service; docs/executor.md), or choose to run without those limits", strings.Join(missing, ", "))}, nil
}

// manifestType is what a pinned manifest is decoded as.
var manifestType = reflect.TypeFor[v1.Manifest]()

// manifest reads the manifest ref names, checks it hashes to its digest,
// and returns it parsed (its config digest is podman's id of the image).
// An index is refused: a materialization names one platform's manifest.
func (e *Executor) manifest(ctx context.Context, ref image.Ref) (*v1.Manifest, error) {
	var raw []byte
	var err error
	if ref.Repo == nil {
		raw, err = capped.ReadFile(filepath.Join(ref.Layout, "blobs", ref.Digest.Algorithm, ref.Digest.Hex), 4<<20)
	} else {
		var d *remote.Descriptor
		ro := e.Remote
		if ro == nil {
			ro = []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
		}
		// image's transport: a registry that says nothing is bounded by a
		// stall deadline, and its error page is not the refusal's detail.
		d, err = remote.Get(ref.Repo.Digest(ref.Digest.String()), image.RemoteOptions(append([]remote.Option{remote.WithContext(ctx)}, ro...))...)
		if err == nil {
			raw = d.Manifest
		}
	}
	if err != nil {
		return nil, refusal.Wrap(refusal.ContainerUnavailable, err, "cannot read the manifest of %s", ref)
	}
	sum := sha256.Sum256(raw)
	if ref.Digest.Algorithm != "sha256" || hex.EncodeToString(sum[:]) != ref.Digest.Hex {
		return nil, refusal.New(refusal.ImageDigestMismatch, "the manifest read for %s hashes to sha256:%x", ref, sum)
	}
	// Each key once (internal/strictjson), as image.Verify reads it: the
	// digest pins these bytes, and a manifest that says a key twice would
	// be read here as its last, by another reader as its first. A Go
	// caller may dispatch here without the verify hook that checked them.
	if err := strictjson.CheckKeys(raw, manifestType); err != nil {
		return nil, refusal.New(refusal.ImageDigestMismatch, "the manifest %s is refused: %v; treat the image as suspect, build it again and pin the new digest", ref, err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil || m.Config.Digest.Algorithm != "sha256" || m.MediaType.IsIndex() {
		return nil, refusal.New(refusal.ImageDigestMismatch, "%s is not one platform's image manifest", ref)
	}
	return m, nil
}

// ensure returns podman's id of the image whose verified manifest is m
// (the id is its config digest), pulling ref by digest when podman does
// not hold it, and refuses an image podman stores under another config
// digest.
func (e *Executor) ensure(ctx context.Context, ref image.Ref, m *v1.Manifest) (string, error) {
	cfg := m.Config.Digest
	if id, err := e.inspectID(ctx, cfg.Hex); err == nil && id == cfg.Hex {
		return id, nil
	} else if refusal.CodeOf(err) == refusal.ContainerUnavailable {
		return "", err
	}
	id, err := e.pull(ctx, ref, m)
	if err != nil {
		return "", err
	}
	if id != cfg.Hex {
		return "", refusal.New(refusal.ImageDigestMismatch, "podman stored %s as image %s, not the verified config sha256:%s", ref, id, cfg.Hex)
	}
	got, err := e.inspectID(ctx, cfg.Hex)
	if err != nil {
		return "", refusal.Wrap(refusal.ContainerUnavailable, err, "podman lost the image it pulled")
	}
	if got != cfg.Hex {
		return "", refusal.New(refusal.ImageDigestMismatch, "podman's image %s has config digest sha256:%s, not the verified sha256:%s", ref, got, cfg.Hex)
	}
	return got, nil
}

// inspectID is podman's id (its stored config digest) of image id.
func (e *Executor) inspectID(ctx context.Context, id string) (string, error) {
	out, err := e.podmanOut(ctx, "image", "inspect", "--format", "{{.Id}}", id)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// pull brings ref into podman's storage by digest and returns the id it
// stored it under. A layout is pulled through a private one-entry layout
// naming exactly that manifest (podman's oci transport takes a tag, not
// a digest), whose blobs are the original's, staged in a directory whose
// path podman takes as an image name (stagePull); m is ref's verified
// manifest.
func (e *Executor) pull(ctx context.Context, ref image.Ref, m *v1.Manifest) (string, error) {
	var src string
	if ref.Repo == nil {
		dir, err := stagePull(ref.String())
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		blobs, err := filepath.Abs(filepath.Join(ref.Layout, "blobs"))
		if err != nil {
			return "", refusal.Wrap(refusal.ContainerUnavailable, err, "cannot stage %s for podman", ref)
		}
		st, err := os.Stat(filepath.Join(blobs, ref.Digest.Algorithm, ref.Digest.Hex))
		if err != nil {
			return "", refusal.Wrap(refusal.ContainerUnavailable, err, "%s", ref)
		}
		if err := layoutBlobsRegular(blobs, ref, m); err != nil {
			return "", err
		}
		idx := map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
			"manifests": []map[string]any{{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": ref.Digest.String(), "size": st.Size(),
				"annotations": map[string]string{"org.opencontainers.image.ref.name": "run"}}}}
		ib, _ := json.Marshal(idx)
		if err := os.WriteFile(filepath.Join(dir, "index.json"), ib, 0o644); err != nil {
			return "", refusal.Wrap(refusal.ContainerUnavailable, err, "cannot stage %s for podman", ref)
		}
		if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
			return "", refusal.Wrap(refusal.ContainerUnavailable, err, "cannot stage %s for podman", ref)
		}
		if err := os.Symlink(blobs, filepath.Join(dir, "blobs")); err != nil {
			return "", refusal.Wrap(refusal.ContainerUnavailable, err, "cannot stage %s for podman", ref)
		}
		src = "oci:" + dir + ":run"
	} else {
		src = "docker://" + ref.Repo.Name() + "@" + ref.Digest.String()
	}
	args := []string{"pull", "--quiet"}
	if e.InsecureRegistry || (ref.Repo != nil && ref.Repo.Registry.Scheme() == "http") {
		args = append(args, "--tls-verify=false")
	}
	out, err := e.podmanWithin(ctx, pullTimeout, append(args, src)...)
	if err != nil {
		return "", refusal.Wrap(refusal.ContainerUnavailable, err, "podman cannot pull %s", ref)
	}
	id := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(id, '\n'); i >= 0 {
		id = id[i+1:]
	}
	if ref.Repo == nil {
		// The private layout's path is no name to keep.
		_, _ = e.podmanOut(ctx, "untag", id)
	}
	return id, nil
}

// layoutBlobsRegular refuses a layout whose config or layer blob named
// by ref's verified manifest m is not a regular file: podman's pull opens
// each blob and waits on a FIFO planted there for ever (the check before a
// run skips rehashing layers, so nothing else looked at them).
func layoutBlobsRegular(blobs string, ref image.Ref, m *v1.Manifest) error {
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		p := filepath.Join(blobs, d.Digest.Algorithm, d.Digest.Hex)
		if d.Digest.Algorithm != "sha256" || strings.ContainsAny(d.Digest.Hex, "/.") {
			return refusal.New(refusal.ImageDigestMismatch, "%s names the blob %s", ref, d.Digest)
		}
		st, err := os.Stat(p)
		if err != nil {
			return refusal.Wrap(refusal.ImageDigestMismatch, err, "%s: a blob of the layout is missing: build or copy the layout again", ref)
		}
		if !st.Mode().IsRegular() {
			return refusal.New(refusal.ImageDigestMismatch, "%s: the layout's blob %s is not a regular file (%s): build or copy the layout again", ref, d.Digest, st.Mode().Type())
		}
	}
	return nil
}

func (e *Executor) limits() Limits {
	l := Defaults
	low := func(d *int64, v int64) {
		if v > 0 && v < *d {
			*d = v
		}
	}
	low(&l.Memory, e.Limits.Memory)
	low(&l.Pids, e.Limits.Pids)
	low(&l.NoFile, e.Limits.NoFile)
	low(&l.NProc, e.Limits.NProc)
	low(&l.WorkdirBytes, e.Limits.WorkdirBytes)
	low(&l.ShmBytes, e.Limits.ShmBytes)
	if e.Limits.CPUs > 0 && e.Limits.CPUs < l.CPUs {
		l.CPUs = e.Limits.CPUs
	}
	return l
}

// podmanReads are the variables podman (its libraries, and the dynamic
// linker and Go runtime under it, conmon and runc) reads itself, and the
// prefixes of such families: forwarded to a container, a variable goes
// into `podman run`'s own environment (its value never on argv), where it
// changes what podman does. HOME or XDG_DATA_HOME other than the pull's
// made the run look for the image in other storage ("image not known");
// NOTIFY_SOCKET has podman send the executor's systemd service MAINPID=
// (conmon's pid) and bind a notify socket into the container;
// CONTAINERS_CONF and its kin change every default of the run.
var podmanReads = struct{ names, prefixes []string }{
	names: []string{"HOME", "PATH", "TMPDIR", "NOTIFY_SOCKET", "REGISTRY_AUTH_FILE", "REGISTRIES_CONFIG_PATH",
		"STORAGE_DRIVER", "STORAGE_OPTS", "GODEBUG", "GOGC", "GOMAXPROCS", "GOMEMLIMIT", "GOTRACEBACK"},
	prefixes: []string{"XDG_", "CONTAINERS_", "CONTAINER_", "_CONTAINERS_", "PODMAN_", "DOCKER_", "LISTEN_", "LD_", "SSH_"},
}

// forwardable refuses a call that would forward a variable podman reads
// itself (podmanReads), allowed from the caller's environment or
// injected, set there or not: the provider gets it from the image
// instead, or not at all. An injected one is refused first: the caller
// that injects it changes its code. An allowed one (only) carries the
// remedy that runs again without allowing it.
func forwardable(c *invoke.Call) error {
	var injected []string
	for _, kv := range c.Inject {
		k, _, _ := strings.Cut(kv, "=")
		injected = append(injected, k)
	}
	for _, n := range append(injected, c.Allow...) {
		bad := slices.Contains(podmanReads.names, n)
		for _, p := range podmanReads.prefixes {
			bad = bad || strings.HasPrefix(n, p)
		}
		if bad {
			r := refusal.New(refusal.ContainerUnavailable, "a container run cannot pass %s to the provider: podman, which passes the variables by name from its own environment, reads it itself (its storage, configuration or sockets); do not allow %s into the provider's environment", n, n)
			if !slices.Contains(injected, n) {
				r.WithRemedy(refusal.ActionDisallowEnv, n)
			}
			return r
		}
	}
	return nil
}

// forward returns the names to pass with --env and podman's environment
// holding their values: the allowed names from Environ, then Inject.
func forward(c *invoke.Call, base []string) ([]string, []string) {
	allow := map[string]bool{}
	for _, a := range c.Allow {
		allow[a] = true
	}
	vals := map[string]string{}
	var names []string
	add := func(kv string) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, "\x00") {
			return
		}
		if _, seen := vals[k]; !seen {
			names = append(names, k)
		}
		vals[k] = v
	}
	for _, kv := range c.Environ {
		if k, _, ok := strings.Cut(kv, "="); ok && allow[k] {
			add(kv)
		}
	}
	for _, kv := range c.Inject {
		add(kv)
	}
	env := make([]string, 0, len(base)+len(names))
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); k != "" {
			if _, fwd := vals[k]; fwd {
				continue
			}
		}
		env = append(env, kv)
	}
	for _, k := range names {
		env = append(env, k+"="+vals[k])
	}
	return names, env
}

func newName(attempt string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "cruxprov-" + attempt + "-" + hex.EncodeToString(b[:])
}

// Start runs the container.
func (b *backend) Start(ctx context.Context, s *invoke.Spawn) (invoke.Process, error) {
	e := b.e
	l := e.limits()
	user := e.User
	if user == "" {
		user = "65534:65534"
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "0" || uid == "root" {
		return nil, refusal.New(refusal.ContainerUnavailable, "the container user %q is root: never root inside", user)
	}
	uid, gid, _ := strings.Cut(user, ":")
	if gid == "" {
		gid = uid
	}
	name := newName(s.Attempt)
	args := append(e.globals(), "run", "--name", name, "--interactive", "--detach-keys", "", "--sig-proxy=false",
		"--pull", "never", "--unsetenv-all", "--network", "none",
		// --read-only alone leaves /tmp, /var/tmp and /run writable, each a
		// tmpfs of no size of its own: a provider wrote past the workdir's
		// limit there. /work is the one place to write.
		"--read-only", "--read-only-tmpfs=false", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", "--user", user)
	// A limit podman cannot apply here (UnenforcedLimits) is not asked
	// for: rootless on cgroups v1 podman ignores them, but prints
	// "Resource limits are not supported and ignored on cgroups V1
	// rootless systems" on the run's stderr, which was billed as the
	// provider's, kept in its receipt, and made a shim refusal (its one
	// stderr line and nothing else) read as the harness's exit 78.
	if !slices.Contains(b.unenforced, "memory") {
		args = append(args, "--memory", strconv.FormatInt(l.Memory, 10), "--memory-swap", strconv.FormatInt(l.Memory, 10))
	}
	if !slices.Contains(b.unenforced, "cpus") {
		args = append(args, "--cpus", strconv.FormatFloat(l.CPUs, 'f', -1, 64))
	}
	if !slices.Contains(b.unenforced, "pids") {
		args = append(args, "--pids-limit", strconv.FormatInt(l.Pids, 10))
	}
	args = append(args,
		"--ulimit", fmt.Sprintf("nofile=%d:%d", l.NoFile, l.NoFile), "--ulimit", fmt.Sprintf("nproc=%d:%d", l.NProc, l.NProc),
		// No core dumps, soft and hard: cruxshim and the harness hold
		// the secret bundle in memory (the subprocess executor's init
		// shell sets the same).
		"--ulimit", "core=0:0",
		"--tmpfs", fmt.Sprintf("%s:rw,nosuid,nodev,size=%d,mode=0700,U", Workdir, l.WorkdirBytes),
		// The container's own IPC, pid and UTS namespaces, and a
		// /dev/shm of a size of the executor's, whatever containers.conf
		// says (ipcns, pidns, utsns = "host"; shm_size): podman takes
		// its defaults from there, and with ipcns = "host" a provider
		// read and wrote the host's /dev/shm, which outlives the run;
		// with pidns = "host" it saw (and could signal) every process
		// of the host running as its uid.
		"--ipc", "private", "--pid", "private", "--uts", "private",
		"--shm-size", strconv.FormatInt(l.ShmBytes, 10),
		// passthrough: the container's stdout and stderr are the pipes
		// this executor reads, handed down by podman, not relayed by
		// conmon and the attached client. Once the output budget is
		// spent the executor reads nothing more of them (invoke.Dispatch),
		// so the provider's next write blocks where the budget was spent
		// until its kill lands. Relayed (--log-driver none and attach), the pipes
		// were the client's: a client no longer read blocks conmon, and
		// `podman kill --signal KILL`, which waits for conmon to record
		// the exit, then timed out (6 s) with the container still there;
		// so the executor drained on, discarding, and a flood of 2 MB
		// against a budget of 1 MiB wrote all of it and its result before
		// the kill landed (TestOutputLimitStopsTheContainer).
		"--workdir", Workdir, "--log-driver", "passthrough")
	if id := ownerID(); id != "" {
		args = append(args, "--label", LabelExecutor+"="+id)
	}
	if s.Budgets.TimeoutMS > 0 {
		// conmon kills the container at its budget even when no executor
		// is left to (one killed mid-run): a backstop a few seconds after
		// the executor's own SIGKILL (the timeout, then the grace), which
		// records the timeout.
		grace := e.Grace
		if grace <= 0 {
			grace = invoke.DefaultGrace
		}
		ms := s.Budgets.TimeoutMS + grace.Milliseconds()
		args = append(args, "--timeout", strconv.FormatInt((ms+999)/1000+backstopSeconds, 10))
	}
	names, env := forward(s.Call, e.env())
	for _, n := range names {
		args = append(args, "--env", n)
	}
	var shimArgs []string
	var secretR, secretW *os.File
	var mount string       // SecretPath's private tmpfs
	var mountLock *os.File // its root, flocked while the run lasts (pruneSecretMounts)
	cleanupMount := func() {
		if mountLock != nil {
			mountLock.Close()
		}
		if mount != "" {
			_ = syscall.Unmount(mount, syscall.MNT_DETACH)
			_ = os.Remove(mount)
		}
	}
	if s.Bundle != nil {
		switch e.SecretMode {
		case "", SecretPipe:
			var err error
			if secretR, secretW, err = os.Pipe(); err != nil {
				return nil, refusal.Wrap(refusal.ContainerUnavailable, err, "cannot make the secret pipe%s", outOfFDs(err))
			}
			args = append(args, "--preserve-fds", strconv.Itoa(shim.SecretFD-2))
			shimArgs = []string{"--secret-pipe-fd", strconv.Itoa(shim.SecretFD)}
		case SecretPath:
			// The lock is held for the run, so that a later Prune can
			// tell this mount from one an executor killed mid-run left,
			// with the bundle in it if the shim had not read it yet.
			p, lock, err := privateTmpfs(e.SecretDir, uid, gid, s.Bundle)
			if err != nil {
				return nil, err
			}
			mount, mountLock = p, lock
			args = append(args, "--mount", "type=bind,source="+p+",destination=/run/cruxprov-secret")
			shimArgs = []string{"--secret-path", "/run/cruxprov-secret/bundle"}
		default:
			return nil, refusal.New(refusal.ContainerUnavailable, "unknown secret mode %q (pipe or path)", e.SecretMode)
		}
	}
	if e.command == nil && python.Handoff(s.Call.Runtime) {
		// The runtime takes the channel from a variable: cruxshim moves it
		// off fd 1 (the container's stdout, still the channel here) before
		// the harness's interpreter starts, so that the env's start-up
		// code writes stderr. An older image's cruxshim does not know the
		// flag, and its runtime would not take the channel. (A command of
		// the executor's own, not the harness, keeps fd 1.)
		shimArgs = append(shimArgs, "--protocol-fd-env", python.ProtocolFDVar)
	}
	args = append(args, b.id)
	args = append(args, shimArgs...)
	args = append(args, "--")
	if e.command != nil {
		args = append(args, e.command...)
	} else {
		args = append(args, image.Harness...)
	}
	// conmon writes an empty file "oom" into its working directory, the
	// podman client's, when the container is killed for memory (conmon
	// 2.1): every such run left one in the executor's own directory.
	// podman runs in a private directory, removed with the run (Prune
	// removes those of executors killed mid-run).
	cwd, err := os.MkdirTemp("", runDirPrefix)
	if err != nil {
		if secretR != nil {
			secretR.Close()
			secretW.Close()
		}
		cleanupMount()
		return nil, refusal.Wrap(refusal.ContainerUnavailable, err, "cannot make the run's private directory in %s; set TMPDIR to a directory this user can write", os.TempDir())
	}
	// Held for the run, as the subprocess executor holds its working
	// directories, which share the name and the temp directory: each
	// executor's sweep removes only those no run holds. Unheld, a
	// local run's sweep removed a container run's directory once a
	// minute old, and with it conmon's "oom" (the run then read as a
	// plain SIGKILL); and Prune removed a local run's working directory
	// under it once 21 minutes old.
	held, err := os.Open(cwd)
	if err == nil && syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		held.Close()
		err = errors.New("cannot lock it")
	}
	if err != nil {
		if secretR != nil {
			secretR.Close()
			secretW.Close()
		}
		cleanupMount()
		_ = os.RemoveAll(cwd)
		return nil, refusal.Wrap(refusal.ContainerUnavailable, err, "cannot hold the run's private directory %s%s", cwd, outOfFDs(err))
	}
	cleanup := func() {
		cleanupMount()
		_ = os.RemoveAll(cwd)
		held.Close()
	}
	// stdin, stdout and stderr are pipes of the executor's own, copied
	// here, not by os/exec: with --log-driver passthrough the container
	// holds them, and cmd.Wait, which waits for its copies to end, did
	// not return when the client was killed from outside until its
	// WaitDelay (5 s) was up, the container running on and being read
	// meanwhile (TestClientKilledFromOutside). cmd.Wait now returns at
	// the client's exit, and Wait drains the pipes once the container is
	// gone.
	// Marked before the pipes are made (all close-on-exec already): one
	// an embedding program opened without O_CLOEXEC does not reach podman
	// and the container.
	if err := invoke.CloseInherited(); err != nil {
		if secretR != nil {
			secretR.Close()
			secretW.Close()
		}
		cleanup()
		return nil, refusal.Wrap(refusal.ContainerUnavailable, err, "cannot keep this process's open descriptors from podman, so it was not started")
	}
	pipes, err := newStdio(s.Request, s.Stdout, &tailWriter{w: s.Stderr})
	if err != nil {
		if secretR != nil {
			secretR.Close()
			secretW.Close()
		}
		cleanup()
		return nil, refusal.Wrap(refusal.ContainerUnavailable, err, "cannot make the pipes for the container's stdin, stdout and stderr%s", outOfFDs(err))
	}
	cmd := exec.Command(e.podman(), args...)
	cmd.Dir = cwd
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pipes.child[0], pipes.child[1], pipes.child[2]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if secretR != nil {
		extra := make([]*os.File, shim.SecretFD-2)
		extra[shim.SecretFD-3] = secretR
		cmd.ExtraFiles = extra
	}
	err = cmd.Start()
	pipes.started()
	if err != nil {
		pipes.close()
		if secretR != nil {
			secretR.Close()
			secretW.Close()
		}
		cleanup()
		return nil, refusal.Wrap(refusal.ContainerUnavailable, err, "cannot start podman (%s)%s", e.podman(), outOfFDs(err))
	}
	// The client's exit is watched from now, while nothing can have
	// reaped it (Wait reaps it): by a pidfd, which no other process
	// can take over.
	exited := invoke.WatchExit(cmd.Process.Pid)
	if secretR != nil {
		secretR.Close()
		go func() {
			_, _ = secretW.Write(s.Bundle)
			secretW.Close()
		}()
	}
	return &process{e: e, cmd: cmd, name: name, stdio: pipes, cleanup: cleanup, cwd: cwd, memory: l.Memory, exited: exited}, nil
}

// drainLimit bounds the wait for the container's stdout and stderr to
// close once the container has exited or been removed; then what was
// read is kept and the reads stop (os/exec's WaitDelay, as before), and
// the run fails (drainFailure). A variable for tests (setDrainLimit).
var drainLimit = 5 * time.Second

// stdio is a container run's stdin, stdout and stderr: pipes whose child
// ends podman hands down to the container (--log-driver passthrough),
// and whose parent ends the executor writes the request to and copies
// from, as os/exec would, but on its own, so that the podman client's
// exit is seen (cmd.Wait) apart from the pipes' end (drain).
type stdio struct {
	child  [3]*os.File // stdin's read end, stdout's and stderr's write ends
	in     *os.File    // stdin's write end
	out    [2]*os.File // stdout's and stderr's read ends
	tail   *tailWriter
	copied chan struct{} // closed once both copies ended
}

func newStdio(request []byte, stdout io.Writer, stderr *tailWriter) (*stdio, error) {
	s := &stdio{tail: stderr, copied: make(chan struct{})}
	var err error
	if s.child[0], s.in, err = os.Pipe(); err != nil {
		return nil, err
	}
	for i := range s.out {
		if s.out[i], s.child[i+1], err = os.Pipe(); err != nil {
			s.close()
			return nil, err
		}
	}
	go func() {
		// A request the container never reads to its end: the write
		// ends when the container is gone (EPIPE), or with drain.
		_, _ = s.in.Write(request)
		s.in.Close()
	}()
	var wg sync.WaitGroup
	for i, w := range []io.Writer{stdout, stderr} {
		wg.Go(func() {
			_, _ = io.Copy(w, s.out[i])
			// As os/exec: a copy that stopped on the writer's error
			// (the output budget spent) reads nothing more.
			s.out[i].Close()
		})
	}
	go func() { wg.Wait(); close(s.copied) }()
	return s, nil
}

// started closes the child's ends, which the podman client (or nothing,
// had it not started) now holds.
func (s *stdio) started() {
	for _, f := range s.child {
		if f != nil {
			f.Close()
		}
	}
}

// close ends the copies where they are: what was read is kept.
func (s *stdio) close() {
	s.started()
	if s.in != nil {
		s.in.Close()
	}
	for _, f := range s.out {
		if f != nil {
			f.Close()
		}
	}
}

// drain waits, up to drainLimit, for stdout and stderr to be read to
// their end, once whatever held them (the container, conmon) is gone,
// then closes the pipes. A copy held by its writer (the output budget
// spent, until the kill) is not waited for past the limit, as os/exec's
// were not. It reports whether both were read to their end: where the
// limit ended the wait, what was read may not be all that was written.
func (s *stdio) drain() (complete bool) {
	t := time.NewTimer(drainLimit)
	defer t.Stop()
	select {
	case <-s.copied:
		complete = true
	case <-t.C:
	}
	s.close()
	return complete
}

// drainFailure is the failure (invoke.Failer) of a run, exit status
// code, whose stdout and stderr drain could not read to their end: the
// result and the byte counts are then of part of the output, which must
// not pass for all of it.
func drainFailure(code int) string {
	return fmt.Sprintf("the container's stdout and stderr were still held open %v after it had exited and been removed (exit status %d), by a process that is not the container's (a podman hook, or a wrapper podman runs through, that left one behind): what was read of them may not be all the run wrote, so its result is not taken; run again, and if it recurs, find that process so that it leaves none behind", drainLimit, code)
}

// secretMountGrace is how old a private secret tmpfs must be before a
// prune may take it: a run locks it right after mounting it, and this
// covers the moment between.
const secretMountGrace = time.Minute

// pruneSecretMounts unmounts and removes the private secret tmpfs mounts
// (path mode) that executors killed mid-run left under parent ("":
// /run): older than secretMountGrace, and locked by no live run. They can
// hold a secret bundle the shim never read. Best effort (it needs root,
// as path mode does); it returns what it removed.
func pruneSecretMounts(parent string) []string {
	if parent == "" {
		parent = "/run"
	}
	names, _ := filepath.Glob(filepath.Join(parent, "cruxprov-secret-*"))
	var gone []string
	for _, p := range names {
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < secretMountGrace {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			f.Close()
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
			if os.Remove(p) == nil {
				gone = append(gone, p)
			}
			continue
		}
		f.Close()
	}
	return gone
}

// privateTmpfs mounts a fresh tmpfs for one run in a new directory under
// parent (writable by uid:gid alone, so that the shim can unlink), locks
// it, writes the bundle there and returns the directory and the lock,
// which the run holds while it lasts: a flock on the mount's root, by
// which a later prune tells a live run's mount from one an executor
// killed mid-run left (pruneSecretMounts). The executor never deletes
// the file itself: unmounting after the run drops whatever is left.
func privateTmpfs(parent, uid, gid string, bundle []byte) (dir string, lock *os.File, err error) {
	if parent == "" {
		parent = "/run"
	}
	dir, err = os.MkdirTemp(parent, "cruxprov-secret-")
	if errors.Is(err, fs.ErrPermission) {
		// Not root, most likely (parent is /run): say what the mount's
		// refusal says, or the refusal read "permission denied" alone.
		return "", nil, refusal.Wrap(refusal.ContainerUnavailable, err, "secret path mode: no directory for a private tmpfs (path mode mounts one, which needs root; the pipe mode does not)").WithRemedy(refusal.ActionSecretPipe, "")
	}
	if err != nil {
		return "", nil, refusal.Wrap(refusal.ContainerUnavailable, err, "secret path mode: no directory for a private tmpfs")
	}
	u, err1 := strconv.Atoi(uid)
	g, err2 := strconv.Atoi(gid)
	if err1 != nil || err2 != nil {
		os.Remove(dir)
		return "", nil, refusal.New(refusal.ContainerUnavailable, "secret path mode needs a numeric container user, not %s:%s", uid, gid)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC,
		fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", 2*invoke.MaxSecretBundle, u, g)); err != nil {
		os.Remove(dir)
		return "", nil, refusal.Wrap(refusal.ContainerUnavailable, err, "secret path mode: cannot mount a private tmpfs (it needs root; the pipe mode does not)").WithRemedy(refusal.ActionSecretPipe, "")
	}
	// Locked before the bundle is in it. Unlocked, the mount would be
	// one a dead executor left for any prune once secretMountGrace
	// old: another executor's would unmount it, and the bundle with it,
	// under the running provider.
	lock, err = os.Open(dir)
	if err == nil {
		if err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			lock.Close()
		}
	}
	if err != nil {
		_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		os.Remove(dir)
		todo := outOfFDs(err)
		if todo == "" {
			todo = "; run again, or deliver the secrets through the pipe mode, which mounts nothing"
		}
		return "", nil, refusal.Wrap(refusal.ContainerUnavailable, err, "secret path mode: cannot lock the run's private tmpfs, without which another executor's prune could unmount it during the run%s", todo)
	}
	p := filepath.Join(dir, "bundle")
	err = os.WriteFile(p, bundle, 0o400)
	if err == nil {
		err = os.Chown(p, u, g)
	}
	if err != nil {
		lock.Close()
		_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		os.Remove(dir)
		return "", nil, refusal.Wrap(refusal.ContainerUnavailable, err, "secret path mode: cannot write the bundle to the private tmpfs%s", outOfFDs(err))
	}
	return dir, lock, nil
}

// tailWriter passes stderr on and keeps its last KiB (podman's own error
// when the container never started).
type tailWriter struct {
	w   io.Writer
	mu  sync.Mutex
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2048 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-1024:]...)
	}
	t.mu.Unlock()
	return t.w.Write(p)
}

func (t *tailWriter) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLine(string(t.buf))
}

type process struct {
	e       *Executor
	cmd     *exec.Cmd
	name    string
	stdio   *stdio
	cleanup func()
	// killed is set once Signal(false) ran: the container may be gone
	// (removed by force) by the time Wait inspects it.
	killed atomic.Bool
	// cwd is the podman client's private working directory, where
	// conmon writes "oom" when the container is killed for memory.
	cwd string
	// memory is the container's --memory, in bytes.
	memory int64
	// failure is what Wait found that the exit status does not say
	// (invoke.Failer).
	failure string
	// mu orders Signal's kill of the client's process group with Wait's
	// reap of the client: reaped is set, under mu, as the client is
	// reaped, and Signal kills the group, under mu, only while it is not.
	mu     sync.Mutex
	reaped bool
	// exited waits for the client's exit without reaping it
	// (invoke.WatchExit, opened as it started; nil: unknown).
	exited func() bool
}

// killGroup sends SIGKILL to process group pgid (tests replace it, to
// see what is signalled).
var killGroup = func(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// Failure implements invoke.Failer.
func (p *process) Failure() string { return p.failure }

// Signal asks podman to signal the container; SIGKILL also ends the
// podman client.
func (p *process) Signal(term bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sig := "KILL"
	if term {
		sig = "TERM"
	}
	if !term {
		p.killed.Store(true)
	}
	_, err := p.e.podmanOut(ctx, "kill", "--signal", sig, p.name)
	if !term {
		if err != nil {
			_, _ = p.e.podmanOut(ctx, "rm", "--force", "--time", "0", p.name)
		}
		// The client's group, while the client is not reaped: its pid
		// is then still its own (a zombie's too), and with it the group
		// id. Once Wait has reaped it, the pid, and a group of that id,
		// may be another process's: a kill then could end a stranger's
		// processes (Signal runs beside Wait, which reaps the client as
		// soon as it exits).
		p.mu.Lock()
		if !p.reaped {
			killGroup(p.cmd.Process.Pid)
		}
		p.mu.Unlock()
	}
}

// reap waits for the podman client to exit, then reaps it with mu held
// and reaped set (Signal), as os.Process does for its own Signal: the
// exit is waited for without reaping (exited), and the zombie then
// reaped at once.
func (p *process) reap() error {
	seen := p.exited != nil && p.exited()
	p.mu.Lock()
	p.reaped = true
	if !seen {
		// Not known to have exited: not reaped under mu, which Signal
		// would wait for, but never signalled by group again (podman
		// kill and rm still end the container, and the client with it).
		p.mu.Unlock()
		return p.cmd.Wait()
	}
	defer p.mu.Unlock()
	return p.cmd.Wait()
}

// Wait waits for podman, reads the container's state (whether it ever
// started, its exit code), removes it, and reads its stdout and stderr to
// their end. The client's exit is seen at once, whatever holds the pipes:
// a client killed from outside leaves its container running, writing to
// them, until it is removed here.
func (p *process) Wait() (int, bool, error) {
	defer p.cleanup()
	werr := p.reap()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// How podman's client ended, where that is not how the container
	// did: killed by a signal the executor did not send (kill -9 of
	// `podman run`, the host's OOM killer), or gone while the container
	// still runs (rootless, the podman that attaches is a child of the
	// one started, which then exits 137 itself). The container's exit
	// code, 0 while it runs, is then not the run's: the run fails.
	var clientSig syscall.Signal
	clientCode := -1
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		clientCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			clientSig = ws.Signal()
			clientCode = 128 + int(clientSig)
		}
	} else if werr == nil {
		clientCode = 0
	}
	if werr == nil && !p.killed.Load() {
		// podman run exits 0 for a container that ran and exited 0,
		// and for nothing else (its own failures are 125, 126, 127):
		// the state inspect would read is known, and a run spares a
		// podman process (~0.15 s rootless here). Any other exit is
		// read from the container's state, as below.
		_, _ = p.e.podmanOut(ctx, "rm", "--force", "--time", "0", "--ignore", p.name)
		if !p.stdio.drain() {
			p.failure = drainFailure(0)
		}
		return 0, false, nil
	}
	out, ierr := p.e.podmanOut(ctx, "container", "inspect", "--format", "{{.State.ExitCode}} {{.State.StartedAt.IsZero}} {{.State.Running}}", p.name)
	_, _ = p.e.podmanOut(ctx, "rm", "--force", "--time", "0", "--ignore", p.name)
	// The container is gone: its pipes close, and what it wrote, and
	// podman's own stderr (why, below), are read to their end.
	drained := p.stdio.drain()
	// conmon writes an empty "oom" into its working directory, the
	// client's private one, when the kernel kills a process of the
	// container for memory; podman's State.OOMKilled stays false with
	// runc (podman 4.3, conmon 2.1).
	_, oerr := os.Lstat(filepath.Join(p.cwd, "oom"))
	oom := oerr == nil
	if ierr != nil && p.killed.Load() {
		return -1, true, nil // the executor killed it (timeout, flood): gone with the force
	}
	// podman's client killed before the container started: its stderr
	// says nothing of it (the refusal read "the container did not
	// start: " and nothing more).
	why := p.stdio.tail.last()
	if clientSig != 0 && !p.killed.Load() {
		why = fmt.Sprintf("podman, the container's client, was killed by %s from outside the executor; run again", unix.SignalName(clientSig))
	} else if why == "" {
		why = fmt.Sprintf("podman exited %d and said nothing", clientCode)
	}
	if ierr != nil {
		return -1, false, refusal.Wrap(refusal.ContainerUnavailable, ierr, "the container was not created: %s", why)
	}
	state, running, rok := cutRunning(out)
	code, started, ok := parseState(state)
	switch {
	case !ok || !rok:
		return -1, false, refusal.New(refusal.ContainerUnavailable, "podman inspect said %q", out)
	case !started:
		return -1, false, refusal.New(refusal.ContainerUnavailable, "the container did not start: %s", why)
	case p.killed.Load():
	case clientSig != 0:
		code = clientCode
		p.failure = fmt.Sprintf("podman, the container's client, was killed by %s from outside the executor (exit status %d) before the run ended: the container was killed and removed, and how the harness ended, and its result, are unknown; run again", unix.SignalName(clientSig), code)
	case running:
		code = clientCode
		p.failure = fmt.Sprintf("podman, the container's client, exited %d while the container still ran (a podman process killed from outside the executor, or podman's own failure): the container was killed and removed, and how the harness ended, and its result, are unknown; run again", code)
	case oom && code != 0:
		p.failure = outOfMemory(p.memory, code)
	}
	if !drained && p.failure == "" {
		p.failure = drainFailure(code)
	}
	return code, false, nil
}

// outOfMemory is the message of a run whose container the kernel killed
// for memory (or whose harness exited code after a process of the run
// was).
func outOfMemory(limit int64, code int) string {
	what := fmt.Sprintf("the kernel killed it at the container's memory limit, %s (exit status %d)", mib(limit), code)
	if code != 128+int(syscall.SIGKILL) {
		what = fmt.Sprintf("the harness exited %d after the kernel killed a process of the run at the container's memory limit, %s", code, mib(limit))
	}
	return "the provider ran out of memory: " + what + "; that limit is the container executor's own (podman --memory, docs/executor.md), which neither the manifest nor the caller can raise: the provider must use less memory"
}

// mib writes n bytes in MiB where it is a whole number of them.
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// cutRunning splits podman inspect's "… {{.State.Running}}" into what
// comes before, for parseState, and whether the container runs; ok is
// false where the last field is neither "true" nor "false".
func cutRunning(out []byte) (rest []byte, running, ok bool) {
	s := strings.TrimRight(string(out), " \t\r\n")
	i := strings.LastIndexAny(s, " \t")
	if i < 0 {
		return nil, false, false
	}
	switch s[i+1:] {
	case "true":
		return []byte(s[:i]), true, true
	case "false":
		return []byte(s[:i]), false, true
	}
	return nil, false, false
}

// parseState reads podman inspect's "{{.State.ExitCode}}
// {{.State.StartedAt.IsZero}}": the exit code, and whether the container
// started ("false": its start time is not zero). Anything else is not
// ok: an answer that is neither "true" nor "false" is not taken for a
// start, nor an exit code no process has (outside 0–255, or not plain
// decimal digits: "+3", "-1") for one.
func parseState(out []byte) (code int, started, ok bool) {
	f := strings.Fields(string(out))
	if len(f) != 2 || f[1] != "true" && f[1] != "false" {
		return 0, false, false
	}
	if f[1] == "true" {
		return 0, false, true
	}
	if f[0] == "" || len(f[0]) > 3 || strings.Trim(f[0], "0123456789") != "" {
		return 0, false, false
	}
	code, err := strconv.Atoi(f[0])
	if err != nil || code > 255 {
		return 0, false, false
	}
	return code, true, true
}
