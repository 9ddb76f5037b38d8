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
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/fetch"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/manifest"
	"github.com/cruxible/cruxprov/materialize"
	"github.com/cruxible/cruxprov/materialize/seal"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/wheel"
)

func init() {
	register(&cli.Command{
		Name:      "env",
		Usage:     "create, verify and list sealed local environments",
		UsageText: "cruxprov env create|verify|list …",
		Description: "A local env is a venv built in Go from a resolution's wheels, sealed read-only under\n" +
			"$CRUXPROV_HOME/envs/<materialization digest>, with a seal and a stat index beside it.\n\n" +
			"Example:\n   cruxprov env create --wheel acme_echo-1.0-py3-none-any.whl --platform host --index http://127.0.0.1:8080/simple/\n" +
			"   cruxprov env verify ~/.local/share/cruxprov/envs/<hex> --deep",
		Subcommands: []*cli.Command{envCreateCmd(), envVerifyCmd(), envListCmd()},
	})
}

func envCreateCmd() *cli.Command {
	return &cli.Command{
		Name:      "create",
		Usage:     "resolve, fetch, materialize and seal an env; prints its path and digests",
		UsageText: "cruxprov env create (--wheel W | --lock F) --platform P --index URL [--python PATH] [--offline] [--no-compile] [--no-cache] [--jobs N] [--ca-bundle F]",
		Description: "Resolves the provider's embedded lock (--wheel, the root wheel is installed too) or a\n" +
			"bare lock (--lock) for the platform, fetches every wheel from the pinned index into the\n" +
			"store, installs them into a venv for the interpreter, compiles bytecode (unless\n" +
			"--no-compile), and seals it. An env that exists already is verified and reused.\n\n" +
			"Example:\n   cruxprov env create --wheel acme_echo-1.0-py3-none-any.whl --platform host --index http://127.0.0.1:8080/simple/\n" +
			"   cruxprov env create --lock pylock.toml --platform cp311-manylinux_2_36_x86_64 --python /usr/bin/python3.11 --offline --json",
		Flags: append(sourceFlags("the interpreter `PATH` the env points at"),
			&cli.BoolFlag{Name: "no-compile", Usage: "do not compile bytecode"},
			&cli.BoolFlag{Name: "no-cache", Usage: "neither read nor write the store's caches: every wheel is inflated from its archive and all bytecode compiled (docs/store.md)"},
			&cli.IntFlag{Name: "jobs", Usage: "parallel `N` for downloads and installs (default: a sensible number)"}),
		Action: envCreate,
	}
}

// envCreated is the output of env create.
type envCreated struct {
	Path        string        `json:"path"`
	Digest      digest.Digest `json:"materialization_digest"`
	TreeDigest  digest.Digest `json:"tree_digest"`
	Reused      bool          `json:"reused"`
	Platform    string        `json:"platform"`
	Interpreter string        `json:"interpreter"`
	Resolution  digest.Digest `json:"resolution_digest"`
	Packages    int           `json:"packages"`
	Files       int           `json:"files"`
	Bytes       int64         `json:"bytes"`
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
	if c.NArg() > 0 {
		return usagef("env create takes no arguments (got %q)", c.Args().First())
	}
	wheelPath, lockPath := c.String("wheel"), c.String("lock")
	client, err := pinnedSource(c)
	if err != nil {
		return err
	}
	if abs, err := filepath.Abs(o.home); err != nil || !utf8.ValidString(abs) {
		return refusal.New(refusal.MaterializeFailed, "the store path %q is not valid UTF-8 and Python cannot start a venv there; give --home a UTF-8 path", abs)
	}
	ctx := c.Context
	st, err := o.openStore()
	if err != nil {
		return err
	}
	cache := materialize.ProbeCache{Dir: filepath.Join(o.home, store.EnvsDir, ".interpreters")}
	in, err := cache.Interpreter(ctx, c.String("python"))
	if err != nil {
		return err
	}
	var plat *platform.Platform
	if c.String("platform") == "host" {
		plat, err = cache.Host(ctx, in)
	} else {
		plat, err = platform.Lookup(c.String("platform"))
	}
	if err != nil {
		return err
	}
	var lockBytes []byte
	var root *lockfile.ResolvedWheel
	if wheelPath != "" {
		lockBytes, root, err = envRootWheel(c, st, wheelPath)
	} else {
		lockBytes, err = readLock(lockPath)
	}
	if err != nil {
		return err
	}
	lock, warnings, err := lockfile.Parse(lockBytes)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		if !o.quiet && !o.json {
			fmt.Fprintf(o.stderr, "warning: %v\n", w)
		}
	}
	res, err := lockfile.Resolve(lock, plat, lockfile.Options{})
	if err != nil {
		return err
	}
	fo := fetch.Options{Jobs: c.Int("jobs"), Offline: c.Bool("offline")}
	var bars *progress
	if o.progressOn() {
		bars = newProgress(c, o.stderr)
		fo.Events = bars.event
	}
	_, err = fetch.Fetch(ctx, st, client, res, fo)
	if bars != nil {
		bars.wait(err == nil)
	}
	if err != nil {
		return err
	}
	prepared := time.Now()
	r, err := materialize.Create(ctx, st, materialize.Request{
		Platform: plat, Interpreter: in, Resolution: res, RootWheel: root,
		NoCompile: c.Bool("no-compile"), NoCache: c.Bool("no-cache"), Jobs: c.Int("jobs"),
	})
	if err != nil {
		return err
	}
	out := envCreated{
		Path: r.Dir, Digest: r.Digest, TreeDigest: r.TreeDigest, Reused: r.Reused,
		Platform: plat.ID(), Interpreter: in.Path, Resolution: r.Seal.Resolution.Digest,
		Packages: len(r.Seal.Resolution.Packages), Files: r.Seal.Tree.Files, Bytes: r.Seal.Tree.Bytes,
		Timings: envTimings{Timings: r.Timings, Prepare: prepared.Sub(start), Total: time.Since(start)},
	}
	if root != nil {
		out.Packages++
	}
	return o.emit("cruxprov.env.create/v1", out, func(w io.Writer) {
		verb := "created"
		if r.Reused {
			verb = "reused"
		}
		if !o.quiet {
			fmt.Fprintf(w, "%s %s (%d packages, %d files, %s)\n", verb, out.Path, out.Packages, out.Files, plat.ID())
			fmt.Fprintf(w, "materialization_digest %s\ntree_digest %s\n", out.Digest, out.TreeDigest)
		} else {
			fmt.Fprintln(w, out.Path)
		}
	})
}

// envRootWheel reads the root wheel's lock and puts the wheel in the store.
func envRootWheel(c *cli.Context, st *store.Store, path string) ([]byte, *lockfile.ResolvedWheel, error) {
	b, err := readInputFile(path, 0)
	if err != nil {
		return nil, nil, refusal.Wrap(refusal.WheelInvalid, err, "cannot read the root wheel %s", path)
	}
	sum := digest.Sum(b)
	w, err := wheel.OpenReader(strings.NewReader(string(b)), int64(len(b)), filepath.Base(path))
	if err != nil {
		return nil, nil, err
	}
	lock, err := manifest.LockFromWheel(w)
	if err != nil {
		return nil, nil, err
	}
	if err := st.Put(c.Context, sum, int64(len(b)), strings.NewReader(string(b))); err != nil {
		return nil, nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot store the root wheel")
	}
	fn := w.Filename()
	return lock, &lockfile.ResolvedWheel{Name: fn.Name, Version: w.Metadata().Version, Filename: filepath.Base(path), Size: int64(len(b)), SHA256: sum}, nil
}

func envVerifyCmd() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check a sealed env against its seal (fast by default)",
		UsageText: "cruxprov env verify PATH [--deep] [--explain]",
		Description: "Fast: the seal, the interpreter, then one lstat per entry against the stat index,\n" +
			"rehashing only what changed. --deep rehashes everything and recomputes the tree digest.\n" +
			"--explain reports every difference instead of the first.\n\n" +
			"Example:\n   cruxprov env verify ~/.local/share/cruxprov/envs/<hex>\n   cruxprov env verify ENV --deep --explain --json",
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
		return usagef("env verify takes one PATH (an env directory)")
	}
	if c.Int("jobs") < 0 {
		return usagef("--jobs must be positive (or 0, the default)")
	}
	dir, err := filepath.Abs(c.Args().First())
	if err != nil {
		return usagef("%v", err)
	}
	rep, err := seal.Verify(c.Context, dir, seal.Options{Deep: c.Bool("deep"), Explain: c.Bool("explain"), Jobs: c.Int("jobs")})
	if err != nil {
		if c.Bool("explain") && len(rep.Differences) > 1 {
			if !o.json {
				for _, d := range rep.Differences {
					fmt.Fprintf(o.stdout, "drift: %s\n", d)
				}
			}
			return rep.Explained()
		}
		return err
	}
	mode := "fast"
	if rep.Deep {
		mode = "deep"
	}
	out := struct {
		*seal.Report
		Mode string `json:"mode"`
		OK   bool   `json:"ok"`
	}{rep, mode, true}
	return o.emit("cruxprov.env.verify/v1", out, func(w io.Writer) {
		fmt.Fprintf(w, "ok %s (%s: %d entries, %d rehashed)\nmaterialization_digest %s\ntree_digest %s\n", dir, mode, rep.Entries, rep.Rehashed, rep.Digest, rep.TreeDigest)
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
	dir := filepath.Join(o.home, store.EnvsDir)
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
		for _, l := range list {
			if !l.Sealed {
				fmt.Fprintf(w, "%s  UNSEALED: %s\n", l.Path, l.Problem)
				continue
			}
			root := "-"
			if l.Root != nil {
				root = l.Root.Name + "==" + l.Root.Version
			}
			fmt.Fprintf(w, "%s  %s  %s  %d packages  %d files  %s\n", l.Path, l.Platform, root, l.Packages, l.Files, l.Interpreter)
		}
	})
}
