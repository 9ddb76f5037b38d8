package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
)

func init() {
	register(&cli.Command{
		Name:        "interface",
		Usage:       "registered interfaces (id → digest of the canonical schema)",
		UsageText:   "cruxprov interface register|list …",
		Description: "Example:\n   cruxprov interface register web.fetch --schema web.fetch.schema.json\n   cruxprov interface list --json",
		Subcommands: []*cli.Command{{
			Name:      "register",
			Usage:     "register an interface's JSON schema under its id",
			UsageText: "cruxprov interface register ID --schema F",
			Description: "Records ID → sha256 of the RFC 8785 form of the schema. The same schema again\n" +
				"changes nothing and says so (\"already registered\"; \"already\": true in --json; exit 0);\n" +
				"another schema under a registered id is refused (interface_digest_mismatch).\n" +
				"A schema is at most 1 MiB (larger: interface_invalid). A schema whose own \"id\" or\n" +
				"\"$id\" names another interface id than ID is refused (interface_invalid).\n\n" +
				"Example:\n   cruxprov interface register cruxible.echo/v1 --schema echo.schema.json",
			Flags: []cli.Flag{&cli.StringFlag{Name: "schema", Usage: "the schema `FILE` (JSON)", Required: true}},
			Action: func(c *cli.Context) error {
				var b []byte
				o, reg, err := openRegistry(c, 1, func(*opts) error {
					var err error
					b, err = readInputFile(c.String("schema"), registry.MaxSchemaBytes)
					if tl := (*tooLargeError)(nil); errors.As(err, &tl) {
						// Refused as the registry refuses it, before it is read.
						return refusal.New(refusal.InterfaceInvalid, "--schema %s is larger than 1 MiB, the most an interface schema may be: give the interface's JSON Schema, not a larger document", c.String("schema"))
					}
					if err != nil {
						return inputErr("--schema", c.String("schema"), err)
					}
					if _, err := digest.InterfaceDigest(b); err != nil {
						// Not a schema at all: the wrong file, not another
						// schema under a registered id.
						return usagef("--schema %s is not a JSON document RFC 8785 can canonicalize: %v", c.String("schema"), err)
					}
					return nil
				})
				if err != nil {
					return err
				}
				// The registry says, under its lock, whether it recorded the
				// registration or found this schema registered already (the
				// command run again, or another registration at once): then
				// nothing changed, and it is said so, as policy set and key
				// trust say it. Read from the registry before registering,
				// two registrations at once could both say registered.
				it, err := reg.RegisterInterface(c.Context, c.Args().First(), b)
				if err != nil {
					return err
				}
				return o.emit("cruxprov.interface.register/v1", it, func(w io.Writer) {
					if it.Already {
						fmt.Fprintf(w, "already registered %s %s (at %s): nothing changed\n", it.ID, it.Digest, it.RegisteredAt.UTC().Format(time.RFC3339))
						return
					}
					fmt.Fprintf(w, "%s %s\n", it.ID, it.Digest)
				})
			},
		}, {
			Name:        "list",
			Usage:       "list the registered interfaces",
			UsageText:   "cruxprov interface list [--json]",
			Description: "Example:\n   cruxprov interface list",
			Action: func(c *cli.Context) error {
				o, reg, err := readOnlyRegistry(c, 0)
				if err != nil {
					if home, herr := globals(c); herr == nil && noStore(home.home) != nil {
						// A provider's author reads a schema's digest in a
						// store of their own (provider-authors.md §3): the
						// register makes it, and the digest is the schema's
						// content digest, the same in every store.
						return fmt.Errorf("%w; or, to read a schema's digest in a store of your own: cruxprov interface register ID --schema FILE --home %s (it makes the store)", err, shellQuote(home.home))
					}
					return err
				}
				l, err := reg.Interfaces(c.Context)
				if err != nil {
					return err
				}
				return o.emit("cruxprov.interface.list/v1", map[string]any{"interfaces": l}, func(w io.Writer) {
					tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tDIGEST")
					for _, it := range l {
						fmt.Fprintf(tw, "%s\t%s\n", it.ID, it.Digest)
					}
					tw.Flush()
				})
			},
		}},
	})
}
