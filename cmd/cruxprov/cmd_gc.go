package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/materialize"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/store"
)

func init() {
	register(&cli.Command{
		Name:      "gc",
		Usage:     "remove store blobs nothing references, and staging debris",
		UsageText: "cruxprov gc [--dry-run] [--wait] [--envs]",
		Description: "Keeps every blob a sealed env (envs/*.seal.json), an accepted pin or an open change-set\n" +
			"names (asked of the registry), removes the rest and what crashed runs left in staging.\n" +
			"--envs also removes the sealed envs no accepted pin or open change-set names (and then\n" +
			"their wheels). It runs only when no other process holds the store (unless --wait).\n" +
			"See docs/store.md.\n\n" +
			"Example:\n   cruxprov gc --dry-run\n   cruxprov gc --json",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be removed, remove nothing"},
			&cli.BoolFlag{Name: "wait", Usage: "wait for other processes to release the store instead of failing"},
			&cli.BoolFlag{Name: "envs", Usage: "also remove sealed envs no accepted pin or open change-set names"},
		},
		Action: gcAction,
	})
}

// spaceAdvice adds to a full-disk failure (a *store.SpaceError: exit 1,
// not a refusal) the command that frees the store's space: sealed envs
// are what fill it, and plain gc would remove only the blobs nothing
// names (those this command fetched among them), not the envs.
func spaceAdvice(err error) error {
	var se *store.SpaceError
	if errors.As(err, &se) {
		return fmt.Errorf("%w; cruxprov gc --envs --dry-run --home %s lists the envs no accepted pin or open change-set names and the blobs nothing names, which cruxprov gc --envs removes", err, shellQuote(se.Home))
	}
	return err
}

func gcAction(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() > 0 {
		return usagef("gc takes no arguments (got %q)", c.Args().First())
	}
	// A --home that names nothing is a typo more likely than a store
	// to make: gc says so rather than make one to collect nothing, and
	// gc --dry-run writes nothing (docs/operator.md §7).
	if err := noStore(o.home); err != nil {
		return err
	}
	dry := c.Bool("dry-run")
	var st *store.Store
	if dry {
		if st, err = store.OpenExisting(o.home); err != nil {
			return fmt.Errorf("cannot use %s as the store: %w; give --home (or CRUXPROV_HOME) the store's directory", o.home, err)
		}
		o.sayWaits(st)
	} else if st, err = o.openStore(); err != nil {
		return err
	}
	gco := store.GCOptions{DryRun: dry, Wait: c.Bool("wait")}
	// A user who may not write the store does not wait for it: waiting,
	// gc holds the store's gate, and every run, fetch and install that
	// starts meanwhile waits behind it, for a gc that then fails (an
	// executor's gc --wait held up the operator's runs). It tries once,
	// as gc without --wait does. Its advice names a dry run that waits:
	// one that does not fails the same way while the store is held.
	var cannot string
	if !dry {
		if cannot = notWritable(filepath.Join(o.home, store.BlobsDir)); cannot != "" {
			gco.Wait = false
		}
	}
	// The registry is asked, and unnamed envs removed, only once gc holds
	// the store: an install holds it from building its env until its
	// change-set is proposed, so no env is taken between the two.
	gco.Prepare = func(ctx context.Context) (store.GCPlan, error) {
		names, err := registryNames(ctx, o, dry)
		if err != nil {
			return store.GCPlan{}, err
		}
		plan := store.GCPlan{Keep: names.Blobs}
		if c.Bool("envs") {
			plan.Removed, plan.RemovedBytes, err = removeUnnamedEnvs(ctx, o, st, names, dry)
		}
		return plan, err
	}
	rep, err := st.GC(c.Context, gco)
	if errors.Is(err, store.ErrBusy) && cannot != "" {
		return fmt.Errorf("gc: %w; %s, so gc does not wait for it (waiting, it would hold up the runs, fetches and installs that start meanwhile, to fail once it had the store): run gc as the store's owner (gc --dry-run --wait shows what it would remove, once the processes using the store are done)", err, cannot)
	}
	if errors.Is(err, store.ErrBusy) {
		return fmt.Errorf("gc: %w (or give --wait)", err)
	}
	if errors.Is(err, fs.ErrPermission) {
		if dry {
			// A dry run writes nothing: what it met is a part of the
			// store this user may not read (an operator's umask 077).
			return fmt.Errorf("%w; a dry run reads the whole store, and this user (uid %d) may not read that part of it: run it as the store's owner", err, os.Geteuid())
		}
		return fmt.Errorf("%w; the store is not writable by this user: run gc as its owner", err)
	}
	if errors.Is(err, unix.EROFS) {
		return fmt.Errorf("%w; the store's file system is mounted read-only: remount it read-write to gc it", err)
	}
	if err != nil {
		return err
	}
	return o.emit("cruxprov.gc/v1", rep, func(w io.Writer) {
		verb := "removed"
		if rep.DryRun {
			verb = "would remove"
		}
		damaged := map[string]bool{}
		for _, p := range rep.Damaged {
			damaged[p] = true
		}
		if !o.quiet {
			for _, p := range rep.Removed {
				if damaged[p] {
					fmt.Fprintf(w, "%s %s (damaged: its bytes are not those its name says; fetch it again)\n", verb, p)
					continue
				}
				fmt.Fprintf(w, "%s %s\n", verb, p)
			}
		}
		fmt.Fprintf(w, "%s %s (%s); kept %s (%s) referenced by %s\n",
			verb, count(len(rep.Removed), "entry", "entries"), humanBytes(rep.RemovedBytes), count(rep.KeptBlobs, "blob"), humanBytes(rep.KeptBytes), count(len(rep.Roots), "root"))
	})
}

// registryNames asks the store's registry what accepted pins and open
// change-sets name (nothing when the store has no registry, or one no
// writer ever opened). Read-only (gc --dry-run), it makes nothing; gc
// and env remove, which change the store, open it as any writer does,
// and a user who may not write the store is asked it without a write
// too (OpenDir leaves what it cannot make).
func registryNames(ctx context.Context, o *opts, readOnly bool) (*registry.Names, error) {
	root := filepath.Join(o.home, "registry")
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return &registry.Names{}, nil
	}
	open := registry.OpenDir
	if readOnly {
		open = registry.OpenDirReadOnly
	}
	reg, err := open(ctx, root)
	if err != nil {
		return nil, err
	}
	// A registry whose directories this user could not make (env create
	// leaves registry/ empty; this user cannot write the store) names
	// nothing; one with a history that lost them is refused (Dir.load).
	return registry.NamedBy(ctx, reg)
}

// removeUnnamedEnvs removes (or lists, dry) every env of the store that no
// accepted pin or open change-set names, and says how many bytes their
// files held (the seal and stat index with them).
func removeUnnamedEnvs(ctx context.Context, o *opts, st *store.Store, names *registry.Names, dry bool) ([]string, int64, error) {
	keep := map[string]bool{}
	for _, d := range names.Envs {
		keep[d.Hex()] = true
	}
	// The store's own home, absolute: materialize.Remove refuses a path
	// outside it, and --home as given may be relative ("is not an env of
	// the store" for every env, with --home ./store).
	dir := filepath.Join(st.Home(), store.EnvsDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var (
		out   []string
		total int64
	)
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() || keep[n] {
			continue
		}
		if _, err := digest.ParseHex(n); err != nil {
			continue
		}
		p := filepath.Join(dir, n)
		// A tree without its seal is staging debris, which the store's
		// own gc lists and removes (Store.cleanEnvs): listed here too, a
		// dry run named it twice and counted its bytes twice.
		if _, err := os.Lstat(seal.SealPath(p)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		size := treeBytes(p, seal.SealPath(p), seal.StatIndexPath(p))
		out = append(out, filepath.ToSlash(filepath.Join(store.EnvsDir, n)))
		if !dry {
			if err := materialize.Remove(ctx, st, p); err != nil {
				// A user who may not write the store is gc's failure
				// (exit 1, gcAction's advice), as for a blob it may
				// not remove, not env remove's materialize_failed
				// refusal (exit 78): gc is no install, verify or run.
				var pe *fs.PathError
				if (errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS)) && errors.As(err, &pe) {
					return out, total, fmt.Errorf("cannot remove the env %s: %w", p, pe)
				}
				return out, total, err
			}
		}
		total += size
	}
	return out, total, nil
}

// treeBytes is the size of the regular files under each root (a file
// root counts itself); what cannot be read counts nothing.
func treeBytes(roots ...string) int64 {
	var n int64
	for _, r := range roots {
		n += store.TreeBytes(r)
	}
	return n
}

// notWritable says why this user may not write dir, a directory of the
// store ("" when it may, or when that cannot be told): checked by gc
// --wait and env remove before they wait for the store.
func notWritable(dir string) string {
	err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK, unix.AT_EACCESS)
	switch {
	case errors.Is(err, unix.EROFS):
		return "the store's file system is mounted read-only"
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("the store is not writable by this user (uid %d)", os.Geteuid())
	}
	return ""
}
