package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/internal/deniedat"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/verify"
	"github.com/cruxible/cruxprov/verify/container"
)

func init() {
	register(&cli.Command{
		Name:      "verify",
		Usage:     "check a provider's accepted pin against the registry, your floor and the env on disk",
		UsageText: "cruxprov verify NAME [--entrypoint E] [--backend local|container [--ca-bundle F]] [--platform P] [--deep] [--explain] [--state-dir DIR]",
		Description: "What an executor runs before every invocation (docs/executor.md): the accepted pin is present,\n" +
			"signed by trusted approvers up to the threshold, not expired, not below this verifier's floor\n" +
			"(kept in --state-dir); the entrypoint is in it; its protocol range includes ours; the env's\n" +
			"seal names the pinned digest and seal content digest; the env, interpreter, manifest and\n" +
			"lock are unchanged (fast: the stat index; --deep: rehash everything). No network.\n" +
			"--backend container checks the pinned image instead, read from its registry (or layout):\n" +
			"its digest, a builder's signature and its provenance; --ca-bundle F trusts the CAs of F\n" +
			"besides the system pool for that registry (one under a private CA).\n\n" +
			"Example:\n   cruxprov verify acme-echo\n   cruxprov verify acme-echo --entrypoint echo --deep --json\n" +
			"   cruxprov verify acme-echo --backend container --ca-bundle registry-ca.pem",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "entrypoint", Usage: "the `E`ntrypoint that will run (must be pinned)"},
			&cli.StringFlag{Name: "backend", Value: "local", Usage: "`BACKEND`: local, or container: the pinned image's digest, builder signature and provenance"},
			caBundleRegistryFlag,
			&cli.StringFlag{Name: "platform", Usage: "the pinned `PLATFORM` id, or host (when several envs or images are pinned)"},
			&cli.BoolFlag{Name: "deep", Usage: "rehash every file of the env"},
			&cli.BoolFlag{Name: "explain", Usage: "report every difference of the env, not only the first"},
			&cli.StringFlag{Name: "state-dir", Usage: "this verifier's state `DIR` (floors; default $XDG_STATE_HOME/cruxprov or ~/.local/state/cruxprov)"},
			registryIDFlag,
			&cli.IntFlag{Name: "jobs", Usage: "parallel hashing and stat threads `N` (default: the CPUs)"},
		},
		Action: verifyAction,
	})
}

// registryIDFlag pins the registry a verifier expects, so that it does
// not trust a registry rewritten from its first entry on first use.
var registryIDFlag = &cli.StringFlag{Name: "registry-id", EnvVars: []string{"CRUXPROV_REGISTRY_ID"},
	Usage: "the registry `ID` this verifier expects (sha256:…, `cruxprov registry log` prints it): another is registry_corrupt"}

// caBundleRegistryFlag is --ca-bundle of the commands that read a
// container image's registry and no index (verify, run): an executor
// whose registry is under a private CA, as install's and image build's
// --ca-bundle trust it.
var caBundleRegistryFlag = &cli.StringFlag{Name: "ca-bundle",
	Usage: "with --backend container: a PEM `FILE` of CA certificates trusted besides the system pool for the image's registry"}

// registryID is --registry-id (or CRUXPROV_REGISTRY_ID), zero when unset.
func registryID(c *cli.Context) (digest.Digest, error) {
	s := c.String("registry-id")
	if s == "" {
		return digest.Digest{}, nil
	}
	d, err := digest.Parse(s)
	if err != nil {
		return digest.Digest{}, usagef("--registry-id %q: want sha256:<64 hex digits>, as cruxprov registry log prints it", s)
	}
	return d, nil
}

// stateDir is the executor's own state directory (DESIGN §10): --state-dir,
// else $XDG_STATE_HOME/cruxprov, else ~/.local/state/cruxprov.
func stateDir(c *cli.Context) (string, error) {
	if d := c.String("state-dir"); d != "" {
		return filepath.Abs(d)
	}
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "cruxprov"), nil
	}
	h, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(h) { // a relative HOME: floors under the working directory
		return "", usagef("no home directory for the state directory: give --state-dir DIR")
	}
	return filepath.Join(h, ".local", "state", "cruxprov"), nil
}

// readRegistry opens the store's registry for reading, making nothing:
// a store without one has no accepted pin (an executor never creates it).
func readRegistry(c *cli.Context, o *opts, name string) (*registry.Dir, error) {
	root := filepath.Join(o.home, "registry")
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		if err := noStore(o.home); err != nil {
			return nil, refusal.New(refusal.PinUnapproved, "no accepted pin for %s: %v", name, err)
		}
		return nil, refusal.New(refusal.PinUnapproved, "no accepted pin for %s: the store %s has no registry", name, o.home)
	}
	return registry.OpenDirReadOnly(c.Context, root)
}

// noStoreAt says that home names nothing: a typo in --home or
// CRUXPROV_HOME, more likely than a store never made.
func noStoreAt(home string) string {
	return fmt.Sprintf("there is no store at %s; check --home (or CRUXPROV_HOME): it must name the operator's store", home)
}

// noStore is the failure of a command that only reads the store (or gc)
// when --home names nothing, or a directory of other things that holds
// no store: it says so rather than make a store there (gc made the whole
// layout in any directory --home named, the user's own home among them)
// or answer for an empty one. An empty directory may be made a store.
func noStore(home string) error {
	if _, err := os.Stat(home); errors.Is(err, fs.ErrNotExist) {
		return errors.New(noStoreAt(home))
	}
	if at := homeNotDir(home); at != "" {
		return fmt.Errorf("there is no store at %s: %s is a file, not a directory; check --home (or CRUXPROV_HOME): it must name the operator's store", home, at)
	}
	if otherThings(home) {
		return fmt.Errorf("there is no store at %s: the directory holds other things and none of a store's files (.lock, blobs/, envs/, registry/, …); check --home (or CRUXPROV_HOME): it must name the operator's store", home)
	}
	return nil
}

// homeNotDir is the file that stands where home or a directory above it
// must be (--home naming a file: a token, a key), "" when there is none.
// A registry under it was refused registry_corrupt, "cannot read the
// registry directory …: not a directory", advising a restore from a copy.
func homeNotDir(home string) string {
	if _, err := os.Stat(home); err == nil || errors.Is(err, syscall.ENOTDIR) {
		return deniedat.NotDir(home)
	}
	return ""
}

func verifyAction(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() != 1 {
		return usagef("verify takes one provider NAME")
	}
	if b := c.String("backend"); b != "local" && b != "container" {
		return usagef("--backend %s: want local or container", b)
	}
	if c.String("backend") == "local" && c.String("ca-bundle") != "" {
		return usagef("--ca-bundle is for --backend container (the pinned image's registry): a local env is verified on disk, with no network")
	}
	sd, err := stateDir(c)
	if err != nil {
		return err
	}
	rid, err := registryID(c)
	if err != nil {
		return err
	}
	name := c.Args().First()
	// The pin is read and its env walked under the store's lock, shared,
	// as a run holds it (holdStore): before, a gc --envs after an
	// approval that moved the pin removed the env under the walk, and
	// verify reported it missing or tampered with and advised a rebuild.
	unlock, err := holdStore(c.Context, o)
	if err != nil {
		return err
	}
	defer unlock()
	reg, err := readRegistry(c, o, name)
	if err != nil {
		return err
	}
	plat, err := pinnedPlatform(c, o)
	if err != nil {
		return err
	}
	if c.String("backend") == "container" {
		return verifyContainer(c, o, reg, name, plat, sd, rid)
	}
	rep, err := verify.Verify(c.Context, reg, name, verify.Options{
		Entrypoint: c.String("entrypoint"), Platform: plat,
		Deep: c.Bool("deep"), Explain: c.Bool("explain"), Jobs: c.Int("jobs"), StateDir: sd, RegistryID: rid, Store: o.home,
	})
	if err != nil {
		if c.Bool("explain") && rep.Seal != nil && len(rep.Seal.Differences) > 0 {
			err = rep.Seal.Explained()
			ds := explainDifferences(rep.Seal.Differences)
			if !o.json {
				// One line each, as env verify --explain prints them: a
				// script reading them got none of a single difference.
				for _, d := range ds {
					fmt.Fprintf(o.stdout, "drift: %s\n", oneLine(d.String()))
				}
				return err
			}
			rep.Seal.Differences = ds
			out := struct {
				*verify.Report
				OK      bool           `json:"ok"`
				Refused map[string]any `json:"refused"`
			}{rep, false, refusedDoc(err)}
			if jerr := o.emit("cruxprov.verify/v1", out, nil); jerr != nil {
				return jerr
			}
			return &reportedError{code: exitRefused, err: err}
		}
		return err
	}
	mode := "fast"
	if c.Bool("deep") {
		mode = "deep"
	}
	out := struct {
		*verify.Report
		Mode string `json:"mode"`
		OK   bool   `json:"ok"`
	}{rep, mode, true}
	return o.emit("cruxprov.verify/v1", out, func(w io.Writer) {
		fmt.Fprintf(w, "ok %s revision %d (%s)\nenv %s\nmaterialization_digest %s\nseal_content_digest %s\n",
			rep.Provider, rep.Revision, mode, rep.Env, rep.Materialization.Digest, rep.Materialization.Seal)
	})
}

// verifyContainer is verify --backend container: the pin, then the image
// its container materialization names (digest, builder signature,
// provenance; --deep rehashes every layer too).
func verifyContainer(c *cli.Context, o *opts, reg registry.Reader, name, plat, sd string, rid digest.Digest) error {
	ro, err := registryRemote(c)
	if err != nil {
		return err
	}
	rep, err := container.Verify(c.Context, reg, name, verify.Options{
		Entrypoint: c.String("entrypoint"), Platform: plat, Deep: c.Bool("deep"), StateDir: sd, RegistryID: rid,
	}, container.Options{Image: image.VerifyOptions{Remote: ro}})
	if err != nil {
		return caBundleRemedy(c, err)
	}
	mode := "fast"
	if c.Bool("deep") {
		mode = "deep"
	}
	out := struct {
		*container.Report
		Mode string `json:"mode"`
		OK   bool   `json:"ok"`
	}{rep, mode, true}
	return o.emit("cruxprov.verify/v1", out, func(w io.Writer) {
		m := rep.Materialization
		signer := ""
		if len(rep.Image.Manifests) > 0 {
			signer = rep.Image.Manifests[0].Signer
		}
		fmt.Fprintf(w, "ok %s revision %d (container, %s)\nimage %s\nplatform %s\nsigned by builder key %s\nprovenance: package %s, resolution %s, base %s, builder %s\n",
			rep.Provider, rep.Revision, mode, m.Image, m.Platform, signer, rep.Spec.Package.SHA256, m.Resolution, m.Base, m.Builder)
	})
}
