package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/deniedat"
	"github.com/cruxible/cruxprov/materialize"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/store"
)

func init() {
	register(&cli.Command{
		Name:      "env",
		Usage:     "create, verify, list and remove sealed local environments; their SBOM",
		UsageText: "cruxprov env create|verify|list|remove|sbom …",
		Description: "A local env is a venv built in Go from a resolution's wheels, sealed read-only under\n" +
			"$CRUXPROV_HOME/envs/<materialization digest>, with a seal and a stat index beside it.\n\n" +
			"Example:\n   cruxprov env create --wheel acme_echo-1.0.0-py3-none-any.whl --platform host --index http://127.0.0.1:8080/simple/\n" +
			"   cruxprov env verify ~/.local/share/cruxprov/envs/<hex> --deep",
		Subcommands: []*cli.Command{envCreateCmd(), envVerifyCmd(), envListCmd(), envRemoveCmd(), envSbomCmd()},
	})
}

func envCreateCmd() *cli.Command {
	return &cli.Command{
		Name:      "create",
		Usage:     "resolve, fetch, materialize and seal an env; prints its path and digests",
		UsageText: "cruxprov env create (--wheel W | --lock F | NAME==VERSION --sha256 HEX) --platform P (--index URL | --offline) [--python PATH] [--no-compile] [--no-cache] [--replace] [--jobs N] [--ca-bundle F]\n   cruxprov env create --replace ENV [--index URL]",
		Description: "Resolves the provider's embedded lock (--wheel, the root wheel is installed too) or a\n" +
			"bare lock (--lock) for the platform, fetches every wheel from the pinned index into the\n" +
			"store, installs them into a venv for the interpreter, compiles bytecode (unless\n" +
			"--no-compile), and seals it. An env that exists already is verified and reused.\n" +
			"--replace rebuilds it under the same digest even when it exists (drifted, or its\n" +
			"interpreter updated in place): the old tree is removed only once the new one is sealed.\n" +
			"With an env's path (or digest) instead of --wheel/--lock, it is rebuilt from its own seal,\n" +
			"from the wheels in the store (--index URL fetches any that are missing). One without a\n" +
			"seal is refused seal_missing: name its inputs instead (--replace --wheel W --platform P\n" +
			"--python PATH --offline). NAME==VERSION --sha256 HEX instead of --wheel fetches the root\n" +
			"wheel from the index, only those bytes (as install does): what verify NAME advises for\n" +
			"an env whose seal is missing, the accepted pin's package, platform and interpreter.\n\n" +
			"Example:\n   cruxprov env create --wheel acme_echo-1.0.0-py3-none-any.whl --platform host --index http://127.0.0.1:8080/simple/\n" +
			"   cruxprov env create --lock pylock.toml --platform cp311-manylinux_2_36_x86_64 --python /usr/bin/python3.11 --offline --json\n" +
			"   cruxprov env create --replace ~/.local/share/cruxprov/envs/<hex>\n" +
			"   cruxprov env create --replace acme-echo==1.0.0 --sha256 <hex> --platform cp311-manylinux_2_36_x86_64 --python /usr/bin/python3.11 --index http://127.0.0.1:8080/simple/",
		Flags: append(sourceFlags("the interpreter `PATH` the env points at"),
			&cli.StringFlag{Name: "sha256", Usage: "the root wheel's sha256 `HEX` (with NAME==VERSION)"},
			&cli.BoolFlag{Name: "no-compile", Usage: "do not compile bytecode (another env than one with bytecode)"},
			&cli.BoolFlag{Name: "no-cache", Usage: "neither read nor write the store's caches: every wheel is inflated from its archive and all bytecode compiled (docs/store.md)"},
			&cli.BoolFlag{Name: "replace", Usage: "rebuild the env under its digest even if it exists (the old tree goes once the new one is sealed)"},
			&cli.IntFlag{Name: "jobs", Usage: "at most `N` at once of downloads, installers, the seal's walk and the compile processes (default: 6 downloads, the rest one per CPU)"}),
		Action: envCreate,
	}
}

// envCreated is the output of env create.
type envCreated struct {
	Path          string        `json:"path"`
	Digest        digest.Digest `json:"materialization_digest"`
	TreeDigest    digest.Digest `json:"tree_digest"`
	ContentDigest digest.Digest `json:"seal_content_digest"`
	Reused        bool          `json:"reused"`
	Replaced      bool          `json:"replaced"`
	// SealedAt is where the env found at Path had been sealed, when it
	// was built again because its store was copied or moved there
	// (materialize.Result.SealedAt); an added key of v1.
	SealedAt    string        `json:"sealed_at,omitempty"`
	Platform    string        `json:"platform"`
	Interpreter string        `json:"interpreter"`
	Resolution  digest.Digest `json:"resolution_digest"`
	Packages    int           `json:"packages"`
	Files       int           `json:"files"`
	Bytes       int64         `json:"bytes"`
	Compiled    bool          `json:"compiled"`
	Timings     envTimings    `json:"timings"`
}

// envTimings are materialize's stages plus what the command spent before
// them (reading the root wheel and lock, resolving, checking the store)
// and in all, from the command's start (process start not included).
type envTimings struct {
	materialize.Timings
	Prepare time.Duration `json:"prepare_ns"`
	Total   time.Duration `json:"total_ns"`
}

func envCreate(c *cli.Context) error {
	start := time.Now()
	o, err := globals(c)
	if err != nil {
		return err
	}
	// An env rebuilt from its seal keeps the seal's platform, interpreter
	// and bytecode: config.yaml's defaults for them do not apply, and only
	// the operator's own flags are an error (checked before the config
	// sets them).
	// NAME==VERSION (with --sha256) names the root wheel as install
	// takes it: the index's file of those bytes.
	pkgName, pkgVersion, rootSum, fromPackage, pkgErr := rootPackage(c, c.Args().First())
	fromPackage = fromPackage && c.NArg() == 1
	fromSeal := c.NArg() == 1 && c.Bool("replace") && !fromPackage
	if fromSeal && (c.IsSet("platform") || c.IsSet("python") || c.Bool("no-compile")) {
		return usagef("an env rebuilt from its seal keeps its platform, interpreter and bytecode: drop --platform, --python and --no-compile")
	}
	if err := applyConfig(c, o); err != nil {
		return err
	}
	po := pipeline.Options{
		Platform: c.String("platform"), Python: c.String("python"),
		NoCompile: c.Bool("no-compile"), NoCache: c.Bool("no-cache"), Replace: c.Bool("replace"), Jobs: c.Int("jobs"),
		Warn: o.warn, PlainMalloc: hugePagesOff(),
	}
	if abs, err := filepath.Abs(o.home); err != nil || !utf8.ValidString(abs) {
		return refusal.New(refusal.MaterializeFailed, "the store path %q is not valid UTF-8 and Python cannot start a venv there; give --home a UTF-8 path", abs)
	}
	var wf *os.File // the --wheel, opened
	switch {
	case fromPackage:
		if c.String("wheel") != "" || c.String("lock") != "" {
			return usagef("give NAME==VERSION or --wheel/--lock, not both")
		}
		if pkgErr != nil {
			return pkgErr
		}
		if po.Client, err = pinnedIndex(c, o); err != nil {
			return err
		}
	case c.NArg() == 1 && c.Bool("replace"):
		if c.String("wheel") != "" || c.String("lock") != "" {
			return usagef("give an ENV to rebuild from its seal, or --wheel/--lock, not both")
		}
		if po.Source.Env, err = envArg(o, c.Args().First()); err != nil {
			return err
		}
		if po.Source.Env, err = inStore(o, po.Source.Env, true); err != nil {
			return err
		}
		po.Platform, po.Python = "", ""
		// The wheels a seal names are in the store (its seal keeps them
		// from gc): the store alone, unless --index fetches what is missing.
		if c.String("index") != "" && !c.Bool("offline") {
			if po.Client, err = newIndexClient(c, o, c.String("index")); err != nil {
				return err
			}
		}
	case c.NArg() > 0:
		return usagef("env create takes no arguments but NAME==VERSION or --replace ENV (got %q)", c.Args().First())
	default:
		if c.String("sha256") != "" {
			return usagef("--sha256 goes with NAME==VERSION")
		}
		if po.Client, err = pinnedSource(c, o); err != nil {
			return err
		}
		if po.Source, wf, err = sourceOf(c); err != nil {
			return err
		}
		defer wf.Close()
	}
	if err := notAStoreToMake(o.home); err != nil {
		return err
	}
	st, err := o.openStore()
	if err != nil {
		return err
	}
	if wf != nil {
		if po.Source.Root, err = rootOf(c, st, wf, digest.Digest{}); err != nil {
			return err
		}
		defer po.Source.Root.Close()
	}
	if fromPackage {
		if po.Source.Root, err = pipeline.FetchRoot(c.Context, st, po.Client, pkgName, pkgVersion, rootSum); err != nil {
			return spaceAdvice(err)
		}
		defer po.Source.Root.Close()
	}
	var bars *progress
	if o.progressOn() {
		bars = newProgress(c, o)
	}
	po.FetchEvents = fetchEvents(o, bars)
	res, err := pipeline.Run(c.Context, st, po)
	if bars != nil {
		bars.wait(err == nil)
	}
	if err != nil {
		return spaceAdvice(err)
	}
	r := res.Env
	out := envCreated{
		Path: r.Dir, Digest: r.Digest, TreeDigest: r.TreeDigest, Reused: r.Reused, Replaced: po.Replace, SealedAt: r.SealedAt,
		Platform: res.Platform, Interpreter: res.Interpreter, Resolution: r.Seal.Resolution.Digest,
		Packages: len(r.Seal.Resolution.Packages), Files: r.Seal.Tree.Files, Bytes: r.Seal.Tree.Bytes, Compiled: r.Seal.Env.Compiled,
		Timings: envTimings{Timings: r.Timings, Prepare: res.Prepare, Total: time.Since(start)},
	}
	if out.ContentDigest, err = seal.ContentDigest(r.Seal); err != nil {
		return err
	}
	if res.Root != nil || r.Seal.Materialization.Root != nil {
		out.Packages++
	}
	return o.emit("cruxprov.env.create/v1", out, func(w io.Writer) {
		verb := "created"
		if r.Reused {
			verb = "reused"
		} else if po.Replace {
			verb = "replaced"
		}
		if !o.quiet {
			fmt.Fprintf(w, "%s %s (%s, %s, %s)\n", verb, out.Path, count(out.Packages, "package"), count(out.Files, "file"), out.Platform)
			fmt.Fprintf(w, "materialization_digest %s\ntree_digest %s\nseal_content_digest %s\n", out.Digest, out.TreeDigest, out.ContentDigest)
		} else {
			fmt.Fprintln(w, out.Path)
		}
	})
}

// inputFile reads a file named by flag: a missing or unreadable one is a
// usage error (exit 64), never a refusal that blames its content.
func inputFile(flag, path string, max int64) ([]byte, error) {
	b, err := readInputFile(path, max)
	if err != nil {
		return nil, inputErr(flag, path, err)
	}
	return b, nil
}

// openInput opens a file named by flag, to be read once (a root wheel,
// which rootOf reads): a missing or unreadable one is a usage error (exit
// 64), as inputFile says.
func openInput(flag, path string) (*os.File, error) {
	f, err := openInputFile(path)
	if err != nil {
		return nil, inputErr(flag, path, err)
	}
	return f, nil
}

// rootOf reads the root wheel f (openInput's) into st once: a private
// copy there, hashed (against sum unless it is zero), whose manifest and
// lock the command uses and whose bytes it installs (pipeline.OpenRoot).
// The caller closes f and the RootWheel.
func rootOf(c *cli.Context, st *store.Store, f *os.File, sum digest.Digest) (*pipeline.RootWheel, error) {
	r, err := pipeline.OpenRoot(c.Context, st, f, filepath.Base(f.Name()), sum)
	return r, spaceAdvice(err)
}

// readable checks that the file a flag names exists and can be opened by
// this user: a usage error otherwise (exit 64), before anything blames
// the file's content.
func readable(flag, path string) error {
	// O_NONBLOCK: a FIFO named here must not block the command.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return inputErr(flag, path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return usagef("%s %s: not a regular file", flag, path)
	}
	return nil
}

// inputErr is the usage error of a file named by flag that this user
// cannot open or read: why, and, denied permission, on which path (the
// first directory on the way it may not enter, else the file), whose it
// is and what to do. It said only "--sign-key KEY: permission denied": a
// CI job's secret file mounted for another user (0600, root's) left the
// job nothing to go on.
func inputErr(flag, path string, err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return usagef("%s %s: %v", flag, path, unwrapPath(err))
	}
	d := deniedat.Find(path)
	if d.Own() {
		return usagef("%s %s: permission denied on %s, which is this user's own: give it read access (chmod u+rX %s)", flag, path, d.At, shellQuote(d.At))
	}
	return usagef("%s %s: permission denied to this user (uid %d) on %s%s: have its owner give this user read access (its owner or group made this user's: a key or other secret is for no one else to read), or run as a user who may read it", flag, path, os.Geteuid(), d.At, d.OwnerNote())
}

// unwrapPath drops the path an *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// envArg resolves an env given by path or by its digest (sha256:hex, or
// the bare hex when no file of that name is here) or a prefix of it
// (sha256:PREFIX, or the bare hex prefix when no file of that name is
// here) in the store of o. An env named by its digest is named by its
// absolute path, whatever --home is.
//
// A bare hex that names a file here is that path: in the envs/ of a
// store that is not o's, the name env list shows was taken for a digest
// of o's store, and env verify said ok of, env remove removed, the env
// of that digest in the default store, not the one named.
//
// A digest names an env of the store at o.home; where --home names
// nothing, that is said (noStore), as env list says it: "no env … in
// the store (env list shows them)" sent the user to env list, which then
// said there is no store, and env remove of a full digest made a whole
// store at the mistyped --home and answered "nothing removed", exit 0.
func envArg(o *opts, arg string) (string, error) {
	// Under a relative --home an env named by its digest was named
	// relative to it ("ok rel/envs/…", "env": "rel/envs/…" in --json)
	// where its path, and env create, name it absolute.
	home, err := filepath.Abs(o.home)
	if err != nil {
		return "", usagef("%v", err)
	}
	inHome := func(hex string) (string, error) {
		if err := noStore(o.home); err != nil {
			return "", err
		}
		return filepath.Join(home, store.EnvsDir, hex), nil
	}
	if d, err := digest.Parse(arg); err == nil {
		return inHome(d.Hex())
	}
	if p, ok := strings.CutPrefix(arg, digest.Prefix); ok {
		if err := noStore(o.home); err != nil {
			return "", err
		}
		return envByPrefix(o, home, p)
	}
	// A hex digest, whole or 8 digits or more as env list shows it, when
	// no file of that name is here: the env it names or starts (a short
	// one was taken for a path, and env remove said "nothing removed").
	if len(arg) >= 8 && strings.Trim(arg, "0123456789abcdef") == "" {
		if _, err := os.Lstat(arg); errors.Is(err, fs.ErrNotExist) {
			if d, err := digest.ParseHex(arg); err == nil {
				return inHome(d.Hex())
			}
			if err := noStore(o.home); err != nil {
				return "", err
			}
			return envByPrefix(o, home, arg)
		}
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return "", usagef("%v", err)
	}
	return abs, nil
}

// inStore is the env path env (a link followed when follow, as env
// verify follows it) when it is an env of o's store, and refuses it
// otherwise: a rebuild writes into the store it runs on, so another
// store's env was rebuilt into this one, reported "replaced", and left as
// it was.
func inStore(o *opts, env string, follow bool) (string, error) {
	envs, err := filepath.Abs(filepath.Join(o.home, store.EnvsDir))
	if err != nil {
		return "", usagef("%v", err)
	}
	if env, err = filepath.Abs(env); err != nil { // a digest under a relative --home
		return "", usagef("%v", err)
	}
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return p
	}
	if filepath.Dir(env) == envs {
		return env, nil
	}
	if !follow && real(filepath.Dir(env)) == real(envs) {
		return env, nil
	}
	if r := real(env); follow && filepath.Dir(r) == real(envs) {
		return filepath.Join(envs, filepath.Base(r)), nil
	}
	hint := "give the --home of the store it is in"
	if parent := filepath.Dir(env); filepath.Base(parent) == store.EnvsDir {
		hint = "give its store: --home " + shellQuote(filepath.Dir(parent))
	}
	return "", usagef("%s is not an env of the store %s: %s", env, o.home, hint)
}

// envsUnlisted refuses an env named by a digest prefix when the store's
// envs/ cannot be listed to find it: it was the bare "error: open DIR:
// permission denied", exit 1, nothing said of what to do, where the same
// env named by its path was refused seal_invalid with the chmod that lets
// this user read it. An executor that only reads the store met it (an
// envs/ of 0711 or 0700). Its path or whole digest needs no listing.
func envsUnlisted(dir, p string, err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return refusal.New(refusal.SealInvalid, "cannot list %s to find the env sha256:%s…: %v; give the env's path or its whole digest, which need no listing", dir, p, unwrapPath(err))
	}
	d := deniedat.Find(dir)
	if d.Own() {
		// This user's own envs/ (0700 by its own hand): "have the
		// owner give read access" sent the owner to itself.
		return refusal.New(refusal.SealInvalid, "cannot list %s to find the env sha256:%s…: permission denied on %s, which is this user's own; give the env's path or its whole digest, which need no listing, or give read access back to every user (a store's envs/ is 0755)", dir, p, d.At).WithRemedy(refusal.ActionGrantRead, d.At)
	}
	return refusal.New(refusal.SealInvalid, "cannot list %s to find the env sha256:%s…: permission denied to this user (uid %d) on %s%s; give the env's path or its whole digest, which need no listing, or have the owner give read access to every user (a store's envs/ is 0755)", dir, p, os.Geteuid(), d.At, d.OwnerNote()).WithRemedy(refusal.ActionGrantRead, d.At)
}

// envByPrefix finds the one env of the store whose digest starts with
// the hex prefix p (at least 8 digits), as change-set ids are found, in
// the store at home (o.home made absolute).
func envByPrefix(o *opts, home, p string) (string, error) {
	if len(p) < 8 || strings.Trim(p, "0123456789abcdef") != "" {
		return "", usagef("env digest sha256:%s: give the digest, or at least 8 of its lower-case hex digits", p)
	}
	dir := filepath.Join(home, store.EnvsDir)
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", envsUnlisted(dir, p, err)
	}
	var found []string
	for _, e := range ents {
		if _, err := digest.ParseHex(e.Name()); err == nil && e.IsDir() && strings.HasPrefix(e.Name(), p) {
			found = append(found, filepath.Join(dir, e.Name()))
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", usagef("no env sha256:%s… in the store %s (cruxprov env list shows them)", p, o.home)
	}
	return "", usagef("env digest sha256:%s is ambiguous (%d envs match): give more digits", p, len(found))
}

func envRemoveCmd() *cli.Command {
	return &cli.Command{
		Name:      "remove",
		Usage:     "delete a sealed env (its seal first, then its tree and stat index)",
		UsageText: "cruxprov env remove PATH|DIGEST|sha256:PREFIX",
		Description: "Deletes an env of the store whatever its state (drifted, half-removed). Nothing can\n" +
			"use it afterwards; create it again with env create. A digest prefix (8 hex digits or\n" +
			"more) names the one env it matches. An env an accepted pin or an open change-set names\n" +
			"is not removed (exit 64): retire the provider or reject the change-set first.\n\n" +
			"Example:\n   cruxprov env remove ~/.local/share/cruxprov/envs/<hex>\n   cruxprov env remove sha256:<hex> --json\n   cruxprov env remove sha256:<prefix>",
		Action: func(c *cli.Context) error {
			o, err := globals(c)
			if err != nil {
				return err
			}
			if c.NArg() != 1 {
				return usagef("env remove takes one PATH or DIGEST")
			}
			dir, err := envArg(o, c.Args().First())
			if err != nil {
				return err
			}
			if dir, err = inStore(o, dir, false); err != nil {
				return err
			}
			// Nothing to remove where --home names nothing: openStore
			// would make a store there first.
			if err := noStore(o.home); err != nil {
				return err
			}
			st, err := o.openStore()
			if err != nil {
				return err
			}
			// Held exclusive, as gc holds it: an install holds the store
			// from building its env until its change-set names it, so
			// the registry's answer below stays true until the env is gone.
			unlock, ok, err := st.TryLockExclusive()
			if err != nil {
				return fmt.Errorf("store lock: %w", err)
			}
			if !ok {
				// Not for a user who may not write the store: waiting,
				// it holds the store's gate, and the runs, fetches and
				// installs that start meanwhile wait behind it, for a
				// removal that then fails (gc --wait likewise).
				if why := notWritable(filepath.Join(o.home, store.EnvsDir)); why != "" {
					return fmt.Errorf("cannot remove the env %s: %s, and the store is in use (another process holds it), so env remove does not wait for it, holding up the runs that start meanwhile; remove the env as the store's owner", dir, why)
				}
				// Waiting, it says so (openStore).
				if unlock, err = st.LockExclusive(c.Context); err != nil {
					return err
				}
			}
			defer unlock()
			names, err := registryNames(c.Context, o, false)
			if err != nil {
				return err
			}
			for _, d := range names.Envs {
				if d.Hex() == filepath.Base(dir) {
					return usagef("env %s is named by %s: %s first", dir, envNamers(names, d), envUnnaming(names, d, o.homeFlag()))
				}
			}
			_, errDir := os.Lstat(dir)
			_, errSeal := os.Lstat(seal.SealPath(dir))
			if errors.Is(errDir, fs.ErrNotExist) && errors.Is(errSeal, fs.ErrNotExist) {
				// Already gone (a second remove, a gc): say so, not "removed".
				return o.emit("cruxprov.env.remove/v1", map[string]any{"path": dir, "removed": false}, func(w io.Writer) {
					fmt.Fprintf(w, "no env %s in the store: nothing removed\n", dir)
				})
			}
			if err := materialize.Remove(c.Context, st, dir); err != nil {
				return removeFailed(err)
			}
			return o.emit("cruxprov.env.remove/v1", map[string]any{"path": dir, "removed": true}, func(w io.Writer) {
				fmt.Fprintf(w, "removed %s\n", dir)
			})
		},
	}
}

// removeFailed is env remove's failure: exit 1, as gc --envs's removal
// of an env is (DESIGN §2: refusals are for the pipeline, verify and run
// paths; removing an env is none of them, and materialize_failed means
// building one failed). materialize.Remove refuses materialize_failed,
// so a user who may not write the store was refused (exit 78) by env
// remove and failed (exit 1) by gc --envs, both saying to run as the
// store's owner.
func removeFailed(err error) error {
	var re *refusal.Error
	if !errors.As(err, &re) || re.Code != refusal.MaterializeFailed {
		return err
	}
	return &removeError{msg: re.Message(), err: re.Err}
}

// removeError is a failed env remove: its refusal's words, its cause
// kept for errors.Is, and no code.
type removeError struct {
	msg string
	err error
}

func (e *removeError) Error() string { return e.msg }
func (e *removeError) Unwrap() error { return e.err }

// envNamers says what names the env d: the providers whose accepted pins
// name it and the open change-sets (it said "an accepted pin or an open
// change-set (cruxprov provider list and changeset list show which)",
// and those, without the --home given, listed another store's).
func envNamers(names *registry.Names, d digest.Digest) string {
	var by []string
	for _, p := range names.EnvPins[d] {
		by = append(by, "the accepted pin of "+p)
	}
	for _, id := range names.EnvChangeSets[d] {
		by = append(by, "the open change-set "+id.Hex()[:12])
	}
	if len(by) == 0 {
		return "an accepted pin or an open change-set"
	}
	return strings.Join(by, " and ")
}

// envUnnaming is what makes the env d named by nothing: each command
// that retires a provider naming it or rejects a change-set, with the
// --home given (home, from homeArg).
func envUnnaming(names *registry.Names, d digest.Digest, home string) string {
	var do []string
	for _, p := range names.EnvPins[d] {
		do = append(do, "retire "+p+" (cruxprov provider retire "+shellQuote(p)+home+", and approve that change-set)")
	}
	for _, id := range names.EnvChangeSets[d] {
		do = append(do, "reject "+id.Hex()[:12]+" (cruxprov changeset reject "+id.Hex()[:12]+" --reason TEXT"+home+")")
	}
	if len(do) == 0 {
		return "retire the provider (cruxprov provider retire NAME" + home + ") or reject the change-set"
	}
	return strings.Join(do, ", and ")
}

func envVerifyCmd() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check a sealed env against its seal (fast by default)",
		UsageText: "cruxprov env verify PATH|DIGEST|sha256:PREFIX [--deep] [--explain] [--jobs N]",
		Description: "Fast: the seal, the interpreter, then one lstat per entry against the stat index,\n" +
			"rehashing only what changed. --deep rehashes everything and recomputes the tree digest.\n" +
			"--explain reports every difference instead of the first. The env is its path, or its\n" +
			"digest (or 8 hex digits or more of it) in the store, as env remove and env sbom take it.\n\n" +
			"Example:\n   cruxprov env verify ~/.local/share/cruxprov/envs/<hex>\n   cruxprov env verify sha256:<prefix> --deep --explain --json",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "deep", Usage: "rehash every file and recompute the tree digest"},
			&cli.BoolFlag{Name: "explain", Usage: "report every difference, not only the first"},
			&cli.IntFlag{Name: "jobs", Usage: "parallel hashing and stat threads `N` (default: the CPUs)"},
		},
		Action: envVerify,
	}
}

func envVerify(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() != 1 {
		return usagef("env verify takes one PATH or DIGEST (an env)")
	}
	if c.Int("jobs") < 0 {
		return usagef("--jobs must be positive (or 0, the default)")
	}
	// The env is walked under the store's lock, shared, as a run holds
	// it (holdStore): a gc --envs does not remove it under the walk,
	// which then reported the env missing or tampered with.
	unlock, err := holdStore(c.Context, o)
	if err != nil {
		return err
	}
	defer unlock()
	dir, err := envArg(o, c.Args().First())
	if err != nil {
		return err
	}
	rep, err := seal.Verify(c.Context, dir, seal.Options{Deep: c.Bool("deep"), Explain: c.Bool("explain"), Jobs: c.Int("jobs")})
	if err != nil {
		// The rebuild it may advise takes the index from the store's
		// config.yaml when that names one, as env create would.
		home := o.home // the env's own store when its path shows it
		if parent := filepath.Dir(dir); filepath.Base(parent) == store.EnvsDir {
			home = filepath.Dir(parent)
		}
		if cfg, cerr := loadConfig(home); cerr == nil && cfg.Index != "" {
			indexFromConfig = true
		}
	}
	mode := "fast"
	if c.Bool("deep") {
		mode = "deep"
	}
	if err != nil {
		if c.Bool("explain") && len(rep.Differences) > 0 {
			err = rep.Explained()
			ds := explainDifferences(rep.Differences)
			if !o.json {
				for _, d := range ds {
					fmt.Fprintf(o.stdout, "drift: %s\n", oneLine(d.String()))
				}
				return err
			}
			rep.Differences = ds
			out := struct {
				*seal.Report
				Mode    string         `json:"mode"` // as the ok document's
				OK      bool           `json:"ok"`
				Refused map[string]any `json:"refused"`
			}{rep, mode, false, refusedDoc(err)}
			if jerr := o.emit("cruxprov.env.verify/v1", out, nil); jerr != nil {
				return jerr
			}
			return &reportedError{code: exitRefused, err: err}
		}
		return err
	}
	rep.Differences = explainDifferences(rep.Differences)
	out := struct {
		*seal.Report
		Mode string `json:"mode"`
		OK   bool   `json:"ok"`
	}{rep, mode, true}
	return o.emit("cruxprov.env.verify/v1", out, func(w io.Writer) {
		// The three digests env create prints, in its order: the seal
		// content digest is what a pin and a CI record hold.
		fmt.Fprintf(w, "ok %s (%s: %s, %d rehashed)\nmaterialization_digest %s\ntree_digest %s\nseal_content_digest %s\n", dir, mode, count(rep.Entries, "entry", "entries"), rep.Rehashed, rep.Digest, rep.TreeDigest, rep.ContentDigest)
	})
}

func envListCmd() *cli.Command {
	return &cli.Command{
		Name:        "list",
		Usage:       "list the envs in the store (from their seals; no verification)",
		UsageText:   "cruxprov env list [--json]",
		Description: "Example:\n   cruxprov env list\n   cruxprov env list --json",
		Action:      envList,
	}
}

// envListed is one env in env list.
type envListed struct {
	Path        string        `json:"path"`
	Sealed      bool          `json:"sealed"`
	Digest      digest.Digest `json:"materialization_digest,omitempty"`
	TreeDigest  digest.Digest `json:"tree_digest,omitempty"`
	Platform    string        `json:"platform,omitempty"`
	Interpreter string        `json:"interpreter,omitempty"`
	Root        *seal.Root    `json:"root,omitempty"`
	Packages    int           `json:"packages"`
	Files       int           `json:"files"`
	Problem     string        `json:"problem,omitempty"`
}

func envList(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() > 0 {
		return usagef("env list takes no arguments")
	}
	if err := noStore(o.home); err != nil {
		return err
	}
	// Absolute, as env create prints an env's path (a relative --home
	// gave paths that hold only from where the command ran).
	home, err := filepath.Abs(o.home)
	if err != nil {
		return usagef("--home %s: %v", o.home, err)
	}
	dir := filepath.Join(home, store.EnvsDir)
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot list the envs of the store %s: %w; give --home (or CRUXPROV_HOME) the store's directory", o.home, err)
	}
	list := []envListed{}
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() || strings.HasPrefix(n, ".") {
			continue
		}
		p := filepath.Join(dir, n)
		l := envListed{Path: p}
		s, err := seal.Load(p)
		if err != nil {
			l.Problem = err.Error()
		} else {
			l.Sealed = true
			l.Digest, l.TreeDigest = s.Materialization.Digest, s.Tree.Digest
			l.Platform, l.Interpreter, l.Root = s.Materialization.Platform, s.Interpreter.Path, s.Materialization.Root
			l.Packages, l.Files = len(s.Resolution.Packages), s.Tree.Files
			if l.Root != nil { // installed too, and counted by env create
				l.Packages++
			}
		}
		list = append(list, l)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Path < list[j].Path })
	return o.emit("cruxprov.env.list/v1", struct {
		Envs []envListed `json:"envs"`
	}{list}, func(w io.Writer) {
		// A header, as every other list has (an empty store printed
		// nothing at all).
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ENV\tPLATFORM\tROOT\tPACKAGES\tFILES\tINTERPRETER")
		for _, l := range list {
			if !l.Sealed {
				// Anyone who can write envs/ names such a directory.
				fmt.Fprintf(tw, "%s\tUNSEALED: %s\n", escapeControls(l.Path), oneLine(l.Problem))
				continue
			}
			root := "-"
			if l.Root != nil {
				root = l.Root.Name + "==" + l.Root.Version
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", l.Path, l.Platform, root, l.Packages, l.Files, l.Interpreter)
		}
		tw.Flush()
	})
}

// refusedDoc is the "refused" object of a --json report that carries a
// refusal beside what was found (verify --explain).
func refusedDoc(err error) map[string]any { return refusedDocFor(err, os.Args) }

// refusedDocFor is refusedDoc with its remedy rendered for the command
// line args (the store it names).
func refusedDocFor(err error, args []string) map[string]any {
	ref := map[string]any{"code": refusal.CodeOf(err), "detail": oneLine(messageOf(err))}
	if rem := refusal.RemedyOf(err); rem != nil {
		if rem, cmdline, _ := renderRemedies(rem, args); cmdline != "" {
			ref["remedy"] = remedyJSON(rem, cmdline, args)
		}
	}
	return ref
}

// messageOf is the message of the refusal in err's chain (its detail and
// cause), or err's own text.
func messageOf(err error) string {
	var r *refusal.Error
	if errors.As(err, &r) {
		return r.Message()
	}
	return err.Error()
}

// explainDifferences is ds sorted by path (then change, as the
// refusal's own list: seal.SortDifferences), without the recomputed tree
// digest's own entry: it differs because of the others, and counting it
// would report one difference too many.
func explainDifferences(ds []seal.Difference) []seal.Difference {
	out := make([]seal.Difference, 0, len(ds))
	for _, d := range seal.SortDifferences(ds) {
		if d.Change != seal.TreeDigest || len(ds) == 1 {
			out = append(out, d)
		}
	}
	return out
}
