package main

import (
	"errors"
	"io/fs"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/internal/buildinfo"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
)

// envSbomCmd is `env sbom PATH`: the CycloneDX SBOM of a sealed env, the
// same document an image built from the same env by the same cruxprov
// version carries as an attestation (image.SBOM, from the seal and the
// tool's version).
func envSbomCmd() *cli.Command {
	return &cli.Command{
		Name:      "sbom",
		Usage:     "print the CycloneDX SBOM of a sealed env (every package, version, wheel file and sha256)",
		UsageText: "cruxprov env sbom PATH|DIGEST|sha256:PREFIX",
		Description: "Reads the env's seal (not its tree) and prints a CycloneDX 1.5 JSON SBOM: every package\n" +
			"of the resolution with its version, wheel file name and sha256, the root package as the\n" +
			"subject, the platform, interpreter, resolution and materialization digest as properties.\n" +
			"It depends on the seal and on this cruxprov's version (metadata.tools) alone, so it is the\n" +
			"SBOM `image build` of the same cruxprov version attests for the same env.\n" +
			"The output is the document itself, with or without --json.\n\n" +
			"Example:\n   cruxprov env sbom ~/.local/share/cruxprov/envs/<hex> > sbom.cdx.json",
		Action: func(c *cli.Context) error {
			o, err := globals(c)
			if err != nil {
				return err
			}
			if c.NArg() != 1 {
				return usagef("env sbom takes one env: its PATH, DIGEST or sha256:PREFIX")
			}
			dir, err := envArg(o, c.Args().First())
			if err != nil {
				return err
			}
			s, err := seal.Load(dir)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && refusal.CodeOf(err) == "" {
					return refusal.Wrap(refusal.SealMissing, err, "%s has no seal", dir)
				}
				return err
			}
			b, err := image.SBOM(s, buildinfo.Version+" "+buildinfo.GoVersion())
			if err != nil {
				return err
			}
			_, err = o.stdout.Write(b)
			return err
		},
	}
}
