package podman

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/cruxible/cruxprov/refusal"
)

// pullPrefix names a pull's private one-entry layout (pull), in the
// first of stagingDirs that podman takes.
const pullPrefix = "cruxprov-pull-"

// stagingDirs are the directories a pull may stage its private layout
// in, in order: the temp directory, then /tmp, /var/tmp and the user's
// runtime directory (/run/user/UID, XDG_RUNTIME_DIR's usual place), each
// absolute and once. podman names an image pulled from a layout by the
// layout's path, so a temp directory whose path is no image name (TMPDIR
// with an uppercase letter or a space) could not stage one: podman
// refused it, "repository name must be lowercase". It is a variable for
// tests.
var stagingDirs = func() []string {
	var ds []string
	for _, d := range []string{os.TempDir(), "/tmp", "/var/tmp", fmt.Sprintf("/run/user/%d", os.Getuid())} {
		if a, err := filepath.Abs(d); err == nil && !slices.Contains(ds, a) {
			ds = append(ds, a)
		}
	}
	return ds
}

// pathComponent is a component of an image name's path (the
// distribution reference grammar): lowercase letters and digits, with
// '.', '_', "__" or runs of '-' between them.
var pathComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$`)

// nameMax is the longest image name podman takes (the repository name,
// domain included).
const nameMax = 255

// nameable reports whether podman takes a layout staged in dir (a
// directory pullPrefix and up to ten digits, which os.MkdirTemp adds) as
// an image name: podman's oci transport names the image
// "localhost/"+the path without its leading '/', which must be a valid
// repository name.
func nameable(dir string) bool {
	if !filepath.IsAbs(dir) {
		return false
	}
	name := "localhost/" + strings.TrimPrefix(filepath.Join(dir, pullPrefix+"4294967295"), "/")
	if len(name) > nameMax {
		return false
	}
	for _, c := range strings.Split(strings.TrimPrefix(filepath.Clean(dir), "/"), "/") {
		if c != "" && !pathComponent.MatchString(c) {
			return false
		}
	}
	return true
}

// stagePull makes a pull's private directory in the first of
// stagingDirs that podman can name and this process can write; where
// there is none it refuses container_unavailable, with the remedy to
// name a temporary directory whose path podman takes.
func stagePull(what string) (string, error) {
	ds := stagingDirs()
	var tried []string
	for _, d := range ds {
		if !nameable(d) {
			tried = append(tried, fmt.Sprintf("%q (not an image name)", d))
			continue
		}
		dir, err := os.MkdirTemp(d, pullPrefix)
		if err == nil {
			return dir, nil
		}
		tried = append(tried, fmt.Sprintf("%q (%v)", d, err))
	}
	return "", refusal.New(refusal.ContainerUnavailable,
		"cannot stage %s for podman, which names the image by its layout's path, and no directory tried is both writable and such a name (%s): use a writable temporary directory whose path is lowercase letters, digits, '.', '_' and '-'",
		what, strings.Join(tried, ", ")).WithRemedy(refusal.ActionSetTempDir, "")
}
