package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/index"
)

func init() {
	register(&cli.Command{
		Name:      "index",
		Usage:     "build a static package index (PEP 503 + PEP 691) for mirrors and air-gapped hosts",
		UsageText: "cruxprov index build DIR --from DIR_OF_WHEELS",
		Description: "Example:\n   cruxprov index build ./mirror --from ./wheels\n" +
			"   python3 -m http.server -d ./mirror 8080   # then --index http://127.0.0.1:8080/simple/",
		Subcommands: []*cli.Command{{
			Name:      "build",
			Usage:     "write a static index of a directory of wheels",
			UsageText: "cruxprov index build DIR --from DIR_OF_WHEELS",
			Description: "Copies the wheels to DIR/files/, writes each wheel's METADATA beside it (PEP 658), and\n" +
				"writes DIR/simple/<project>/index.html (PEP 503, with #sha256= fragments,\n" +
				"data-requires-python and data-core-metadata) and index.json (PEP 691) beside it, plus\n" +
				"the project lists DIR/simple/index.html and index.json. Links are relative, so any\n" +
				"static web server or bucket can serve DIR under any prefix; the output is\n" +
				"deterministic. The index is built beside DIR and put in its place only when\n" +
				"complete, so a bad wheel, an error or a kill leaves DIR as it was. DIR must be\n" +
				"new, empty, or an index built before (it is replaced whole). See docs/index.md.\n\n" +
				"Example:\n   cruxprov index build ./mirror --from ./wheels\n   cruxprov index build ./pypi --from ./wheels --json",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "from", Usage: "the `DIR` of wheels to index"},
			},
			Action: indexBuild,
		}},
	})
}

func indexBuild(c *cli.Context) error {
	o, err := globals(c)
	if err != nil {
		return err
	}
	if c.NArg() != 1 {
		return usagef("index build takes one DIR (the index to write)")
	}
	if c.String("from") == "" {
		return usagef("--from DIR_OF_WHEELS is required")
	}
	from := c.String("from")
	st, err := os.Stat(from)
	if errors.Is(err, fs.ErrPermission) {
		return inputErr("--from", from, err)
	}
	// A --from naming nothing said it "is not a directory", which sent
	// the reader to look at what stands there: nothing does.
	if errors.Is(err, fs.ErrNotExist) {
		return usagef("--from %s does not exist; give the directory holding the .whl files", from)
	}
	if err != nil {
		return inputErr("--from", from, err)
	}
	if !st.IsDir() {
		return usagef("--from %s is not a directory; give the directory holding the .whl files", from)
	}
	// A directory this user may not read was "index build: open DIR:
	// permission denied", exit 1: the path that denied it, its owner and
	// what to do, as for every file a flag names (inputErr).
	d, err := os.Open(from)
	if err != nil {
		return inputErr("--from", from, err)
	}
	d.Close()
	rep, err := index.Build(c.Context, c.Args().First(), c.String("from"))
	// A directory holding no wheels is the wrong --from, as one that does
	// not exist is: it was "index build: no .whl files in D", exit 1.
	var nw *index.NoWheelsError
	if errors.As(err, &nw) {
		return usagef("--from %s holds no .whl files; give the directory holding the .whl files", from)
	}
	if err != nil {
		return err
	}
	// The report's hashes are the pages' (bare hex); the document writes
	// them as every other --json document writes a sha256: sha256:<hex>.
	files := make([]builtFileJSON, len(rep.Files))
	for i, f := range rep.Files {
		files[i] = builtFileJSON{BuiltFile: f, SHA256: "sha256:" + f.SHA256}
		if f.MetadataSHA256 != "" {
			files[i].MetadataSHA256 = "sha256:" + f.MetadataSHA256
		}
	}
	out := struct {
		index.BuildReport
		Files []builtFileJSON `json:"files"`
	}{rep, files}
	return o.emit(schemaName("index", "build"), out, func(w io.Writer) {
		if o.quiet {
			return
		}
		for _, f := range rep.Files {
			fmt.Fprintf(w, "%s %s\n", f.SHA256[:12], f.Filename)
		}
		fmt.Fprintf(w, "%s of %s indexed in %s (serve it; the index URL ends in /simple/)\n", count(len(rep.Files), "wheel"), count(rep.Projects, "project"), rep.Dir)
	})
}

// builtFileJSON is an index.BuiltFile as index build --json writes it,
// its hashes as sha256:<hex> (inspect, fetch, lock resolve and every
// change-set write a wheel's sha256 so).
type builtFileJSON struct {
	index.BuiltFile
	SHA256         string `json:"sha256"`
	MetadataSHA256 string `json:"metadata_sha256,omitempty"`
}
