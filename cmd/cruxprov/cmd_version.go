package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/internal/buildinfo"
)

func init() {
	register(&cli.Command{
		Name:        "version",
		Usage:       "print the version, commit, Go version and protocol version",
		UsageText:   "cruxprov version [--json]",
		Description: "Example:\n   cruxprov version\n   cruxprov version --json",
		Action: func(c *cli.Context) error {
			o, err := globals(c)
			if err != nil {
				return err
			}
			if c.NArg() > 0 {
				return usagef("version takes no arguments")
			}
			v := struct {
				Version         string `json:"version"`
				Commit          string `json:"commit"`
				GoVersion       string `json:"go_version"`
				ProtocolVersion int    `json:"protocol_version"`
			}{buildinfo.Version, buildinfo.Commit, buildinfo.GoVersion(), buildinfo.ProtocolVersion}
			return o.emit("cruxprov.version/v1", v, func(w io.Writer) {
				fmt.Fprintf(w, "cruxprov %s (commit %s, %s, protocol_version %d)\n", v.Version, v.Commit, v.GoVersion, v.ProtocolVersion)
			})
		},
	})
}
