package image

import (
	"archive/tar"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/fetch"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/internal/elfread"
	"github.com/cruxible/cruxprov/manifest"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/sign"
	"github.com/cruxible/cruxprov/store"
)

// Where cruxprov puts things inside an image.
const (
	// EnvPath is the env's directory.
	EnvPath = "/opt/cruxprov/env"
	// ShimPath is cruxshim, the ENTRYPOINT.
	ShimPath = "/opt/cruxprov/bin/cruxshim"
	// MetaDir holds provider.toml, pylock.toml and seal.json.
	MetaDir = "/opt/cruxprov/provider"
	// User is the image's default user (nobody): never root inside.
	User = "65534:65534"
)

// Harness is the image's CMD: the harness under the env's interpreter,
// isolated (-I), as the subprocess executor runs it (python.Harness;
// DESIGN §10). The container executor gives the same argv; for a runtime
// that takes the protocol channel from python.ProtocolFDVar it asks
// cruxshim to move the channel off fd 1 before the exec
// (--protocol-fd-env; docs/executor.md, "Start-up code").
var Harness = python.Harness(EnvPath + "/bin/python")

// ErrPushInterrupted is in the chain of Build's error when the context
// ended while it pushed: what it pushed before (blobs, the manifest by
// digest) stays in the registry, named by no tag it moved. A build
// stopped before its push pushed nothing.
var ErrPushInterrupted = errors.New("interrupted while pushing")

// PushInterruptedError is Build's error when the context ended while it
// pushed (errors.Is ErrPushInterrupted). With --output too, the layout
// was written before the push began: Layout names it, and the image is
// in it whole (and signed when Signed), under its tag.
type PushInterruptedError struct {
	Repo   string
	Layout string // "" without Options.Output
	Signed bool   // the build signed the image (Options.Key)
	Err    error
}

func (e *PushInterruptedError) Error() string {
	return fmt.Sprintf("%v to %s (no tag was moved): %v", ErrPushInterrupted, e.Repo, e.Err)
}

// Unwrap is ErrPushInterrupted and the push's error.
func (e *PushInterruptedError) Unwrap() []error { return []error{ErrPushInterrupted, e.Err} }

// InLayout says where the image is kept when the push did not finish:
// in the layout written before it began ("" without one).
func (e *PushInterruptedError) InLayout() string { return inLayout(e.Layout, e.Signed) }

// inLayout is what a push that did not finish says of the layout dir its
// build wrote first ("" for none): the image is there, under its tag, and
// signed only when the build signed it (it said "signed" of an image
// built without a key too).
func inLayout(dir string, signed bool) string {
	if dir == "" {
		return ""
	}
	if !signed {
		return "the image is in the layout " + LayoutPrefix + dir + ", written whole (unsigned) before the push began"
	}
	return "the image is in the layout " + LayoutPrefix + dir + ", written whole and signed before the push began"
}

// Label and annotation keys cruxprov sets (DESIGN §7), besides the
// org.opencontainers.image ones.
const (
	LabelProvider        = "dev.cruxible.provider.name"
	LabelVersion         = "dev.cruxible.provider.version"
	LabelPackage         = "dev.cruxible.package.sha256"
	LabelFilename        = "dev.cruxible.package.filename"
	LabelResolution      = "dev.cruxible.resolution.digest"
	LabelMaterialization = "dev.cruxible.materialization.local"
	LabelTree            = "dev.cruxible.tree.digest"
	LabelPlatform        = "dev.cruxible.platform"
	LabelInterpreter     = "dev.cruxible.interpreter"
	// LabelImplementation prefixes an entrypoint's name: its
	// implementation digest.
	LabelImplementation = "dev.cruxible.implementation."
	LabelBaseName       = "org.opencontainers.image.base.name"
	LabelBaseDigest     = "org.opencontainers.image.base.digest"
)

// MaxEpoch is the latest SOURCE_DATE_EPOCH an image takes: a USTAR
// header's mtime is 11 octal digits (2242-03-16T12:56:31Z), and the
// layers are USTAR, never PAX.
const MaxEpoch = 1<<33 - 1

// Options is one image build.
type Options struct {
	// Root is the provider's root wheel, read into the store Build is
	// given (pipeline.OpenRoot for a file, pipeline.FetchRoot for
	// NAME==VERSION): the image's provider.toml and pylock.toml are the
	// ones read there, and every platform's env installs it.
	Root *pipeline.RootWheel
	// Platforms are platform preset ids (platform list); several give an
	// image index, one manifest per platform (distinct os/arch).
	Platforms []string
	// Client is the pinned index; nil builds from the store alone.
	Client *index.Client
	// Base is the base image, REF@sha256:… or oci:DIR@sha256:….
	Base string
	// Shims maps a platform id, or "" for every platform, to the cruxshim
	// binary for its architecture.
	Shims map[string]string
	// Python is the interpreter's path in the image; "" looks for
	// /usr/local/bin/python3 then /usr/bin/python3 in the base's files.
	Python string
	// NoCompile leaves bytecode out.
	NoCompile bool
	// NoCache neither reads nor writes the store's caches: the layer
	// cache (store.ImageLayersDir), the unpacked-wheel and bytecode caches.
	NoCache bool
	// Epoch is every timestamp of the image (SOURCE_DATE_EPOCH, read by
	// the caller); the zero Time means the Unix epoch. It is at most
	// MaxEpoch.
	Epoch time.Time
	// Key signs the image and its attestations; nil leaves it unsigned.
	Key *sign.PrivateKey
	// BuilderID is the provenance's builder id.
	BuilderID string
	// Tool is cruxprov's version (the provenance and the SBOM record it:
	// deflate's bytes may change with the Go release).
	Tool string
	// Output is an OCI layout directory to write into (created when
	// missing); Push a repository (REPO or REPO:TAG) to push to. At least
	// one.
	Output string
	Push   string
	// Repo is the repository the signature names (docker-reference),
	// as a reference's repository is read (RepoName: acme/echo signs for
	// index.docker.io/acme/echo, as a verifier of docker.io/acme/echo@…
	// reads it); "" means Push's, or localhost/<provider name> for a
	// layout alone.
	// With Push it must be Push's repository (SignedRepo): a verifier
	// of the pushed image holds its signature to where it was pulled.
	Repo string
	// Remote are go-containerregistry options for the base's and Push's
	// registry (auth, transport).
	Remote []remote.Option
	// Jobs bounds parallel downloads and installs.
	Jobs int
	// PlainMalloc: as pipeline.Options.
	PlainMalloc bool
	// Warn receives warnings.
	Warn func(string)
	// LayoutWait, when set, is called once, with Output, when the build
	// has to wait for another writer of its layout (another build into
	// it) before it writes: a command can say why it waits. Builds into
	// one layout take turns (the layout directory's flock); a build waits
	// until ctx ends, a *LayoutWaitError.
	LayoutWait func(dir string)
	// FetchEvents receives the wheel downloads' progress; Progress each
	// step as it starts (stage: base, materialize, layers, cached, sign,
	// write; platform "" for what is not one platform's).
	FetchEvents func(fetch.Event)
	Progress    func(stage, platform string)
}

// Result is what Build made.
type Result struct {
	// Digest is the image's (an index's for several platforms).
	Digest v1.Hash `json:"digest"`
	// MediaType is the OCI manifest or index media type.
	MediaType types.MediaType `json:"media_type"`
	// References say where it was written (oci:DIR@…, REPO@…).
	References []string `json:"references"`
	// Platforms are the per-platform manifests.
	Platforms []PlatformImage `json:"platforms"`
	// Signed is true when signature and attestations were stored.
	Signed bool `json:"signed"`
	// Repo is the repository the signature names.
	Repo string `json:"repo,omitempty"`
	// Timings of the steps.
	Timings Timings `json:"timings"`
}

// Timings measures a build.
type Timings struct {
	// Base is reading the base (manifests, config) and finding its
	// interpreter in its layers.
	Base        time.Duration `json:"base_ns"`
	Materialize time.Duration `json:"materialize_ns"`
	Layers      time.Duration `json:"layers_ns"`
	Write       time.Duration `json:"write_ns"`
	// CachedLayers counts the env layers taken from the store's layer
	// cache (store.ImageLayersDir) instead of being built.
	CachedLayers int `json:"cached_layers"`
}

// PlatformImage is one platform's image.
type PlatformImage struct {
	Platform        string            `json:"platform"`
	OS              string            `json:"os"`
	Architecture    string            `json:"architecture"`
	Digest          v1.Hash           `json:"digest"`
	Base            string            `json:"base"`
	BaseDigest      v1.Hash           `json:"base_digest"`
	Interpreter     Interpreter       `json:"interpreter"`
	Resolution      digest.Digest     `json:"resolution"`
	Materialization digest.Digest     `json:"materialization"`
	Tree            digest.Digest     `json:"tree"`
	Implementations map[string]string `json:"implementations"`
	Size            int64             `json:"size"` // compressed bytes of the layers cruxprov added

	img  v1.Image
	prov []byte
	sbom []byte
}

// Build materializes the provider's env for every platform with the
// pipeline (laid out at EnvPath for the base's interpreter), writes its
// layers reproducibly, assembles the image (or index) on the pinned base,
// signs it with its provenance and SBOM when Key is set, and writes it to
// Output and/or pushes it to Push.
//
// The host must have a CPython at the image interpreter's real path, of
// the same X.Y: it lays out the venv (whose bin/python links to that
// path) and compiles the bytecode; the provenance names it. Otherwise
// interpreter_mismatch. Refusals: runtime_missing (the lock resolves no
// runtime for a platform: refused before the base is read or anything
// is written or pushed), base_image_unpinned, image_digest_mismatch
// (a base blob that does not hash to its name), interpreter_mismatch,
// platform_unsupported, fetch_failed (a push the registry did not take:
// not reached, credentials refused, its own failure), and the pipeline's.
func Build(ctx context.Context, st *store.Store, o Options) (*Result, error) {
	if len(o.Platforms) == 0 {
		return nil, errors.New("no platform")
	}
	if !o.Epoch.IsZero() && (o.Epoch.Unix() < 0 || o.Epoch.Unix() > MaxEpoch) {
		return nil, fmt.Errorf("SOURCE_DATE_EPOCH %d is outside what a layer's tar headers hold (0 to %d)", o.Epoch.Unix(), MaxEpoch)
	}
	if o.Output == "" && o.Push == "" {
		return nil, errors.New("neither an output layout nor a repository to push to")
	}
	// Before anything is built: a directory of other files is not
	// written into (it was, the layout among them).
	if o.Output != "" {
		if err := CheckOutput(o.Output); err != nil {
			return nil, err
		}
	}
	// SLSA provenance v1's runDetails.builder.id is a URI: a provenance
	// naming anything else is one in-toto's validators reject.
	if err := CheckTypeURI(o.BuilderID); err != nil {
		return nil, fmt.Errorf("the builder id: %w", err)
	}
	if warn := o.Warn; warn != nil {
		// A platform's plan (for the layer cache) and its run resolve
		// the same lock: say each warning once.
		var mu sync.Mutex
		said := map[string]bool{}
		o.Warn = func(s string) {
			mu.Lock()
			first := !said[s]
			said[s] = true
			mu.Unlock()
			if first {
				warn(s)
			}
		}
	}
	ref, err := ParseRef(o.Base)
	if err != nil {
		return nil, err
	}
	if o.Root == nil {
		return nil, errors.New("no root wheel")
	}
	// Before the base is read, or anything written or pushed: an image
	// without the runtime is one every run refuses.
	if err := requireRuntime(ctx, st, o); err != nil {
		return nil, err
	}
	m, manifestRaw, lockRaw := o.Root.Manifest, o.Root.ManifestData, o.Root.LockData
	repo := o.Repo
	var (
		push    *name.Repository
		pushTag string
	)
	if o.Push != "" {
		r, tag, err := ParsePush(o.Push)
		if err != nil {
			return nil, err
		}
		push, pushTag = &r, tag
		if repo, err = SignedRepo(r, repo); err != nil {
			return nil, err
		}
	}
	if push == nil && repo != "" {
		// As a verifier reads it from a reference (acme/echo is
		// index.docker.io/acme/echo): signed as typed, it was refused
		// by a verifier of docker.io/acme/echo@DIGEST.
		if repo, err = RepoName(repo); err != nil {
			return nil, err
		}
	}
	if repo == "" {
		repo = "localhost/" + m.Name
	}
	// The store lock, shared, for the whole build: a gc waits rather than
	// remove a cached layer or a wheel the build is using.
	unlock, err := st.LockShared(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// What a killed build left (its staging, a half-compressed layer in
	// it): a build whose env layer comes from the cache runs no fetch,
	// which cleans it otherwise.
	if _, err := st.CleanStaging(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted: %w", ctx.Err())
		}
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot clean the staging of the store %s", st.Home())
	}
	stg, err := st.Stage("image")
	if err != nil {
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot stage the image")
	}
	defer func() {
		makeWritable(stg.Path)
		stg.Release()
	}()
	if o.Progress == nil {
		o.Progress = func(string, string) {}
	}
	res := &Result{Repo: repo}
	seen := map[string]string{}
	for i, pid := range o.Platforms {
		pi, err := buildOne(ctx, st, o, ref, pid, filepath.Join(stg.Path, strconv.Itoa(i)), m, manifestRaw, lockRaw, &res.Timings)
		if err != nil {
			return nil, err
		}
		if other, ok := seen[pi.OS+"/"+pi.Architecture]; ok {
			return nil, refusal.New(refusal.PlatformUnsupported, "%s and %s are both %s/%s: an image index holds one image per os/arch", other, pid, pi.OS, pi.Architecture)
		}
		seen[pi.OS+"/"+pi.Architecture] = pid
		res.Platforms = append(res.Platforms, *pi)
	}
	var top any
	if len(res.Platforms) == 1 {
		top = res.Platforms[0].img
		res.MediaType = types.OCIManifestSchema1
		res.Digest = res.Platforms[0].Digest
	} else {
		var adds []mutate.IndexAddendum
		for _, p := range res.Platforms {
			adds = append(adds, mutate.IndexAddendum{Add: plainDescribed{p.img}, Descriptor: v1.Descriptor{
				MediaType: types.OCIManifestSchema1,
				Platform:  &v1.Platform{OS: p.OS, Architecture: p.Architecture},
			}})
		}
		ix := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
		if res.Digest, err = ix.Digest(); err != nil {
			return nil, err
		}
		top = ix
		res.MediaType = types.OCIImageIndex
	}
	// Nothing is written outside the store's staging before this point: a
	// signal that came while the layers were built stops here.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted; no image was written: %w", err)
	}
	var extra []tagged
	if o.Key != nil {
		o.Progress("sign", "")
		if extra, err = signAll(o.Key, repo, res); err != nil {
			return nil, err
		}
		res.Signed = true
	}
	start := time.Now()
	o.Progress("write", "")
	if o.Output != "" {
		if err := writeLayout(ctx, o.Output, top, res.Digest, layoutTag(pushTag, res.Platforms[0].Resolution, m.Name), extra, o.LayoutWait); err != nil {
			if we := (*LayoutWaitError)(nil); errors.As(err, &we) {
				return nil, err
			}
			return nil, layoutWriteFailed(o.Output, err)
		}
		res.References = append(res.References, LayoutPrefix+o.Output+"@"+res.Digest.String())
	}
	if push != nil {
		var pub *sign.PublicKey
		if o.Key != nil {
			pub = o.Key.Public()
		}
		if err := pushAll(ctx, *push, pushTag, top, res.Digest, extra, pub, withStall(o.Remote)); err != nil {
			if ctx.Err() != nil {
				return nil, &PushInterruptedError{Repo: push.String(), Layout: o.Output, Signed: o.Key != nil, Err: err}
			}
			err = pushFailed(*push, err)
			if re := (*refusal.Error)(nil); o.Output != "" && errors.As(err, &re) && re.Code == refusal.PushFailed {
				// "A failed push does not move the image's tag" is the registry's: the
				// layout took the image, tag and signature first.
				re.Detail += "; " + inLayout(o.Output, o.Key != nil)
			}
			return nil, err
		}
		res.References = append(res.References, push.Name()+"@"+res.Digest.String())
	}
	res.Timings.Write = time.Since(start)
	return res, nil
}

// requireRuntime refuses runtime_missing the build of a provider whose
// lock resolves no runtime for one of o's platforms
// (pipeline.RequireRuntime): its image's env would have no harness
// module, and every run of it is refused so, from the image's signed
// provenance, before podman starts (pinned/container; DESIGN §10). It was
// built, signed, written and pushed, an image that could never run. A
// platform no image is built for is refused first, as buildOne refuses it
// (platform_unsupported), before any lock is resolved.
func requireRuntime(ctx context.Context, st *store.Store, o Options) error {
	for _, pid := range o.Platforms {
		plat, err := platform.Lookup(pid)
		if err != nil {
			return err
		}
		if _, _, err := archOf(plat); err != nil {
			return err
		}
	}
	rs, err := pipeline.ResolveEach(ctx, st, o.Root, "", o.Platforms)
	if err != nil {
		return err
	}
	err = pipeline.RequireRuntime(rs)
	if re := (*refusal.Error)(nil); errors.As(err, &re) && re.Code == refusal.RuntimeMissing {
		re.Detail += ", then build the image of the new wheel; nothing was built"
	}
	return err
}

// layoutWriteFailed is the failure of writing the layout out: the host's
// (exit 1, as a full store is: neither the image nor its inputs are at
// fault), saying what to do where the disk is full or this user may not
// write there. Denied, it said only "cannot write the layout DIR: mkdir
// DIR: permission denied". A refusal (the layout's index.json, which the
// write would rewrite, saying a key twice) is returned as it is.
func layoutWriteFailed(out string, err error) error {
	switch {
	case refusal.CodeOf(err) != "":
		// The layout's own index.json refused (a key twice): the
		// refusal says what, and what to do.
		return err
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("no space left on the file system of the layout %s (%w): free space there and build again; the layout is as it was", out, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("cannot write the layout %s: permission denied to this user (uid %d) (%w): give a layout directory this user can write, or have the directory's owner let it write there, and build again; the layout is as it was", out, os.Geteuid(), err)
	}
	return fmt.Errorf("cannot write the layout %s: %w", out, err)
}

// SignedRepo is the repository a signature of an image pushed to push
// names, given repo, the one asked for ("" for push's): push's own name,
// as a verifier of push@DIGEST reads it (registry and path, normalized).
// Another repository is an error naming both: the image's signature would
// name a repository it is not in, and every verifier pulling it from push
// (image verify, install and verify of the container backend) refuses it,
// image_signature_invalid, after the push. Before, it was signed for repo
// and pushed to push all the same.
func SignedRepo(push name.Repository, repo string) (string, error) {
	if repo == "" {
		return push.Name(), nil
	}
	if r, err := name.NewRepository(repo); err == nil && r.Name() == push.Name() {
		return push.Name(), nil
	}
	return "", fmt.Errorf("the signature would name the repository %s, and the image is pushed to %s: a signature names the repository the image is pushed to (every verifier of %s@DIGEST refuses one for %s), so name %s or none (it is the push's), or push to %s",
		repo, push.Name(), push.Name(), repo, push.Name(), repo)
}

// RepoName is the repository s names as a reference's repository is read
// (name.NewRepository: acme/echo and docker.io/acme/echo are both
// index.docker.io/acme/echo), the name a signature's docker-reference
// gives and is compared by, so that one repository in any spelling
// compares equal and two never do. s that is no repository is an error
// saying so.
func RepoName(s string) (string, error) {
	r, err := name.NewRepository(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a repository (such as registry.example/acme/echo): %v", s, err)
	}
	return r.Name(), nil
}

// sameRepo reports whether a and b name one repository (RepoName), or,
// either being none, are the same string.
func sameRepo(a, b string) bool {
	na, aerr := RepoName(a)
	nb, berr := RepoName(b)
	if aerr != nil || berr != nil {
		return a == b
	}
	return na == nb
}

// ParsePush parses a push destination (Options.Push), REPO or REPO:TAG, into the repository
// and the tag ("" when none is given: the image is pushed by digest
// only). go-containerregistry decides what is a tag, so a registry's
// port (127.0.0.1:5000/acme/echo) is not taken for one. A digest, or
// anything else that is neither form, is an error that says what is
// expected.
func ParsePush(s string) (name.Repository, string, error) {
	r, rerr := name.NewRepository(s, name.StrictValidation)
	if rerr == nil {
		return r, "", nil
	}
	t, err := name.NewTag(s, name.StrictValidation)
	if err == nil {
		return t.Context(), t.TagStr(), nil
	}
	if part := upperPathPart(s); part != "" {
		// go-containerregistry said "tag must be between 1 and 128
		// characters in length" of registry.example/Acme/echo.
		return name.Repository{}, "", fmt.Errorf("push destination %q: the repository's path component %q has uppercase letters; a repository is lowercase (OCI distribution spec: path components of [a-z0-9]+ joined by '.', '_', '__' or '-'): give %q", s, part, strings.ToLower(part))
	}
	if last := s[strings.LastIndex(s, "/")+1:]; !strings.ContainsAny(last, ":@") {
		// No tag given: the repository's error is the one that says
		// what is wrong, not the empty tag's.
		err = rerr
	}
	return name.Repository{}, "", fmt.Errorf("push destination %q is not REPO or REPO:TAG (e.g. registry.example/acme/echo or registry.example/acme/echo:1.0; the image is always pushed by digest): %v", s, err)
}

// upperPathPart is the first path component of push destination s's
// repository (after its registry, before its tag or digest) with an
// uppercase letter, or "".
func upperPathPart(s string) string {
	repo := s
	if i := strings.IndexByte(repo, '@'); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	parts := strings.Split(repo, "/")
	if len(parts) > 1 && (strings.ContainsAny(parts[0], ".:") || parts[0] == "localhost") {
		parts = parts[1:] // the registry's host, which is not case-sensitive
	}
	for _, p := range parts {
		if strings.ToLower(p) != p && pathComponent.MatchString(strings.ToLower(p)) {
			return p
		}
	}
	return ""
}

// pathComponent is a repository's path component (OCI distribution
// spec): one that only its uppercase letters make wrong is named as such.
var pathComponent = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*$`)

// archOf is the OCI os and architecture of a platform.
func archOf(p *platform.Platform) (string, string, error) {
	if p.Markers["sys_platform"] != "linux" {
		return "", "", refusal.New(refusal.PlatformUnsupported, "%s is not a Linux platform: images are built for Linux", p.ID())
	}
	switch mach := p.Markers["platform_machine"]; mach {
	case "x86_64":
		return "linux", "amd64", nil
	case "aarch64":
		return "linux", "arm64", nil
	default:
		return "", "", refusal.New(refusal.PlatformUnsupported, "%s: no OCI architecture for %q", p.ID(), mach)
	}
}

// shimMachines is the ELF machine of a cruxshim for each OCI architecture.
var shimMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkShimMachine refuses (platform_unsupported) a cruxshim the
// platform's image could not start as its ENTRYPOINT: a file that is not
// an ELF executable (a script, a key, an empty file), one for another
// machine than the platform's, or one linked dynamically (a PT_INTERP
// program header: the loader it names need not be in the base, nor the
// libraries). docs/images.md requires a static build for the
// architecture, which docs/ci.md shows how to make.
func checkShimMachine(shim, pid, arch string) error {
	r, err := capped.Open(shim) // a FIFO named --shim is refused, not waited on
	if err != nil {
		return &pipeline.InputError{What: "cruxshim", Path: shim, Err: err}
	}
	defer r.Close()
	// make's command, not a go build of one's own: docs/ci.md and
	// docs/images.md make every runner's cruxshim the same bytes (other
	// flags give another cruxshim, so another image digest), and the go
	// build named here before left out make build's -buildvcs, tags and
	// ldflags.
	build := fmt.Sprintf("build it static for %s with make build's command: make bin/cruxshim-%s (docs/ci.md)", arch, arch)
	f, err := elfread.Read(r, elfread.Options{})
	if err != nil {
		return refusal.New(refusal.PlatformUnsupported, "the cruxshim %s is not an ELF executable, so the image of %s could not start: give the cruxshim program, %s", shim, pid, build)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return refusal.New(refusal.PlatformUnsupported, "the cruxshim %s is an ELF %s, not an executable: give the cruxshim program, %s", shim, f.Type, build)
	}
	if want, ok := shimMachines[arch]; ok && f.Machine != want {
		return refusal.New(refusal.PlatformUnsupported, "the cruxshim %s is an ELF executable for %s, the platform %s is %s (%s): give the platform a cruxshim built for it: make bin/cruxshim-%s (docs/ci.md)", shim, f.Machine, pid, arch, want, arch)
	}
	if f.Dynamic {
		return refusal.New(refusal.PlatformUnsupported, "the cruxshim %s is linked dynamically (it needs a loader and libraries the image need not have): %s", shim, build)
	}
	return nil
}

func buildOne(ctx context.Context, st *store.Store, o Options, ref Ref, pid, dir string, m *manifest.Manifest, manifestRaw, lockRaw []byte, tm *Timings) (*PlatformImage, error) {
	plat, err := platform.Lookup(pid)
	if err != nil {
		return nil, err
	}
	osName, arch, err := archOf(plat)
	if err != nil {
		return nil, err
	}
	shim := o.Shims[pid]
	if shim == "" {
		shim = o.Shims[""]
	}
	if shim == "" {
		return nil, &pipeline.InputError{What: "cruxshim for", Path: pid, Err: errors.New("is not given: give a static cruxshim built for " + arch + " for this platform")}
	}
	if err := checkShimMachine(shim, pid, arch); err != nil {
		return nil, err
	}
	start := time.Now()
	o.Progress("base", pid)
	b, err := loadBase(ctx, ref, osName, arch, o.Remote)
	if err != nil {
		return nil, err
	}
	want := ""
	if o.Python != "" {
		if want = path.Clean(o.Python); !path.IsAbs(want) {
			return nil, fmt.Errorf("the interpreter path %s is not an absolute path in the image", o.Python)
		}
	}
	in, err := baseInterpreter(st.Home(), b, want)
	if err != nil {
		return nil, err
	}
	tm.Base += time.Since(start)
	if xy(in.Version) != plat.PythonVersion {
		return nil, refusal.New(refusal.InterpreterMismatch, "the base's interpreter %s is Python %s, the platform %s is for %s: %s", in.Path, in.Version, pid, plat.PythonVersion, otherPython(pid, xy(in.Version), plat.PythonVersion))
	}
	if real, err := filepath.EvalSymlinks(in.Path); err != nil || real != in.Path {
		return nil, refusal.New(refusal.InterpreterMismatch, "this host has no CPython at %s (the image's interpreter, real path): the env's venv links there and its bytecode is compiled by it; build on a host with CPython %s at that path (a container of the base, say)", in.Path, xy(in.Version))
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot stage the image")
	}
	epoch := o.Epoch
	if epoch.IsZero() {
		epoch = time.Unix(0, 0)
	}
	epoch = epoch.UTC().Truncate(time.Second)

	start = time.Now()
	po := pipeline.Options{
		Source:   pipeline.Source{Root: o.Root},
		Platform: pid, Python: in.Path, Client: o.Client,
		Tree:      &pipeline.TreeTarget{Out: filepath.Join(dir, "tree"), Final: EnvPath, AnyMachine: true},
		NoCompile: o.NoCompile, NoCache: o.NoCache, Jobs: o.Jobs, Warn: o.Warn, FetchEvents: o.FetchEvents,
		PlainMalloc: o.PlainMalloc,
	}
	var (
		s        *seal.Seal
		envLayer *fileLayer
		cache    layerCache
	)
	if !o.NoCache {
		_, md, err := pipeline.Plan(ctx, st, po)
		if err != nil {
			return nil, err
		}
		cache = newLayerCache(st.Home(), md, epoch)
		if s, envLayer = cache.load(); envLayer != nil {
			tm.CachedLayers++
			o.Progress("cached", pid)
		}
	}
	if envLayer == nil {
		o.Progress("materialize", pid)
		r, err := pipeline.Run(ctx, st, po)
		if err != nil {
			return nil, err
		}
		s = r.Env.Seal
		tm.Materialize += time.Since(start)
		start = time.Now()
		o.Progress("layers", pid)
		envEntries, err := treeEntries(r.Env.Dir, inImage(EnvPath))
		if err != nil {
			return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot list the env")
		}
		if envLayer, err = cache.write(ctx, filepath.Join(dir, "env.tar.gz"), envEntries, epoch, s); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			if se := store.NoSpace(st.Home(), "writing the env layer", err); se != nil {
				return nil, se
			}
			return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot write the env layer")
		}
		tm.Layers += time.Since(start)
	}
	start = time.Now()
	if s.Interpreter.Path != in.Path || xy(s.Interpreter.Version) != xy(in.Version) {
		return nil, refusal.New(refusal.InterpreterMismatch, "the host's interpreter %s %s is not the image's %s %s", s.Interpreter.Path, s.Interpreter.Version, in.Path, in.Version)
	}
	if s.Interpreter.Version != in.Version && o.Warn != nil {
		o.Warn(fmt.Sprintf("the host's %s is %s, the image's is %s: same X.Y, so the bytecode is the same; pyvenv.cfg names %s", in.Path, s.Interpreter.Version, in.Version, s.Interpreter.Version))
	}
	shimEntries := append(parents(inImage(ShimPath)), entry{name: inImage(ShimPath), typeflag: tar.TypeReg, mode: 0o755, src: shim})
	shimLayer, err := writeLayer(ctx, filepath.Join(dir, "shim.tar.gz"), shimEntries, epoch)
	if err != nil {
		// The store's disk full is not the cruxshim's fault: it said
		// "cruxshim PATH: write …/shim.tar.gz: no space left on device",
		// and nothing of what to do.
		if se := store.NoSpace(st.Home(), "writing the cruxshim layer", err); se != nil {
			return nil, se
		}
		return nil, &pipeline.InputError{What: "cruxshim", Path: shim, Err: err}
	}
	shimSum, err := fileDigest(shim)
	if err != nil {
		return nil, &pipeline.InputError{What: "cruxshim", Path: shim, Err: err}
	}
	sealDoc, err := sealContent(s)
	if err != nil {
		return nil, err
	}
	meta := inImage(MetaDir)
	metaEntries := append(parents(meta+"/x"),
		entry{name: meta + "/provider.toml", typeflag: tar.TypeReg, mode: 0o644, data: manifestRaw},
		entry{name: meta + "/pylock.toml", typeflag: tar.TypeReg, mode: 0o644, data: lockRaw},
		entry{name: meta + "/seal.json", typeflag: tar.TypeReg, mode: 0o644, data: sealDoc})
	metaLayer, err := writeLayer(ctx, filepath.Join(dir, "meta.tar.gz"), metaEntries, epoch)
	if err != nil {
		if se := store.NoSpace(st.Home(), "writing the metadata layer", err); se != nil {
			return nil, se
		}
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot write the metadata layer")
	}
	tm.Layers += time.Since(start)

	root := s.Resolution.Root
	if root == nil {
		return nil, refusal.New(refusal.MaterializeFailed, "the env has no root package")
	}
	labels := map[string]string{
		"org.opencontainers.image.title":   m.Name,
		"org.opencontainers.image.version": root.Version,
		"org.opencontainers.image.created": epoch.Format(time.RFC3339),
		LabelBaseName:                      baseName(ref),
		LabelBaseDigest:                    b.digest.String(),
		LabelProvider:                      m.Name,
		LabelVersion:                       root.Version,
		LabelPackage:                       root.SHA256.String(),
		LabelFilename:                      root.Filename,
		LabelResolution:                    s.Resolution.Digest.String(),
		LabelMaterialization:               s.Materialization.Digest.String(),
		LabelTree:                          s.Tree.Digest.String(),
		LabelPlatform:                      pid,
		LabelInterpreter:                   in.Path + " " + in.Version,
	}
	impls := map[string]string{}
	for _, e := range m.Entrypoints {
		d, err := e.ImplementationDigest(root.SHA256)
		if err != nil {
			return nil, err
		}
		impls[e.Name] = d.String()
		labels[LabelImplementation+e.Name] = d.String()
	}
	hist := func(what string) v1.History {
		return v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "cruxprov image build: " + what, Comment: o.Tool}
	}
	img, err := mutate.Append(b.img,
		mutate.Addendum{Layer: envLayer, History: hist("env " + EnvPath), MediaType: types.OCILayer},
		mutate.Addendum{Layer: shimLayer, History: hist("cruxshim " + ShimPath), MediaType: types.OCILayer},
		mutate.Addendum{Layer: metaLayer, History: hist("provider metadata " + MetaDir), MediaType: types.OCILayer})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg := cf.DeepCopy()
	cfg.Created = v1.Time{Time: epoch}
	cfg.Author = ""
	cfg.Container, cfg.DockerVersion = "", ""
	cfg.Config.Entrypoint = []string{ShimPath}
	cfg.Config.Cmd = append([]string(nil), Harness...)
	cfg.Config.User = User
	cfg.Config.WorkingDir = "/"
	if cfg.Config.Labels == nil {
		cfg.Config.Labels = map[string]string{}
	}
	for k, v := range labels {
		cfg.Config.Labels[k] = v
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	img = mutate.Annotations(img, labels).(v1.Image)
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	pi := &PlatformImage{
		Platform: pid, OS: osName, Architecture: arch, Digest: d,
		Base: baseName(ref), BaseDigest: b.digest, Interpreter: *in,
		Resolution: s.Resolution.Digest, Materialization: s.Materialization.Digest, Tree: s.Tree.Digest,
		Implementations: impls, Size: envLayer.size + shimLayer.size + metaLayer.size, img: img,
	}
	// The provenance and the SBOM (signed later, when a key is given).
	var p Provenance
	p.BuildDefinition.BuildType = BuildType
	p.BuildDefinition.ExternalParameters = ExternalParameters{
		Package: *root, Platform: pid, Base: ref.Name() + "@" + ref.Digest.String(), Python: o.Python,
		NoCompile: o.NoCompile, SourceDateEpoch: epoch.Unix(),
	}
	p.BuildDefinition.ExternalParameters.Base = baseName(ref) + "@" + ref.Digest.String()
	p.BuildDefinition.InternalParameters = InternalParameters{
		Resolution: s.Resolution.Digest.String(), Materialization: s.Materialization.Digest.String(),
		Tree: s.Tree.Digest.String(), EnvPath: EnvPath, BaseDigest: b.digest.String(),
		Interpreter: *in, Compiler: stripStats(s.Interpreter),
	}
	deps := []ResourceDescriptor{{Name: "base", URI: baseURI(ref), Digest: map[string]string{b.digest.Algorithm: b.digest.Hex}}}
	wheels := append([]seal.Package{*root}, s.Resolution.Packages...)
	for _, wp := range wheels {
		deps = append(deps, ResourceDescriptor{Name: wp.Filename, URI: pypiPURL(wp), Digest: map[string]string{"sha256": hexOf(wp.SHA256)}})
	}
	deps = append(deps, ResourceDescriptor{Name: "cruxshim", URI: "file://" + ShimPath, Digest: map[string]string{"sha256": hexOf(shimSum)}})
	p.BuildDefinition.ResolvedDependencies = deps
	p.RunDetails.Builder.ID = o.BuilderID
	p.RunDetails.Builder.Version = map[string]string{"cruxprov": o.Tool}
	if pi.prov, err = json.Marshal(p); err != nil {
		return nil, err
	}
	if pi.sbom, err = SBOM(s, o.Tool); err != nil {
		return nil, err
	}
	return pi, nil
}

// scanned memoizes the interpreter found in a base, by the base's
// manifest digest and the --python asked for: the scan reads (and
// rehashes) every layer of the base, and a process that builds several
// images on one base (a test binary, a CI job for several providers)
// need not read it again. The layers written out are rehashed anyway.
var scanned sync.Map // key string → *Interpreter

// baseInterpreter is the interpreter of base b (want, or a candidate),
// remembered in the process and in the store (store.ImageBaseDir: one
// small file per base manifest digest and --python), so that the next
// build on that base does not decompress its layers again (about 2 s for
// a 60 MB Debian base). An entry is a pure function of the base's
// content, named by its digest: the store owner's data, at the trust of
// the probe cache, and always safe to delete.
func baseInterpreter(home string, b *base, want string) (*Interpreter, error) {
	key := b.digest.String() + " " + want
	if in, ok := scanned.Load(key); ok {
		c := *in.(*Interpreter)
		return &c, nil
	}
	file := ""
	if home != "" {
		file = filepath.Join(home, store.ImageBaseDir, b.digest.Hex+"-"+hexOf(digest.Sum([]byte(want)))[:16]+".json")
		if raw, err := os.ReadFile(file); err == nil {
			var in Interpreter
			if json.Unmarshal(raw, &in) == nil && path.IsAbs(in.Path) && in.Version != "" {
				scanned.Store(key, &in)
				c := in
				return &c, nil
			}
		}
	}
	files, err := scanFS(b.img, want)
	if err != nil {
		return nil, baseErr(b.ref, err)
	}
	in, err := findInterpreter(files, want)
	if err != nil {
		return nil, err
	}
	c := *in
	scanned.Store(key, &c)
	if file != "" {
		// Best effort: a cache that cannot be written is only slower next time.
		if raw, err := json.Marshal(in); err == nil && os.MkdirAll(filepath.Dir(file), 0o755) == nil {
			_ = atomicfile.WriteFile(file, raw, 0o644)
		}
	}
	return in, nil
}

// plainDescribed is an image whose descriptor in an index is its media
// type, size and digest alone (the index adds its platform): without the
// artifactType go-containerregistry sets from the config's media type,
// which OCI makes optional for an image and which Debian bookworm's
// skopeo (1.9) drops when it reads an index, so it would not copy the
// image index of a build with its digest: `skopeo copy --all
// --preserve-digests` from the layout, the way a later CI step copies
// it, failed "Manifest list must be converted", and without
// --preserve-digests it wrote another index, whose signature was the
// build's no more.
type plainDescribed struct{ v1.Image }

func (p plainDescribed) Descriptor() (*v1.Descriptor, error) {
	mt, err := p.MediaType()
	if err != nil {
		return nil, err
	}
	size, err := p.Size()
	if err != nil {
		return nil, err
	}
	d, err := p.Digest()
	if err != nil {
		return nil, err
	}
	return &v1.Descriptor{MediaType: mt, Size: size, Digest: d}, nil
}

// layoutTag is the image's ref name in a layout: the --push tag, else
// the provider's name (a rebuild replaces the older image of that name).
func layoutTag(pushTag string, _ digest.Digest, provider string) string {
	if pushTag != "" {
		return pushTag
	}
	return provider
}

// baseName is the base's name as labels and the provenance give it: the
// repository, or oci:<the layout directory's base name> (a local path
// would make the digest depend on where the layout is).
func baseName(r Ref) string {
	if r.Repo == nil {
		return LayoutPrefix + filepath.Base(r.Layout)
	}
	return r.Repo.Name()
}

// baseURI is the provenance's URI of the base r: oci://REGISTRY/REPOSITORY
// for a registry's (the registry lowercase, as a ResourceURI's authority
// must be), none for a layout's, which is a directory of this host and no
// URI names it (its name and digest identify it; "oci://oci:DIR" was no
// URI at all).
func baseURI(r Ref) string {
	if r.Repo == nil {
		return ""
	}
	return "oci://" + strings.ToLower(r.Repo.RegistryStr()) + "/" + r.Repo.RepositoryStr()
}

func xy(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// otherPython says what to do when the base's interpreter is Python have
// and the platform pid is for want: build for have's platform (named,
// where pid with have's cpXY is a preset), or on another base. It said
// only what did not match.
func otherPython(pid, have, want string) string {
	alt := "a platform for Python " + have
	if _, rest, ok := strings.Cut(pid, "-"); ok {
		if id := "cp" + strings.ReplaceAll(have, ".", "") + "-" + rest; id != pid {
			if _, err := platform.Lookup(id); err == nil {
				alt = id
			}
		}
	}
	return "build for " + alt + ", or on a base whose interpreter is Python " + want + " (or name the path in this base of its Python " + want + ", where it has one)"
}

func hexOf(d digest.Digest) string { return strings.TrimPrefix(d.String(), "sha256:") }

func fileDigest(p string) (digest.Digest, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return digest.Digest{}, err
	}
	return digest.Sum(b), nil
}

func stripStats(in seal.InterpreterIdentity) seal.InterpreterIdentity {
	in.MtimeNS, in.CtimeNS, in.Ino = 0, 0, 0
	if in.LibPython != nil {
		lp := *in.LibPython
		lp.MtimeNS, lp.CtimeNS, lp.Ino = 0, 0, 0
		in.LibPython = &lp
	}
	return in
}

// sealContent is the seal as the image carries it: the document without
// what depends on the building host's file system (the stat index
// reference, the interpreter's and libpython's times and inodes), so
// that the same inputs give the same bytes anywhere.
func sealContent(s *seal.Seal) ([]byte, error) {
	c := *s
	c.Index = seal.StatIndexRef{}
	c.Interpreter = stripStats(s.Interpreter)
	b, err := c.Marshal()
	if err != nil {
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot write the seal")
	}
	return b, nil
}

// makeWritable lifts a frozen tree's read-only directory modes so that
// it can be removed by a user who is not root.
func makeWritable(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
}
