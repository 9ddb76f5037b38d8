package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

// configFormat is the format of $CRUXPROV_HOME/config.yaml (DESIGN §6, §14).
const configFormat = "cruxprov.config/v1"

// config is $CRUXPROV_HOME/config.yaml: the defaults an operator would
// otherwise repeat on every command. A flag on the command line wins.
//
//	format: cruxprov.config/v1
//	index: https://mirror.example/simple/
//	platforms: [host]
//	python: /usr/bin/python3.11
type config struct {
	Format    string   `yaml:"format"`
	Index     string   `yaml:"index"`
	Platforms []string `yaml:"platforms"`
	Python    string   `yaml:"python"`
}

// loadConfig reads the store's config.yaml (none: no defaults). An
// unknown format or key is a usage error naming the file.
func loadConfig(home string) (*config, error) {
	p := filepath.Join(home, "config.yaml")
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return &config{}, nil // no store yet, or not a directory: openStore says so
	}
	if errors.Is(err, fs.ErrPermission) {
		// Not a mistake on the command line: the store (or a directory
		// above it) is not this user's to read.
		return nil, fmt.Errorf("cannot read the store's %s: permission denied to this user (uid %d); run as a user who can read the store (its directories are 0755, its files 0644 for the executors that read it), or have its owner give read access", p, os.Geteuid())
	}
	if err != nil {
		return nil, usagef("%s: %v", p, unwrapPath(err))
	}
	return parseConfig(p, b)
}

// parseConfig decodes config.yaml's bytes b, read from p.
func parseConfig(p string, b []byte) (*config, error) {
	var c config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		// yaml names the Go type ("field indx not found in type
		// main.config"): name the keys a config may have instead.
		var keys []string
		for f := range reflect.TypeFor[config]().Fields() {
			keys = append(keys, f.Tag.Get("yaml"))
		}
		// yaml's unmarshal errors are one line each under a heading
		// ("yaml: unmarshal errors:\n  line 2: …"): one line, joined.
		msg := err.Error()
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msg = strings.Join(te.Errors, "; ")
		}
		msg = strings.ReplaceAll(oneLine(msg), "not found in type main.config", "is not a key of config.yaml (its keys: "+strings.Join(keys, ", ")+"; docs/operator.md)")
		return nil, usagef("%s: %s", p, msg)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil || !errors.Is(err, io.EOF) {
		// A second document's keys would be ignored (or, not YAML,
		// unread): one document, as the first is all that is read.
		return nil, usagef("%s: more than one YAML document (or text after the first that is not YAML); keep one document with the keys format, index, platforms and python (docs/operator.md)", p)
	}
	if c.Format != configFormat {
		return nil, usagef("%s: format %q is not %s", p, c.Format, configFormat)
	}
	return &c, nil
}

// applyConfig sets the flags the command line left unset from the
// store's config.yaml: --index, --platform and --python.
func applyConfig(c *cli.Context, o *opts) error {
	cfg, err := loadConfig(o.home)
	if err != nil {
		return err
	}
	set := func(flag, v string) error {
		if v == "" || c.IsSet(flag) || !hasFlagDef(c, flag) {
			return nil
		}
		return c.Set(flag, v)
	}
	given := c.IsSet("index") // on the command line: config.yaml's is not used
	if err := set("index", cfg.Index); err != nil {
		return err
	}
	indexFromConfig = !given && cfg.Index != "" && c.IsSet("index")
	if err := set("python", cfg.Python); err != nil {
		return err
	}
	if c.IsSet("platform") || !hasFlagDef(c, "platform") {
		return nil
	}
	for _, p := range cfg.Platforms {
		if err := c.Set("platform", p); err != nil {
			return err
		}
		if !isSliceFlag(c, "platform") {
			break // a command that takes one platform takes the first
		}
	}
	return nil
}

func isSliceFlag(c *cli.Context, flag string) bool {
	for _, f := range c.Command.Flags {
		if sf, ok := f.(*cli.StringSliceFlag); ok && sf.Name == flag {
			return true
		}
	}
	return false
}

// indexFromConfig is set when --index came from config.yaml: a command
// line rendered again (renderRemedy) needs no --index then.
var indexFromConfig bool

// hasFlagDef reports whether the command defines flag.
func hasFlagDef(c *cli.Context, flag string) bool {
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			if n == flag {
				return true
			}
		}
	}
	return false
}
