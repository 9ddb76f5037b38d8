package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/internal/buildinfo"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

func init() {
	register(&cli.Command{
		Name:      "image",
		Usage:     "build, sign and verify sealed provider images (OCI, no daemon)",
		UsageText: "cruxprov image build|verify …",
		Description: "An image is a pinned base plus three layers: the provider's env at " + image.EnvPath + ",\n" +
			"cruxshim at " + image.ShimPath + " (the ENTRYPOINT) and the provider's metadata at " + image.MetaDir + ";\n" +
			"the harness is the CMD. Signed, its signature, SLSA provenance and CycloneDX SBOM are stored\n" +
			"the way cosign stores them (docs/images.md).\n\n" +
			"Example:\n   cruxprov image build --wheel acme_echo-1.0.0-py3-none-any.whl --index http://127.0.0.1:8080/simple/ \\\n" +
			"     --platform cp311-manylinux_2_36_x86_64 --base oci:base@sha256:<hex> --shim bin/cruxshim --output oci:out\n" +
			"   cruxprov image verify registry.example/acme/echo@sha256:<hex> --key builder.pub",
		Subcommands: []*cli.Command{imageBuildCmd(), imageVerifyCmd()},
	})
}

func imageBuildCmd() *cli.Command {
	return &cli.Command{
		Name:  "build",
		Usage: "build the provider's image reproducibly on a base pinned by digest; sign it; write or push it",
		UsageText: "cruxprov image build (--wheel W | NAME==VERSION --sha256 HEX) --index URL [--offline] --platform PLATFORM_ID[,…] --base REF@DIGEST|oci:DIR@DIGEST\n" +
			"     --shim [PLATFORM_ID=]PATH… --output oci:DIR and/or --push REPO[:TAG] [--repo REPO] [--sign-key KEY] [--builder-id ID]\n" +
			"     [--python PATH_IN_IMAGE] [--no-compile] [--no-cache] [--jobs N]",
		Description: "Resolves the provider's lock for each platform, materializes the env laid out at\n" +
			image.EnvPath + " for the base's interpreter (found in its files, or --python), and writes\n" +
			"the layers byte-for-byte reproducibly: every timestamp is SOURCE_DATE_EPOCH (decimal digits;\n" +
			"0 when unset or empty). The host needs a CPython of the same X.Y at the image interpreter's\n" +
			"path (it lays out the venv and compiles the bytecode, neither of which depends on the\n" +
			"machine: an aarch64 image builds on an x86_64 host): interpreter_mismatch otherwise. A base\n" +
			"named by a tag alone is base_image_unpinned. A provider whose lock has no\n" +
			"cruxible-provider-runtime for a platform is runtime_missing, before anything is built (every\n" +
			"run of its image would be refused so). With --sign-key (password from\n" +
			"CRUXPROV_KEY_PASSWORD or a prompt), the image gets a cosign signature and signed SLSA v1\n" +
			"provenance and CycloneDX SBOM attestations (sha256-<hex>.sig / .att tags), which\n" +
			"`cruxprov image verify` checks (cosign is optional: where it is installed, `cosign verify\n" +
			"--key` and `cosign verify-attestation` accept them too). Registry credentials come from\n" +
			"the docker config (~/.docker/config.json, DOCKER_CONFIG).\n\n" +
			"Example:\n   SOURCE_DATE_EPOCH=1700000000 cruxprov image build --wheel acme_echo-1.0.0-py3-none-any.whl \\\n" +
			"     --index http://127.0.0.1:8080/simple/ --platform cp311-manylinux_2_36_x86_64 \\\n" +
			"     --base registry.example/debian@sha256:<hex> --shim bin/cruxshim --push registry.example/acme/echo:1.0 \\\n" +
			"     --sign-key builder.key --builder-id https://ci.example/builder\n" +
			"   cruxprov image build acme-echo==1.0.0 --sha256 <hex> --index https://mirror/simple/ \\\n" +
			"     --platform cp311-manylinux_2_36_x86_64,cp311-manylinux_2_36_aarch64 --base registry.example/debian@sha256:<index hex> \\\n" +
			"     --shim cp311-manylinux_2_36_x86_64=bin/cruxshim-amd64 --shim cp311-manylinux_2_36_aarch64=bin/cruxshim-arm64 --output oci:out",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "wheel", Usage: "the provider's root `WHEEL` (or NAME==VERSION --sha256 HEX)"},
			&cli.StringFlag{Name: "sha256", Usage: "with NAME==VERSION: the root wheel's sha256 `HEX` (only those bytes are built)"},
			&cli.StringSliceFlag{Name: "platform", Usage: "platform preset `ID`s, comma-separated or repeated (one image per os/arch; several make an index)"},
			&cli.BoolFlag{Name: "offline", Usage: "use only wheels already in the store"},
			&cli.StringFlag{Name: "base", Usage: "the base image pinned by digest: `REF@sha256:…` or oci:DIR@sha256:…"},
			&cli.StringSliceFlag{Name: "shim", Usage: "cruxshim for a platform: `[PLATFORM_ID=]PATH` (a static build for its architecture; repeatable)"},
			&cli.StringFlag{Name: "output", Usage: "write into the OCI layout `oci:DIR` (with --push too: the same image both ways)"},
			&cli.StringFlag{Name: "push", Usage: "push to `REPO[:TAG]` (always by digest; the tag too when given)"},
			&cli.StringFlag{Name: "repo", Usage: "the `REPO` the signature names (default: --push's, and with --push only --push's; localhost/<provider> for a layout alone)"},
			&cli.StringFlag{Name: "sign-key", Usage: "a builder's private `KEY` (cruxprov key generate, or cosign generate-key-pair)"},
			&cli.StringFlag{Name: "builder-id", Value: "https://cruxible.dev/cruxprov/local", Usage: "the provenance's builder `ID`, an absolute URI (SLSA's runDetails.builder.id)"},
			&cli.StringFlag{Name: "python", Usage: "the interpreter's `PATH` in the image (default: found in the base's files)"},
			&cli.BoolFlag{Name: "no-compile", Usage: "do not compile bytecode"},
			&cli.BoolFlag{Name: "no-cache", Usage: "build every layer: neither read nor write the store's layer, wheel and bytecode caches (docs/store.md)"},
			&cli.IntFlag{Name: "jobs", Usage: "parallel `N` for downloads and installs (default: a sensible number)"},
		}, indexFlags()...),
		Action: imageBuild,
	}
}

// imageBuilt is the output of image build.
type imageBuilt struct {
	*image.Result
	Total time.Duration `json:"total_ns"`
}

func imageBuild(c *cli.Context) error {
	start := time.Now()
	o, err := globals(c)
	if err != nil {
		return err
	}
	var name, version string
	switch arg := c.Args().First(); {
	case c.NArg() > 1:
		return usagef("image build takes one NAME==VERSION at most (got %q)", c.Args().Slice())
	case c.NArg() == 1:
		var ok bool
		if name, version, ok = strings.Cut(arg, "=="); !ok || name == "" || version == "" {
			return usagef("%q is not NAME==VERSION (or give --wheel W)", arg)
		}
		if c.String("wheel") != "" {
			return usagef("give --wheel W or NAME==VERSION, not both")
		}
		if c.String("sha256") == "" {
			return usagef("NAME==VERSION needs --sha256 HEX: only those bytes are built")
		}
	case c.String("wheel") == "":
		return usagef("--wheel W or NAME==VERSION --sha256 HEX is required")
	case c.String("sha256") != "":
		return usagef("--sha256 goes with NAME==VERSION (the root wheel from the index), not --wheel")
	}
	if len(c.StringSlice("platform")) == 0 {
		return usagef("--platform is required (platform preset ids, comma-separated or repeated)")
	}
	if c.String("base") == "" {
		return usagef("--base REF@sha256:<hex> or oci:DIR@sha256:<hex> is required")
	}
	if err := refUsage("--base", c.String("base")); err != nil {
		return err
	}
	out, hasOut := strings.CutPrefix(c.String("output"), image.LayoutPrefix)
	if c.String("output") != "" && (!hasOut || out == "") {
		return usagef("--output must be oci:DIR")
	}
	if out == "" && c.String("push") == "" {
		return usagef("give --output oci:DIR, --push REPO, or both")
	}
	if out != "" {
		// A directory of other files: the layout was written among them;
		// one this user cannot write or make: it was found once the image
		// was built. The error begins with out: "--output oci:OUT is …".
		if err := image.CheckOutput(out); err != nil {
			return usagef("--output %s%v", image.LayoutPrefix, err)
		}
	}
	if p := c.String("push"); p != "" {
		pr, _, err := image.ParsePush(p)
		if err != nil {
			return usagef("--push: %v", err)
		}
		// The signature names where the image is pushed: signed for
		// --repo and pushed to --push, it was refused by every verifier
		// pulling it from there, after a build and a push that said ok.
		if r := c.String("repo"); r != "" {
			if _, err := image.SignedRepo(pr, r); err != nil {
				return usagef("--repo %s is not the repository of --push %s (%s): the signature names the repository the image is pushed to, and a verifier of %s@DIGEST (image verify, install and verify --backend container) refuses one for %s: drop --repo (it defaults to --push's), or push to %s",
					r, p, pr.Name(), pr.Name(), r, r)
			}
		}
	}
	if r := c.String("repo"); r != "" && c.String("push") == "" {
		if _, err := image.RepoName(r); err != nil {
			return usagef("--repo: %v", err)
		}
	}
	if c.String("index") == "" && !c.Bool("offline") {
		return usagef("--index URL is required: wheels come only from the pinned index (or give --offline)")
	}
	// A path in the image, never the host's: a relative one was taken
	// through the whole base read and then exited 1.
	if p := c.String("python"); p != "" && !path.IsAbs(p) {
		return usagef("--python %s is not an absolute path in the image (such as /usr/bin/python3.11)", p)
	}
	// The provenance's runDetails.builder.id is a URI (SLSA provenance v1);
	// verify and the pin compare it as given.
	if err := image.CheckTypeURI(c.String("builder-id")); err != nil {
		return usagef("--builder-id: %v", err)
	}
	bo := image.Options{
		Base: c.String("base"), Python: c.String("python"), NoCompile: c.Bool("no-compile"), NoCache: c.Bool("no-cache"),
		BuilderID: c.String("builder-id"), Tool: buildinfo.Version + " " + buildinfo.GoVersion(),
		Output: out, Push: c.String("push"), Repo: c.String("repo"), Jobs: c.Int("jobs"), Warn: o.warn,
		PlainMalloc: hugePagesOff(),
		Shims:       map[string]string{},
	}
	// --ca-bundle is trusted by the registry's requests too (the base's,
	// the push's): it was the index's alone, and a push to a registry of
	// that CA failed "certificate signed by unknown authority".
	if bo.Remote, err = registryRemote(c); err != nil {
		return err
	}
	// --platform A,B and --platform A --platform B are the same: one
	// image per platform in an index, as install and lock resolve take
	// them (a second --platform was dropped without a word).
	for _, p := range c.StringSlice("platform") {
		if p = strings.TrimSpace(p); p != "" {
			if slices.Contains(bo.Platforms, p) {
				return usagef("--platform %s is given twice: name each platform once", p)
			}
			bo.Platforms = append(bo.Platforms, p)
		}
	}
	if len(bo.Platforms) == 0 {
		return usagef("--platform is required (platform preset ids, comma-separated or repeated)")
	}
	for _, s := range c.StringSlice("shim") {
		pid, p, ok := strings.Cut(s, "=")
		if !ok {
			pid, p = "", s
		}
		if _, dup := bo.Shims[pid]; dup {
			return usagef("--shim given twice for %q", pid)
		}
		if _, err := os.Stat(p); err != nil {
			return usagef("--shim %s: %v", s, err)
		}
		bo.Shims[pid] = p
	}
	if len(bo.Shims) == 0 {
		return usagef("--shim [PLATFORM_ID=]PATH is required (cruxshim built static for the image's architecture)")
	}
	// A --shim for no platform built would be ignored, and a platform
	// with no cruxshim found out only after the base was read.
	for pid := range bo.Shims {
		if pid != "" && !slices.Contains(bo.Platforms, pid) {
			return usagef("--shim %s=…: %s is not a platform of --platform %s", pid, pid, strings.Join(bo.Platforms, ","))
		}
	}
	if _, all := bo.Shims[""]; !all {
		for _, pid := range bo.Platforms {
			if _, ok := bo.Shims[pid]; !ok {
				return usagef("no cruxshim for %s: give --shim %s=PATH (a static build for its architecture), or --shim PATH for every platform", pid, pid)
			}
		}
	}
	if bo.Epoch, err = sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		return err
	}
	var wf *os.File // the --wheel, opened
	if name == "" {
		if wf, err = openInput("--wheel", c.String("wheel")); err != nil {
			return err
		}
		defer wf.Close()
	}
	if k := c.String("sign-key"); k != "" {
		if bo.Key, err = loadSigner(c.Context, o, "--sign-key", k); err != nil {
			return err
		}
	}
	if u := c.String("index"); u != "" && !c.Bool("offline") {
		if bo.Client, err = newIndexClient(c, o, u); err != nil {
			return err
		}
	}
	var sum digest.Digest
	if name != "" {
		if sum, err = digest.ParseHex(strings.TrimPrefix(c.String("sha256"), "sha256:")); err != nil {
			return usagef("--sha256: %v", err)
		}
	}
	st, err := o.openStore()
	if err != nil {
		return err
	}
	if wf != nil {
		bo.Root, err = rootOf(c, st, wf, digest.Digest{})
	} else {
		bo.Root, err = pipeline.FetchRoot(c.Context, st, bo.Client, name, version, sum)
		err = spaceAdvice(err)
	}
	if err != nil {
		return err
	}
	defer bo.Root.Close()
	var bars *progress
	if o.progressOn() {
		bars = newProgress(c, o)
		bo.Progress = func(stage, pid string) {
			line := map[string]string{"base": "reading the base for", "materialize": "materializing the env for", "layers": "writing the layers for",
				"cached": "the env layer from the store's cache for", "sign": "signing", "write": "writing the image"}[stage]
			fmt.Fprintln(bars.p, strings.TrimSpace(line+" "+pid))
		}
	}
	bo.FetchEvents = fetchEvents(o, bars)
	// Builds into one layout take turns: one that waits says so (on
	// stderr whatever --quiet and --json, as a wait for the store does),
	// rather than seem to hang once it has built.
	bo.LayoutWait = func(dir string) {
		o.line(fmt.Sprintf("waiting for the layout %s: another image build is writing into it; Ctrl-C stops waiting", dir))
	}
	res, err := image.Build(c.Context, st, bo)
	if bars != nil {
		bars.wait(err == nil)
	}
	if err != nil {
		// image build trusts --ca-bundle's CAs for the registry too:
		// the command again with the CA's PEM (ca_bundle), as an
		// index's untrusted certificate advises it.
		return spaceAdvice(caBundleRemedy(c, err))
	}
	if bo.Key == nil {
		o.warn("the image is not signed (no --sign-key): verify and executors will refuse it")
	}
	return o.emit("cruxprov.image.build/v1", imageBuilt{res, time.Since(start)}, func(w io.Writer) {
		if o.quiet {
			fmt.Fprintln(w, res.Digest)
			return
		}
		for _, r := range res.References {
			fmt.Fprintln(w, r)
		}
		for _, p := range res.Platforms {
			fmt.Fprintf(w, "%s %s/%s %s (base %s@%s, %s %s)\n", p.Platform, p.OS, p.Architecture, p.Digest, p.Base, p.BaseDigest, p.Interpreter.Path, p.Interpreter.Version)
		}
		if res.Signed {
			fmt.Fprintf(w, "signed for %s: signature, SLSA provenance and CycloneDX SBOM\n", res.Repo)
		}
	})
}

func imageVerifyCmd() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check an image's digests, signature, provenance and SBOM under a builder key",
		UsageText: "cruxprov image verify REF@DIGEST|oci:DIR@DIGEST --key PUB… [--repo REPO] [--platform ID] [--skip-blobs] [--ca-bundle F]",
		Description: "Rehashes every manifest, config and layer it reads (image_digest_mismatch), requires a\n" +
			"cosign signature under one of the keys whose payload names the digest and the repository\n" +
			"(image_signature_invalid; cosign itself never checks the repository), and a signed SLSA\n" +
			"provenance and CycloneDX SBOM about the digest whose package, resolution and base agree with\n" +
			"the image's labels (provenance_mismatch). An index is checked platform by platform.\n" +
			"--ca-bundle F trusts the CAs of F for a registry under a private CA (a layout reads none).\n" +
			"Registry credentials come from the docker config (~/.docker/config.json, DOCKER_CONFIG).\n\n" +
			"Example:\n   cruxprov image verify 127.0.0.1:5000/acme/echo@sha256:<hex> --key builder.pub\n" +
			"   cruxprov image verify registry.example/acme/echo@sha256:<hex> --key builder.pub --ca-bundle registry-ca.pem\n" +
			"   cruxprov image verify oci:out@sha256:<hex> --key builder.pub --repo registry.example/acme/echo --json",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "key", Usage: "a trusted builder's public `KEY` (PEM; repeatable)"},
			&cli.StringFlag{Name: "repo", Usage: "the `REPO` the signature must name (default: the reference's repository; none for a layout)"},
			&cli.StringFlag{Name: "platform", Usage: "check only this platform `ID` of an index"},
			&cli.BoolFlag{Name: "skip-blobs", Usage: "do not read and rehash the layers (manifests, configs, signatures still are)"},
			&cli.StringFlag{Name: "ca-bundle", Usage: "a PEM `FILE` of CA certificates trusted besides the system pool for the image's registry"},
		},
		Action: imageVerify,
	}
}

func imageVerify(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() != 1 {
		return usagef("image verify takes one REF@DIGEST or oci:DIR@DIGEST")
	}
	if len(c.StringSlice("key")) == 0 {
		return usagef("--key PUB is required (a trusted builder's public key)")
	}
	if err := refUsage("", c.Args().First()); err != nil {
		return err
	}
	if r := c.String("repo"); r != "" {
		if _, err := image.RepoName(r); err != nil {
			return usagef("--repo: %v", err)
		}
	}
	// A layout is read from disk: a bundle given for it would be ignored.
	if strings.HasPrefix(c.Args().First(), image.LayoutPrefix) && c.String("ca-bundle") != "" {
		return usagef("--ca-bundle is for an image in a registry (REF@DIGEST): a layout (oci:DIR@DIGEST) is read from disk, with no network")
	}
	vo := image.VerifyOptions{
		Repo: c.String("repo"), Platform: c.String("platform"), SkipBlobs: c.Bool("skip-blobs"),
	}
	// The registry's requests trust --ca-bundle's CAs (through
	// image.Transport, which keeps the stall and redirect bounds): a CI
	// verifying what it pushed to a registry under a private CA was
	// refused "this host does not trust the registry's TLS certificate",
	// with no way to trust it but the system's trust store.
	if vo.Remote, err = registryRemote(c); err != nil {
		return err
	}
	for _, k := range c.StringSlice("key") {
		b, err := inputFile("--key", k, 1<<20)
		if err != nil {
			return err
		}
		pk, err := sign.ParsePublicKey(b)
		if err != nil {
			why := err.Error()
			var re *refusal.Error
			if errors.As(err, &re) {
				why = re.Detail // a usage error, not a refusal: no code in it
			}
			if blk, _ := pem.Decode(b); blk != nil && strings.Contains(blk.Type, "PRIVATE KEY") {
				return usagef("--key %s is a private key: give the builder's public key (the .pub beside it)", k)
			}
			return usagef("--key %s is not a public key: %s", k, why)
		}
		vo.Keys = append(vo.Keys, pk)
	}
	rep, err := image.Verify(c.Context, c.Args().First(), vo)
	if err != nil {
		// The command again with the CA's PEM (ca_bundle), a bundle
		// given (which did not sign it) replaced.
		return caBundleRemedy(c, err)
	}
	return o.emit("cruxprov.image.verify/v1", rep, func(w io.Writer) {
		if o.quiet {
			return
		}
		fmt.Fprintf(w, "ok %s\n", rep.Reference)
		for _, m := range rep.Manifests {
			p := m.Provenance
			fmt.Fprintf(w, "%s %s signed by %s for %s; provenance: package %s, base %s, builder %s; sbom: yes\n",
				m.Platform, m.Digest, m.Signer, m.SignedRepo, p.BuildDefinition.ExternalParameters.Package.SHA256,
				p.BuildDefinition.InternalParameters.BaseDigest, p.RunDetails.Builder.ID)
		}
	})
}

// sourceDateEpoch is the time SOURCE_DATE_EPOCH's value e names: the
// reproducible-builds.org spec's ASCII decimal integer of seconds since
// 1970, as `date +%s` prints it, nothing else. "" (set but empty) is taken
// as unset: the zero Time, which image.Options reads as the Unix epoch.
// Anything else (a sign, which strconv.ParseInt took, so "+5" and "-0"
// built; a space, an exponent, hex) is a usage error, as is a time past
// what a layer's tar headers hold.
func sourceDateEpoch(e string) (time.Time, error) {
	if e == "" {
		return time.Time{}, nil
	}
	if strings.Trim(e, "0123456789") != "" {
		return time.Time{}, usagef("SOURCE_DATE_EPOCH=%q is not a number of seconds since 1970 in decimal digits (as `date +%%s` prints it); unset it (or set it empty) for 0", e)
	}
	n, err := strconv.ParseInt(e, 10, 64)
	if err != nil || n > image.MaxEpoch {
		return time.Time{}, usagef("SOURCE_DATE_EPOCH=%q is past %d (2242-03-16), the latest time a layer's tar headers hold", e, int64(image.MaxEpoch))
	}
	return time.Unix(n, 0), nil
}

// registryRemote is the go-containerregistry options of a command's
// registry requests (image build's base and push; install's, verify's and
// run's reads of a container image): the docker config's credentials
// (authn.DefaultKeychain), and with --ca-bundle image.Transport trusting
// its CAs besides the system pool, which keeps image's stall, drip and
// redirect bounds (a transport of net/http's own would drop them).
func registryRemote(c *cli.Context) ([]remote.Option, error) {
	ro := []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if c.String("ca-bundle") == "" {
		return ro, nil
	}
	pool, err := caPool(c)
	if err != nil {
		return nil, err
	}
	return append(ro, remote.WithTransport(image.Transport(pool))), nil
}

// caBundleRemedy gives a refusal of a registry whose certificate is
// signed by an authority this host does not trust (image.CertUntrusted)
// the ca_bundle remedy: the command again with --ca-bundle FILE, rendered
// for a command that takes it (the library's advice names no flag). A
// certificate for another name, or expired, gets none: another CA would
// not help. A bundle given, which the command read and which holds no CA
// that signed it, is said to be one (its refusal read as the one without
// a bundle, advising the system's trust store or SSL_CERT_FILE and the
// command again with --ca-bundle FILE: as if the bundle given had been
// left unread). err is returned as it is.
func caBundleRemedy(c *cli.Context, err error) error {
	var (
		re *refusal.Error
		he x509.HostnameError
		ci x509.CertificateInvalidError
	)
	if image.CertUntrusted(err) && !errors.As(err, &he) && !errors.As(err, &ci) && errors.As(err, &re) && re.Remedy == nil {
		re.WithRemedy(refusal.ActionCABundle, "")
		if c.String("ca-bundle") != "" {
			re.Detail += "; the CA bundle given holds no CA that signed it"
		}
	}
	return err
}

// refUsage is nil when ref is an image reference pinned by a digest; one
// that is no reference at all (a layout named without oci:, a registry's
// host left out) is a usage error before anything is read, flag (if any)
// first: it was go-containerregistry's line alone, exit 1. One that names
// no digest stays the refusal ParseRef makes of it (base_image_unpinned).
func refUsage(flag, ref string) error {
	_, err := image.ParseRef(ref)
	var re *image.RefError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re) && flag != "":
		return usagef("%s %v", flag, err)
	case errors.As(err, &re):
		return usagef("%v", err)
	}
	return err
}
