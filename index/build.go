package index

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/internal/filekind"
	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/refusal"
)

// BuiltFile is one wheel a built index lists.
type BuiltFile struct {
	Project        string `json:"project"`
	Version        string `json:"version"`
	Filename       string `json:"filename"`
	SHA256         string `json:"sha256"` // hex
	Size           int64  `json:"size"`
	RequiresPython string `json:"requires_python,omitempty"`
	Metadata       bool   `json:"metadata"` // a PEP 658 .metadata file is served beside it
	MetadataSHA256 string `json:"metadata_sha256,omitempty"`
}

// BuildReport says what Build wrote.
type BuildReport struct {
	Dir      string      `json:"dir"`
	Projects int         `json:"projects"`
	Files    []BuiltFile `json:"files"`
}

// Build writes a static index of the wheels in the directory from into
// dir, servable by any static web server or bucket:
//
//	dir/files/<wheel>                the wheels (copied) and <wheel>.metadata (PEP 658)
//	dir/simple/index.html, index.json            the project list (PEP 503 / PEP 691)
//	dir/simple/<project>/index.html, index.json  each project's files, with
//	    #sha256= fragments, data-requires-python and data-core-metadata
//
// Links are relative, so the tree can be served under any URL prefix. A
// static server cannot negotiate content types: it answers with
// index.html, which carries everything index.json does, and clients fall
// back to it by its content type (see docs/index.md). Output is
// deterministic: the same wheels give the same bytes.
//
// The index is built whole in a staging directory beside dir and only
// then put in dir's place in one step (an atomic exchange with a previous
// index on Linux), so dir is always either what it was before or the
// complete new index: a bad wheel, an error or a kill mid-build leaves it
// as it was. dir must be new, empty, or an index a previous Build wrote
// (only files/ and simple/); that index is replaced whole. Builds of one
// dir are serialized by a lock file beside it (.<name>.lock), and each
// removes the staging directories killed builds left.
func Build(ctx context.Context, dir, from string) (BuildReport, error) {
	rep := BuildReport{Dir: dir, Files: []BuiltFile{}}
	ents, err := os.ReadDir(from)
	if err != nil {
		return rep, fmt.Errorf("index build: %w", err)
	}
	var wheels []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".whl") {
			continue
		}
		if err := checkWheelFile(from, e); err != nil {
			return rep, err
		}
		wheels = append(wheels, e.Name())
	}
	if len(wheels) == 0 {
		return rep, &NoWheelsError{Dir: from}
	}
	sort.Strings(wheels)
	out, err := openOutput(ctx, dir)
	if err != nil {
		return rep, err
	}
	defer out.close()
	if err := writeIndex(ctx, out.staging, from, wheels, &rep); err != nil {
		return rep, err
	}
	if err := out.commit(); err != nil {
		return rep, err
	}
	return rep, nil
}

// NoWheelsError is what Build returns for an input directory holding no
// *.whl: the caller gave the wrong directory, nothing was built and
// nothing was changed. Test for it with errors.As; a command line maps it
// to a mistake in its input (it was a failure, exit 1, where an input
// that does not exist was a usage error).
type NoWheelsError struct {
	Dir string // the input directory, as given
}

func (e *NoWheelsError) Error() string {
	return fmt.Sprintf("index build: no .whl files in %s; give the directory that holds the wheels to index", e.Dir)
}

// checkWheelFile refuses an entry of from named *.whl that is not a
// regular file once symbolic links are followed: a link is followed (a
// directory of links, as a Nix store or stow tree gives, is a normal
// input), and a dangling link, a link to a directory or a device, a
// directory or a FIFO named *.whl fails the build, naming it — a .whl is
// never left out silently.
func checkWheelFile(from string, e fs.DirEntry) error {
	p := filepath.Join(from, e.Name())
	if e.Type().IsRegular() {
		return nil
	}
	st, err := os.Stat(p)
	if err != nil {
		if e.Type()&fs.ModeSymlink != 0 {
			if target, lerr := os.Readlink(p); lerr == nil {
				return fmt.Errorf("index build: %s is a symbolic link to %s, which cannot be read (%w); fix the link or move it out of the input, nothing was changed", p, target, err)
			}
		}
		return fmt.Errorf("index build: cannot read %s (%w); make it readable or move it out of the input, nothing was changed", p, err)
	}
	if !st.Mode().IsRegular() {
		what := "is not a regular file"
		if e.Type()&fs.ModeSymlink != 0 {
			what = "is a symbolic link to something that is not a regular file"
		}
		return fmt.Errorf("index build: %s %s (%s); only wheel files are read, move it out of the input, nothing was changed", p, what, filekind.Of(st.Mode()))
	}
	return nil
}

// writeIndex writes the whole index of wheels (names in from) into dir.
func writeIndex(ctx context.Context, dir, from string, wheels []string, rep *BuildReport) error {
	files := filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		return fmt.Errorf("index build: %w", err)
	}
	byProject := map[string][]BuiltFile{}
	for _, name := range wheels {
		if err := ctx.Err(); err != nil {
			return err
		}
		bf, err := addWheel(filepath.Join(from, name), files, name)
		if err != nil {
			return err
		}
		byProject[bf.Project] = append(byProject[bf.Project], bf)
		rep.Files = append(rep.Files, bf)
	}
	var projects []string
	for p := range byProject {
		projects = append(projects, p)
	}
	sort.Strings(projects)
	rep.Projects = len(projects)
	for _, p := range projects {
		pd := filepath.Join(dir, "simple", p)
		if err := os.MkdirAll(pd, 0o755); err != nil {
			return fmt.Errorf("index build: %w", err)
		}
		h, j := projectPage(p, byProject[p])
		if err := writeNew(filepath.Join(pd, "index.html"), h); err != nil {
			return err
		}
		if err := writeNew(filepath.Join(pd, "index.json"), j); err != nil {
			return err
		}
		if err := syncDir(pd); err != nil {
			return err
		}
	}
	h, j := rootPage(projects)
	if err := writeNew(filepath.Join(dir, "simple", "index.html"), h); err != nil {
		return err
	}
	if err := writeNew(filepath.Join(dir, "simple", "index.json"), j); err != nil {
		return err
	}
	for _, d := range []string{files, filepath.Join(dir, "simple"), dir} {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// addWheel copies one wheel into files, hashing it, and writes its
// METADATA beside it.
func addWheel(src, files, name string) (BuiltFile, error) {
	parts := strings.Split(strings.TrimSuffix(name, ".whl"), "-")
	if len(parts) != 5 && len(parts) != 6 {
		return BuiltFile{}, refusal.New(refusal.WheelInvalid, "%s is not a wheel file name (name-version[-build]-python-abi-platform.whl); rename it or move it out of the input, nothing was changed", src)
	}
	if !validName.MatchString(parts[0]) {
		return BuiltFile{}, refusal.New(refusal.WheelInvalid, "%s: %q is not a project name; rename it or move it out of the input, nothing was changed", src, parts[0])
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return BuiltFile{}, fmt.Errorf("index build: cannot read %s (%w); make it readable or move it out of the input, nothing was changed", name, err)
	}
	sum := sha256.Sum256(data)
	bf := BuiltFile{Project: pep503.Normalize(parts[0]), Version: parts[1], Filename: name, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
	meta, err := wheelMetadata(data)
	if err != nil {
		return BuiltFile{}, refusal.Wrap(refusal.WheelInvalid, err, "%s is not a wheel that can be read; build it again or move it out of the input, nothing was changed", src)
	}
	dst := filepath.Join(files, name)
	if err := writeNew(dst, data); err != nil {
		return BuiltFile{}, err
	}
	if meta != nil {
		if err := writeNew(dst+".metadata", meta); err != nil {
			return BuiltFile{}, err
		}
		ms := sha256.Sum256(meta)
		bf.Metadata, bf.MetadataSHA256 = true, hex.EncodeToString(ms[:])
		bf.RequiresPython = header(meta, "Requires-Python")
	}
	return bf, nil
}

// wheelMetadata returns the bytes of the wheel's one top-level
// *.dist-info/METADATA, or nil when it has none.
func wheelMetadata(data []byte) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("not a zip archive: %w", err)
	}
	var found *zip.File
	for _, f := range zr.File {
		d, base, ok := strings.Cut(f.Name, "/")
		if ok && base == "METADATA" && strings.HasSuffix(d, ".dist-info") {
			if found != nil {
				return nil, fmt.Errorf("more than one .dist-info/METADATA")
			}
			found = f
		}
	}
	if found == nil {
		return nil, nil
	}
	rc, err := found.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("METADATA: %w", err)
	}
	return b, nil
}

// header returns the first value of an RFC 822 style header of METADATA.
func header(meta []byte, name string) string {
	sc := bufio.NewScanner(bytes.NewReader(meta))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

const apiVersion = "1.1"

func projectPage(name string, files []BuiltFile) (htmlPage, jsonPage []byte) {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html>\n  <head>\n    <meta name=\"pypi:repository-version\" content=\"%s\">\n    <title>Links for %s</title>\n  </head>\n  <body>\n    <h1>Links for %s</h1>\n", apiVersion, name, name)
	type jf struct {
		Filename         string            `json:"filename"`
		URL              string            `json:"url"`
		Hashes           map[string]string `json:"hashes"`
		RequiresPython   *string           `json:"requires-python,omitempty"`
		CoreMetadata     any               `json:"core-metadata"`
		DistInfoMetadata any               `json:"dist-info-metadata"`
		Size             int64             `json:"size"`
		Yanked           bool              `json:"yanked"`
	}
	var jfiles []jf
	versions := map[string]bool{}
	for _, f := range files {
		href := "../../files/" + url.PathEscape(f.Filename)
		fmt.Fprintf(&b, "    <a href=\"%s#sha256=%s\"", html.EscapeString(href), f.SHA256)
		j := jf{Filename: f.Filename, URL: href, Hashes: map[string]string{"sha256": f.SHA256}, Size: f.Size, CoreMetadata: false, DistInfoMetadata: false}
		if f.RequiresPython != "" {
			fmt.Fprintf(&b, " data-requires-python=\"%s\"", html.EscapeString(f.RequiresPython))
			rp := f.RequiresPython
			j.RequiresPython = &rp
		}
		if f.Metadata {
			sum := f.MetadataSHA256
			fmt.Fprintf(&b, " data-dist-info-metadata=\"sha256=%s\" data-core-metadata=\"sha256=%s\"", sum, sum)
			j.CoreMetadata = map[string]string{"sha256": sum}
			j.DistInfoMetadata = j.CoreMetadata
		}
		fmt.Fprintf(&b, ">%s</a><br/>\n", html.EscapeString(f.Filename))
		jfiles = append(jfiles, j)
		versions[f.Version] = true
	}
	b.WriteString("  </body>\n</html>\n")
	var vs []string
	for v := range versions {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	doc := map[string]any{"meta": map[string]string{"api-version": apiVersion}, "name": name, "files": jfiles, "versions": vs}
	return []byte(b.String()), marshal(doc)
}

func rootPage(projects []string) (htmlPage, jsonPage []byte) {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html>\n  <head>\n    <meta name=\"pypi:repository-version\" content=\"%s\">\n    <title>Simple index</title>\n  </head>\n  <body>\n", apiVersion)
	type jp struct {
		Name string `json:"name"`
	}
	jps := []jp{}
	for _, p := range projects {
		fmt.Fprintf(&b, "    <a href=\"%s/\">%s</a><br/>\n", p, p)
		jps = append(jps, jp{p})
	}
	b.WriteString("  </body>\n</html>\n")
	return []byte(b.String()), marshal(map[string]any{"meta": map[string]string{"api-version": apiVersion}, "projects": jps})
}

func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	_ = enc.Encode(v)
	return buf.Bytes()
}

// writeNew writes a new file (0644, whatever the umask: a web server must
// read it) and syncs it.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("index build: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("index build: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("index build: fsync %s: %w", dir, err)
	}
	return nil
}
