package index

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// File is one distribution file a project page lists.
type File struct {
	// Filename is the percent-decoded file name: the last path segment of
	// URL for an HTML page, the "filename" key for a JSON page.
	Filename string `json:"filename"`
	// URL is the absolute URL to download, without its fragment.
	URL string `json:"url"`
	// Hashes maps a lowercase algorithm name to the lowercase hex digest
	// the index lists (HTML: the URL fragment; JSON: "hashes").
	Hashes map[string]string `json:"hashes,omitempty"`
	// RequiresPython is the data-requires-python / "requires-python" value.
	RequiresPython string `json:"requires_python,omitempty"`
	// Yanked is set by data-yanked / "yanked"; YankedReason is its text.
	Yanked       bool   `json:"yanked,omitempty"`
	YankedReason string `json:"yanked_reason,omitempty"`
	// Size is the "size" a JSON page gives (PEP 700), 0 when unknown.
	Size int64 `json:"size,omitempty"`
	// CoreMetadata is true when the index serves the file's METADATA at
	// URL + ".metadata" (PEP 658/714); MetadataHashes are its hashes.
	CoreMetadata   bool              `json:"core_metadata,omitempty"`
	MetadataHashes map[string]string `json:"metadata_hashes,omitempty"`
}

// SHA256 returns the sha256 the index lists for the file, lowercase hex as
// given, or "" when it lists none.
func (f File) SHA256() string { return f.Hashes["sha256"] }

// Project is one project's page on an index.
type Project struct {
	Name  string `json:"name"` // PEP 503 normalized
	URL   string `json:"url"`  // the page's final URL (redacted)
	Files []File `json:"files"`
}

// Find returns the file the page lists under filename. When a page lists
// one name twice, the first entry wins, as pip's does.
func (p *Project) Find(filename string) (File, bool) {
	for _, f := range p.Files {
		if f.Filename == filename {
			return f, true
		}
	}
	return File{}, false
}

// Content types of PEP 691 (and the legacy HTML one).
const (
	ContentTypeJSON       = "application/vnd.pypi.simple.v1+json"
	ContentTypeHTML       = "application/vnd.pypi.simple.v1+html"
	ContentTypeLegacyHTML = "text/html"
)

// acceptHeader prefers JSON, then versioned HTML, then legacy HTML, which a
// static server answers with.
const acceptHeader = ContentTypeJSON + ", " + ContentTypeHTML + ";q=0.2, " + ContentTypeLegacyHTML + ";q=0.01"

var validName = regexp.MustCompile(`^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$`)

// parseHTML reads a PEP 503 page fetched from page.
func parseHTML(page *url.URL, body []byte) ([]File, error) {
	z := html.NewTokenizer(bytes.NewReader(body))
	base := page
	baseSet := false
	var files []File
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return files, nil // io.EOF or malformed tail: the tokenizer has given all it can
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			if tag != "a" && tag != "base" && tag != "meta" {
				continue
			}
			var at tagAttrs
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				at.set(string(k), string(v))
			}
			switch tag {
			case "base":
				if !baseSet && at.has&hasHref != 0 {
					u, err := page.Parse(strings.TrimSpace(at.href))
					if err != nil {
						return nil, fmt.Errorf("bad <base href>: %w", err)
					}
					base, baseSet = u, true
				}
			case "meta":
				if at.name == "pypi:repository-version" {
					if err := checkAPIVersion(at.content); err != nil {
						return nil, err
					}
				}
			case "a":
				if at.has&hasHref == 0 {
					continue
				}
				f, err := htmlFile(base, &at)
				if err != nil {
					return nil, err
				}
				if f.Filename != "" {
					files = append(files, f)
				}
			}
		}
	}
}

// tagAttrs holds the attributes parseHTML reads; the first of a repeated
// attribute wins, as in browsers.
type tagAttrs struct {
	has                                          int
	href, requiresPython, yanked, coreMeta, dist string
	name, content                                string
}

const (
	hasHref = 1 << iota
	hasRequiresPython
	hasYanked
	hasCoreMeta
	hasDistMeta
	hasName
	hasContent
)

func (a *tagAttrs) set(k, v string) {
	var bit int
	var dst *string
	switch k {
	case "href":
		bit, dst = hasHref, &a.href
	case "data-requires-python":
		bit, dst = hasRequiresPython, &a.requiresPython
	case "data-yanked":
		bit, dst = hasYanked, &a.yanked
	case "data-core-metadata":
		bit, dst = hasCoreMeta, &a.coreMeta
	case "data-dist-info-metadata":
		bit, dst = hasDistMeta, &a.dist
	case "name":
		bit, dst = hasName, &a.name
	case "content":
		bit, dst = hasContent, &a.content
	default:
		return
	}
	if a.has&bit == 0 {
		a.has |= bit
		*dst = v
	}
}

func htmlFile(base *url.URL, at *tagAttrs) (File, error) {
	u, err := base.Parse(strings.TrimSpace(at.href))
	if err != nil {
		return File{}, fmt.Errorf("bad href %q: %w", at.href, err)
	}
	var f File
	if u.Fragment != "" {
		if algo, hex, ok := strings.Cut(u.Fragment, "="); ok {
			f.Hashes = map[string]string{strings.ToLower(algo): strings.ToLower(hex)}
		}
	}
	u.Fragment, u.RawFragment = "", ""
	if u.Scheme != "http" && u.Scheme != "https" {
		return File{}, nil // javascript:, mailto:, file: and the like are not downloads
	}
	f.URL = u.String()
	f.Filename = path.Base(u.Path)
	if f.Filename == "/" || f.Filename == "." || u.Path == "" || strings.HasSuffix(u.Path, "/") {
		f.Filename = ""
	}
	f.RequiresPython = at.requiresPython
	if at.has&hasYanked != 0 {
		f.Yanked, f.YankedReason = true, at.yanked
	}
	meta, ok := at.coreMeta, at.has&hasCoreMeta != 0
	if !ok {
		meta, ok = at.dist, at.has&hasDistMeta != 0
	}
	if ok && meta != "false" {
		f.CoreMetadata = true
		if algo, hex, ok := strings.Cut(meta, "="); ok {
			f.MetadataHashes = map[string]string{strings.ToLower(algo): strings.ToLower(hex)}
		}
	}
	return f, nil
}

func checkAPIVersion(v string) error {
	major, _, _ := strings.Cut(strings.TrimSpace(v), ".")
	if n, err := strconv.Atoi(major); err != nil || n != 1 {
		return fmt.Errorf("repository API version %q is not 1.x", v)
	}
	return nil
}

type jsonPage struct {
	Meta struct {
		APIVersion string `json:"api-version"`
	} `json:"meta"`
	Name  string `json:"name"`
	Files []struct {
		Filename         string            `json:"filename"`
		URL              string            `json:"url"`
		Hashes           map[string]string `json:"hashes"`
		RequiresPython   *string           `json:"requires-python"`
		Yanked           json.RawMessage   `json:"yanked"`
		CoreMetadata     json.RawMessage   `json:"core-metadata"`
		DistInfoMetadata json.RawMessage   `json:"dist-info-metadata"`
		Size             *int64            `json:"size"`
	} `json:"files"`
}

// parseJSON reads a PEP 691 project page fetched from page.
func parseJSON(page *url.URL, body []byte) ([]File, error) {
	var p jsonPage
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("not a PEP 691 JSON page: %w", err)
	}
	if err := checkAPIVersion(p.Meta.APIVersion); err != nil {
		return nil, err
	}
	files := make([]File, 0, len(p.Files))
	for _, jf := range p.Files {
		if jf.Filename == "" || strings.ContainsAny(jf.Filename, "/\\\x00") {
			return nil, fmt.Errorf("file name %q is not a plain file name", jf.Filename)
		}
		u, err := page.Parse(jf.URL)
		if err != nil || jf.URL == "" {
			return nil, fmt.Errorf("file %s: bad url %q", jf.Filename, jf.URL)
		}
		u.Fragment, u.RawFragment = "", ""
		f := File{Filename: jf.Filename, URL: u.String()}
		if len(jf.Hashes) > 0 {
			f.Hashes = map[string]string{}
			for k, v := range jf.Hashes {
				f.Hashes[strings.ToLower(k)] = strings.ToLower(v)
			}
		}
		if jf.RequiresPython != nil {
			f.RequiresPython = *jf.RequiresPython
		}
		if jf.Size != nil {
			if *jf.Size < 0 {
				return nil, fmt.Errorf("file %s: negative size", jf.Filename)
			}
			f.Size = *jf.Size
		}
		if f.Yanked, f.YankedReason, err = boolOrString(jf.Yanked); err != nil {
			return nil, fmt.Errorf("file %s: yanked: %w", jf.Filename, err)
		}
		meta := jf.CoreMetadata
		if len(meta) == 0 {
			meta = jf.DistInfoMetadata
		}
		if f.CoreMetadata, f.MetadataHashes, err = boolOrHashes(meta); err != nil {
			return nil, fmt.Errorf("file %s: core-metadata: %w", jf.Filename, err)
		}
		files = append(files, f)
	}
	return files, nil
}

func boolOrString(raw json.RawMessage) (bool, string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return false, "", nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b, "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return false, "", errors.New("neither a boolean nor a string")
	}
	return true, s, nil
}

func boolOrHashes(raw json.RawMessage) (bool, map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b, nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return false, nil, errors.New("neither a boolean nor a map of hashes")
	}
	out := map[string]string{}
	for k, v := range m {
		out[strings.ToLower(k)] = strings.ToLower(v)
	}
	return true, out, nil
}
