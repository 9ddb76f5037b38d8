package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/store"
)

func init() {
	register(&cli.Command{
		Name:      "gc",
		Usage:     "remove store blobs nothing references, and staging debris",
		UsageText: "cruxprov gc [--dry-run] [--wait]",
		Description: "Keeps every blob a sealed env (envs/*.seal.json), an accepted pin or an open change-set\n" +
			"(files under registry/) names, removes the rest and what crashed runs left in staging.\n" +
			"It runs only when no other process holds the store (unless --wait). See docs/store.md.\n\n" +
			"Example:\n   cruxprov gc --dry-run\n   cruxprov gc --json",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be removed, remove nothing"},
			&cli.BoolFlag{Name: "wait", Usage: "wait for other processes to release the store instead of failing"},
		},
		Action: gcAction,
	})
}

// spaceAdvice adds to a full-disk failure (a *store.SpaceError: exit 1,
// not a refusal) the command that frees the store's unused blobs.
func spaceAdvice(err error) error {
	var se *store.SpaceError
	if errors.As(err, &se) {
		return fmt.Errorf("%w; cruxprov gc --home %s removes the blobs nothing uses", err, shellQuote(se.Home))
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
	st, err := o.openStore()
	if err != nil {
		return err
	}
	rep, err := st.GC(c.Context, store.GCOptions{DryRun: c.Bool("dry-run"), Wait: c.Bool("wait")})
	if errors.Is(err, store.ErrBusy) {
		return fmt.Errorf("gc: %w (or give --wait)", err)
	}
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w; the store is not writable by this user: run gc as its owner", err)
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
		fmt.Fprintf(w, "%s %d entries (%s); kept %d blobs (%s) referenced by %d roots\n",
			verb, len(rep.Removed), humanBytes(rep.RemovedBytes), rep.KeptBlobs, humanBytes(rep.KeptBytes), len(rep.Roots))
	})
}
