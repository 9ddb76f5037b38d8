package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/install"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/verify/container"
)

func init() {
	register(&cli.Command{
		Name:      "install",
		Usage:     "propose a provider: root wheel → interfaces checked → envs built and sealed → a change-set",
		UsageText: "cruxprov install (WHEEL | NAME==VERSION --sha256 HEX) (--index URL | --offline) (--platform P[,P…] | --backend container --image REF@DIGEST… [--platform P[,P…]]) [--python PATH] [--no-compile] [--no-cache] [--jobs N] [--ca-bundle F]",
		Description: "Reads the provider's manifest, checks every entrypoint's interface against the registry\n" +
			"(interface_unregistered, interface_digest_mismatch), runs the pipeline for each platform — a\n" +
			"sealed local env where the interpreter (--python) runs the platform, the resolution alone\n" +
			"elsewhere (images build it) — and proposes a change-set. Nothing an executor runs changes\n" +
			"until it is approved (cruxprov changeset approve ID --key KEY). --backend container proposes the\n" +
			"images too, each verified under the registry's builder keys: their platforms are installed when\n" +
			"no --platform is given. --ca-bundle F trusts the CAs of F for the index and the images' registries.\n\n" +
			"Example:\n   cruxprov install acme_echo-1.0.0-py3-none-any.whl --platform host --python /usr/bin/python3.11 --index http://127.0.0.1:8080/simple/\n" +
			"   cruxprov install acme-echo==1.0.0 --sha256 <hex> --index https://mirror/simple/ --platform host,cp312-manylinux_2_17_aarch64 --json\n" +
			"   cruxprov install acme-echo==1.0.0 --sha256 <hex> --index https://mirror/simple/ --backend container --image registry.example/acme/echo@sha256:<index digest>\n" +
			"   cruxprov install acme-echo==1.0.0 --sha256 <hex> --index https://mirror/simple/ --backend container --image registry.example/acme/echo@sha256:<index digest> --ca-bundle registry-ca.pem",
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "platform", Usage: "target `PLATFORM`s: preset ids or host, comma-separated or repeated"},
			&cli.StringFlag{Name: "python", Value: "python3", Usage: "the interpreter `PATH` local envs point at"},
			&cli.StringFlag{Name: "sha256", Usage: "the root wheel's sha256 `HEX` (with NAME==VERSION)"},
			&cli.StringFlag{Name: "backend", Value: "local", Usage: "`BACKEND`: local, or container (with --image)"},
			&cli.StringSliceFlag{Name: "image", Usage: "with --backend container: the image `REF@DIGEST` (or oci:DIR@DIGEST) CI built, signed by a trusted builder key; an image index gives every platform's manifest (repeatable)"},
			&cli.BoolFlag{Name: "offline", Usage: "use only wheels already in the store"},
			&cli.BoolFlag{Name: "no-compile", Usage: "do not compile bytecode"},
			&cli.BoolFlag{Name: "no-cache", Usage: "neither read nor write the store's caches: every wheel is inflated from its archive and all bytecode compiled (docs/store.md)"},
			&cli.IntFlag{Name: "jobs", Usage: "parallel `N` for downloads and installs (default: a sensible number)"},
		}, indexFlags()...),
		Action: installAction,
	})
}

// installUsage checks what install's command line says on its own, before
// the registry is opened (openRegistry): the backend and its images; for
// the local backend the platforms and the index, unless the store's
// config.yaml gives them (a container backend's come from its images, and
// its images are checked first); and the root (NAME==VERSION with its
// --sha256, or a WHEEL this user can open). A mistake there is a usage
// error that makes nothing: it made the store at the --home given.
// installAction goes on with what it parsed.
func installUsage(c *cli.Context, o *opts) (installArgs, error) {
	var a installArgs
	switch c.String("backend") {
	case "local":
		if len(c.StringSlice("image")) != 0 {
			return a, usagef("--image needs --backend container")
		}
	case "container":
		if len(c.StringSlice("image")) == 0 {
			return a, usagef("--backend container needs --image REF@DIGEST (an image 'cruxprov image build' made)")
		}
		for _, ref := range c.StringSlice("image") {
			if err := refUsage("--image", ref); err != nil {
				return a, err
			}
		}
	default:
		return a, usagef("--backend %s: want local or container", c.String("backend"))
	}
	var err error
	if a.platforms, err = splitPlatforms(c.StringSlice("platform")); err != nil {
		return a, err
	}
	if c.String("backend") == "local" {
		// config.yaml is read as applyConfig reads it, after the open;
		// one that cannot be read is said there, not here.
		if cfg, err := loadConfig(o.home); err == nil {
			if len(a.platforms) == 0 && len(cfg.Platforms) == 0 {
				return a, usagef("--platform P[,P…] is required (a preset id, or host)")
			}
			if c.String("index") == "" && cfg.Index == "" && !c.Bool("offline") {
				return a, usagef("--index URL is required: wheels come only from the pinned index (or give --offline)")
			}
		}
	}
	arg := c.Args().First()
	name, version, sum, ok, err := rootPackage(c, arg)
	if err != nil {
		return a, err
	}
	if ok {
		a.named, a.name, a.version, a.sum = true, name, version, sum
		return a, nil
	}
	if h := c.String("sha256"); h != "" {
		if a.sum, err = digest.ParseHex(strings.TrimPrefix(h, "sha256:")); err != nil {
			return a, usagef("--sha256: %v", err)
		}
	}
	f, err := openInput("WHEEL", arg)
	if err != nil {
		return a, err
	}
	return a, f.Close()
}

// unregisteredAtNoStore refuses the install of a WHEEL file where --home
// names no store (nothing there, or a directory of other things), before
// the store is made: a registry with no interface can only refuse every
// provider interface_unregistered, and the install made the whole store
// there first (registry/, blobs/, envs/, …), so that at a mistyped --home
// the commands that only read then found one instead of saying "there is
// no store at DIR" (operator.md §7). The refusal names the wheel's
// interfaces as an install with a store does, says there is no store, and
// advises the registration, which makes the store. A wheel that cannot be
// read is left to the install's own refusal of it.
func unregisteredAtNoStore(ctx context.Context, arg string, args installArgs, o *opts) error {
	if args.named || homeNotDir(o.home) != "" {
		return nil
	}
	none := noStore(o.home)
	if none == nil {
		return nil
	}
	var r *refusal.Error
	if err := install.CheckWheelInterfaces(ctx, registry.NewStub(), arg); !errors.As(err, &r) || r.Code != refusal.InterfaceUnregistered {
		return nil
	}
	// The registration makes the store, the first of several too.
	e := refusal.Wrap(refusal.InterfaceUnregistered, none, "%s (which makes the store)", r.Detail)
	e.Remedy = r.Remedy
	return e
}

// installArgs is what installUsage parsed of install's command line.
type installArgs struct {
	// platforms are --platform's, split at the commas; none given,
	// config.yaml's count (applyConfig), else the images'.
	platforms []string
	// sum is --sha256's digest (zero when none was given).
	sum digest.Digest
	// named is a root given as NAME==VERSION (name and version), not a
	// WHEEL: it is fetched from the index, its bytes sum's.
	named         bool
	name, version string
}

// splitPlatforms is the platforms vals name, each a platform or several
// comma-separated (--platform's form): an empty one is a usage error.
func splitPlatforms(vals []string) ([]string, error) {
	var plats []string
	for _, p := range vals {
		for _, q := range strings.Split(p, ",") {
			if q = strings.TrimSpace(q); q == "" {
				return nil, usagef("empty platform in --platform")
			}
			plats = append(plats, q)
		}
	}
	return plats, nil
}

func installAction(c *cli.Context) error {
	var args installArgs
	o, reg, err := openRegistry(c, 1, func(o *opts) error {
		var err error
		if args, err = installUsage(c, o); err != nil {
			return err
		}
		return unregisteredAtNoStore(c.Context, c.Args().First(), args, o)
	})
	if err != nil {
		return err
	}
	if err := applyConfig(c, o); err != nil {
		return err
	}
	arg := c.Args().First()
	var (
		st   *store.Store
		root *pipeline.RootWheel
	)
	defer func() { root.Close() }()
	// readWheel reads the WHEEL argument into the store, once: the images
	// are checked against, and the change-set proposes, the bytes read.
	readWheel := func(sum digest.Digest) error {
		f, err := openInput("WHEEL", arg)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err = o.openStore(); err != nil {
			return err
		}
		root, err = rootOf(c, st, f, sum)
		return err
	}
	var containers []registry.Materialization
	// The backend and its images were checked before the open
	// (installUsage).
	if c.String("backend") == "container" {
		sum := args.sum
		if sum.IsZero() && strings.HasSuffix(arg, ".whl") {
			if err := readWheel(digest.Digest{}); err != nil {
				return err
			}
			sum = root.Wheel.SHA256
		}
		// The images are read from their registries with --ca-bundle's
		// CAs trusted too, as the index is and image build's pushes
		// are: it was the index's alone, and an image in a registry
		// under that CA was refused "this host does not trust the
		// registry's TLS certificate", with no way to trust it here.
		ro, err := registryRemote(c)
		if err != nil {
			return err
		}
		for _, ref := range c.StringSlice("image") {
			// A layout named by a relative path is pinned by its absolute
			// one: the pin was oci:DIR@… as given, which verify and run
			// resolve against their own working directory, so that
			// anywhere but the installer's the pin was fetch_failed.
			if dir, ok := strings.CutPrefix(ref, image.LayoutPrefix); ok {
				if at := strings.LastIndex(dir, "@"); at > 0 && !filepath.IsAbs(dir[:at]) {
					abs, err := filepath.Abs(dir[:at])
					if err != nil {
						return err
					}
					ref = image.LayoutPrefix + abs + dir[at:]
				}
			}
			ms, _, err := container.Materializations(c.Context, reg, ref, sum, digest.Digest{}, image.VerifyOptions{Remote: ro})
			if err != nil {
				return caBundleRemedy(c, err)
			}
			for _, m := range ms {
				// One image per platform: two made a pin no verify could
				// choose from ("has 2 container materializations").
				if i := slices.IndexFunc(containers, func(x registry.Materialization) bool { return x.Platform == m.Platform }); i >= 0 {
					return usagef("--image %s and --image %s both hold an image for %s: give one image per platform", containers[i].Image, m.Image, m.Platform)
				}
				containers = append(containers, m)
			}
		}
		if len(c.StringSlice("platform")) == 0 {
			for _, m := range containers {
				if err := c.Set("platform", m.Platform); err != nil {
					return err
				}
			}
		}
	}
	plats := args.platforms
	if len(plats) == 0 {
		// None on the command line: config.yaml's, which applyConfig
		// set, or the images' (above), parsed here as --platform's.
		if plats, err = splitPlatforms(c.StringSlice("platform")); err != nil {
			return err
		}
	}
	if len(plats) == 0 {
		return usagef("--platform P[,P…] is required (a preset id, or host)")
	}
	if c.String("index") == "" && !c.Bool("offline") {
		return usagef("--index URL is required: wheels come only from the pinned index (or give --offline)")
	}
	iopts := install.Options{
		Platforms: plats, Python: c.String("python"), NoCompile: c.Bool("no-compile"), NoCache: c.Bool("no-cache"), Jobs: c.Int("jobs"),
		ProposedBy: operator(), Warn: o.warn, Containers: containers, PlainMalloc: hugePagesOff(),
	}
	if !c.Bool("offline") {
		if iopts.Client, err = newIndexClient(c, o, c.String("index")); err != nil {
			return err
		}
	}
	if args.named {
		if st, err = o.openStore(); err != nil {
			return err
		}
		if root, err = pipeline.FetchRoot(c.Context, st, iopts.Client, args.name, args.version, args.sum); err != nil {
			return spaceAdvice(err)
		}
	} else if root == nil {
		if err := readWheel(args.sum); err != nil {
			return err
		}
	}
	iopts.Root = root
	// Its downloads as fetch and env create show them: bars on a terminal
	// (one platform's after another's), and each retry and damaged blob
	// (index.md: every retry is shown). It drew none, and an install over
	// a slow mirror said nothing on a terminal until it ended.
	var bars *progress
	if o.progressOn() {
		bars = newProgress(c, o)
	}
	iopts.FetchEvents = fetchEvents(o, bars)
	res, err := install.Install(c.Context, st, reg, iopts)
	if bars != nil {
		bars.wait(err == nil)
	}
	if err != nil {
		return spaceAdvice(err)
	}
	// Install run again with nothing changed proposes an update that
	// changes nothing: say what approving it is for.
	same := false
	if pin, err := reg.Pin(c.Context, res.Provider.Name); err == nil && !pin.Retired && res.ChangeSet.Spec.Changes[0].Action == registry.ActionUpdate {
		same = planChanges(registry.Diff(pin, res.ChangeSet)) == 0
		// An update names every materialization the pin is to have:
		// one the accepted pin has and this install did not build (an
		// image not given again, a platform left out) is dropped, and
		// only the diff showed it.
		if gone := droppedMaterializations(pin.ProviderSpec(), res.Provider); len(gone) > 0 {
			o.warn(fmt.Sprintf("this change-set drops what %s's accepted pin (revision %d) runs on: %s; approved, no verify or run finds them again. To keep them, install again naming every --backend, --image and --platform the pin has (cruxprov provider show %s%s), or reject this change-set",
				res.Provider.Name, pin.Revision, strings.Join(gone, ", "), res.Provider.Name, o.homeFlag()))
		}
	}
	// The notes the text prints after the change-set, one line each; the
	// --json document carries them as "notes" ([] when none: it carried
	// none, and a pipeline never saw the renewal advice).
	notes := []string{}
	if same {
		notes = append(notes, fmt.Sprintf("it changes nothing in %s's accepted pin (revision %d): %s", res.Provider.Name, res.ChangeSet.Spec.Revision-1, noChangeNote(c.Context, o, reg, res.Provider.Name, res.ChangeSet.Metadata.ID)))
	}
	doc := struct {
		*install.Result
		Notes []string `json:"notes"`
	}{res, notes}
	return o.emit(schemaName("install"), doc, func(w io.Writer) {
		p := res.Provider
		if !o.quiet {
			fmt.Fprintf(w, "provider %s %s (%s)\n", p.Name, p.Package.Version, p.Package.SHA256)
			for _, m := range p.Materializations {
				if m.Backend == registry.BackendContainer {
					fmt.Fprintf(w, "  %-34s image %s\n", m.Platform, m.Image)
				} else if env, ok := res.Envs[m.Platform]; ok {
					fmt.Fprintf(w, "  %-34s env %s\n", m.Platform, env)
				} else {
					fmt.Fprintf(w, "  %-34s resolution %s (no interpreter here: images build it)\n", m.Platform, m.Digest)
				}
			}
			cs := res.ChangeSet
			if res.Already {
				// The same install run again: the registry holds this
				// very change-set open already and recorded nothing. It
				// said "proposed change-set …" as if it were new.
				fmt.Fprintf(w, "proposed already: change-set %s (revision %d, proposed at %s): nothing changed; review it with: cruxprov changeset diff %s%s\n", cs.Metadata.ID, cs.Spec.Revision, cs.Metadata.ProposedAt.UTC().Format(time.RFC3339), cs.Metadata.ID.Hex()[:12], o.homeFlag())
			} else {
				fmt.Fprintf(w, "proposed change-set %s (revision %d); review it with: cruxprov changeset diff %s%s\n", cs.Metadata.ID, cs.Spec.Revision, cs.Metadata.ID.Hex()[:12], o.homeFlag())
			}
			for _, n := range notes {
				fmt.Fprintln(w, n)
			}
			return
		}
		fmt.Fprintln(w, res.ChangeSet.Metadata.ID)
	})
}

// droppedMaterializations names the materializations a run can use
// (local and container: a resolution alone runs nothing) of old that
// next has none for, by backend and platform, and a container's image.
func droppedMaterializations(old, next *registry.Provider) []string {
	if old == nil || next == nil {
		return nil
	}
	have := map[string]bool{}
	for _, m := range next.Materializations {
		have[m.Backend+" "+m.Platform] = true
	}
	var gone []string
	for _, m := range old.Materializations {
		if m.Backend == registry.BackendResolution || have[m.Backend+" "+m.Platform] {
			continue
		}
		what := m.Backend + " " + m.Platform
		if m.Image != "" {
			what += " (image " + m.Image + ")"
		}
		gone = append(gone, what)
	}
	return gone
}
