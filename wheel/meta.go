package wheel

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

// Metadata is what cruxprov reads from a wheel's METADATA (core metadata,
// email-header format; the body after the first blank line is ignored).
type Metadata struct {
	// Name and Version as written; they match the file name after
	// normalization (checked when the wheel is opened).
	Name    string
	Version string
	// RequiresPython is the Requires-Python specifier, "" when absent.
	RequiresPython string
	// RequiresDist lists the Requires-Dist requirements in file order.
	RequiresDist []string
}

// WheelInfo is the wheel's WHEEL file.
type WheelInfo struct {
	// WheelVersion is "1.x"; another major version is refused at open.
	WheelVersion string
	// Generator is the tool that built the wheel, "" when absent.
	Generator string
	// RootIsPurelib says whether the root of the archive installs into
	// purelib (true) or platlib (false).
	RootIsPurelib bool
	// Tags are the Tag lines, in file order.
	Tags []platform.Tag
	// Build is the Build line, "" when absent.
	Build string
}

// header is one "Key: value" field of an email-header file.
type header struct{ key, value string }

// parseHeaders parses the header block of an email-header style file
// (WHEEL, METADATA): "Key: value" lines, continuation lines starting with
// a space or tab, ended by the first empty line or the end of the text.
func parseHeaders(file string, b []byte) ([]header, error) {
	if !utf8.Valid(b) {
		return nil, refusal.New(refusal.WheelInvalid, "%s is not valid UTF-8; rebuild the wheel", file)
	}
	var hs []header
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if len(hs) == 0 {
				return nil, refusal.New(refusal.WheelInvalid, "%s line %d continues no field; rebuild the wheel", file, i+1)
			}
			hs[len(hs)-1].value += "\n" + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, refusal.New(refusal.WheelInvalid, "%s line %d is not a 'Key: value' field; rebuild the wheel", file, i+1)
		}
		hs = append(hs, header{key: strings.ToLower(k), value: strings.TrimSpace(v)})
	}
	return hs, nil
}

// single returns the one value of key; several are refused, none is "".
func single(file string, hs []header, key string) (string, error) {
	var v string
	n := 0
	for _, h := range hs {
		if h.key == key {
			v = h.value
			n++
		}
	}
	if n > 1 {
		return "", refusal.New(refusal.WheelInvalid, "%s has %d %q fields, want one; rebuild the wheel", file, n, key)
	}
	return v, nil
}

// parseWheelInfo parses WHEEL: Wheel-Version must be 1.x, Root-Is-Purelib
// "true" or "false", each Tag a valid interpreter-abi-platform triple.
func parseWheelInfo(b []byte) (WheelInfo, error) {
	const file = "WHEEL"
	hs, err := parseHeaders(file, b)
	if err != nil {
		return WheelInfo{}, err
	}
	var wi WheelInfo
	for _, f := range []struct {
		key string
		dst *string
	}{{"wheel-version", &wi.WheelVersion}, {"generator", &wi.Generator}, {"build", &wi.Build}} {
		if *f.dst, err = single(file, hs, f.key); err != nil {
			return WheelInfo{}, err
		}
	}
	major, minor, ok := strings.Cut(wi.WheelVersion, ".")
	if !ok || major != "1" || minor == "" || strings.Trim(minor, "0123456789") != "" {
		return WheelInfo{}, refusal.New(refusal.WheelInvalid, "WHEEL Wheel-Version %q is not 1.x; this tool reads wheel format 1 only", wi.WheelVersion)
	}
	purelib, err := single(file, hs, "root-is-purelib")
	if err != nil {
		return WheelInfo{}, err
	}
	switch strings.ToLower(purelib) {
	case "true":
		wi.RootIsPurelib = true
	case "false":
	default:
		return WheelInfo{}, refusal.New(refusal.WheelInvalid, "WHEEL Root-Is-Purelib %q is not true or false; rebuild the wheel", purelib)
	}
	for _, h := range hs {
		if h.key != "tag" {
			continue
		}
		parts := strings.Split(h.value, "-")
		if len(parts) != 3 || !interpRE.MatchString(parts[0]) || !tagPartRE.MatchString(parts[1]) || !tagPartRE.MatchString(parts[2]) {
			return WheelInfo{}, refusal.New(refusal.WheelInvalid, "WHEEL Tag %q is not interpreter-abi-platform; rebuild the wheel", h.value)
		}
		wi.Tags = append(wi.Tags, platform.Tag{Interpreter: parts[0], ABI: parts[1], Platform: parts[2]})
	}
	return wi, nil
}

// parseMetadata parses METADATA's header block: Name and Version are
// required, once each.
func parseMetadata(b []byte) (Metadata, error) {
	const file = "METADATA"
	hs, err := parseHeaders(file, b)
	if err != nil {
		return Metadata{}, err
	}
	var m Metadata
	for _, f := range []struct {
		key string
		dst *string
	}{{"name", &m.Name}, {"version", &m.Version}, {"requires-python", &m.RequiresPython}} {
		if *f.dst, err = single(file, hs, f.key); err != nil {
			return Metadata{}, err
		}
	}
	if m.Name == "" || m.Version == "" {
		return Metadata{}, refusal.New(refusal.WheelInvalid, "METADATA lacks Name or Version; rebuild the wheel")
	}
	for _, h := range hs {
		if h.key == "requires-dist" {
			m.RequiresDist = append(m.RequiresDist, h.value)
		}
	}
	return m, nil
}

// EntryPoint is one line of entry_points.txt: "name = module:attr [extras]".
type EntryPoint struct {
	// Name is the entry point's name (for console_scripts, the command).
	Name string
	// Module is the dotted module path.
	Module string
	// Attr is the dotted attribute path in Module, "" when the line names
	// only a module.
	Attr string
	// Extras are the bracketed extras, if any.
	Extras []string
}

// parseEntryPoints parses entry_points.txt (an INI file: "[group]"
// sections of "name = value" lines; "#" and ";" start comment lines).
// A line outside a section, a line without "=", an empty name, a name
// given twice in a group, or a value that is not "module[:attr] [extras]"
// with dotted identifiers is refusal.WheelInvalid.
func parseEntryPoints(b []byte) (map[string][]EntryPoint, error) {
	const file = "entry_points.txt"
	bad := func(line int, format string, args ...any) error {
		return refusal.New(refusal.WheelInvalid, file+" line %d: "+format+"; rebuild the wheel", append([]any{line}, args...)...)
	}
	if !utf8.Valid(b) {
		return nil, refusal.New(refusal.WheelInvalid, "%s is not valid UTF-8; rebuild the wheel", file)
	}
	b = bytes.TrimPrefix(b, []byte("\ufeff"))
	out := map[string][]EntryPoint{}
	group := ""
	seen := map[string]bool{}
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			if !strings.HasSuffix(line, "]") || strings.TrimSpace(line[1:len(line)-1]) == "" {
				return nil, bad(n, "bad section header %q", line)
			}
			group = strings.TrimSpace(line[1 : len(line)-1])
			if _, dup := out[group]; dup {
				return nil, bad(n, "section [%s] appears twice", group)
			}
			out[group] = nil
			continue
		}
		if group == "" {
			return nil, bad(n, "entry outside a [section]")
		}
		name, value, ok := strings.Cut(line, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || value == "" {
			return nil, bad(n, "not a 'name = module:attr' line")
		}
		if seen[group+"\x00"+name] {
			return nil, bad(n, "entry point %q appears twice in [%s]", name, group)
		}
		seen[group+"\x00"+name] = true
		ep, ok := parseObject(value)
		if !ok {
			return nil, bad(n, "entry point %q has a malformed object reference %q", name, value)
		}
		ep.Name = name
		out[group] = append(out[group], ep)
	}
	return out, nil
}

// parseObject parses "module[:attr] [extra1, extra2]".
func parseObject(v string) (EntryPoint, bool) {
	var ep EntryPoint
	if i := strings.IndexByte(v, '['); i >= 0 {
		if !strings.HasSuffix(v, "]") {
			return ep, false
		}
		for x := range strings.SplitSeq(v[i+1:len(v)-1], ",") {
			x = strings.TrimSpace(x)
			if !extraName(x) {
				return ep, false
			}
			ep.Extras = append(ep.Extras, x)
		}
		v = strings.TrimSpace(v[:i])
	}
	mod, attr, hasAttr := strings.Cut(v, ":")
	ep.Module, ep.Attr = strings.TrimSpace(mod), strings.TrimSpace(attr)
	if !dottedIdent(ep.Module) || hasAttr && !dottedIdent(ep.Attr) {
		return ep, false
	}
	return ep, true
}

// dottedIdent reports whether s is a dotted sequence of Python
// identifiers ("pkg.mod", "Class.method").
func dottedIdent(s string) bool {
	if s == "" {
		return false
	}
	for part := range strings.SplitSeq(s, ".") {
		if part == "" {
			return false
		}
		for i, r := range part {
			letter := r == '_' || unicode.IsLetter(r)
			if !letter && !(i > 0 && unicode.IsDigit(r)) {
				return false
			}
		}
	}
	return true
}

// extraName reports whether s is a plausible extra name (PEP 685:
// letters, digits, "-", "_", "." starting with a letter or digit).
func extraName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		alnum := r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r))
		if !alnum && !(i > 0 && (r == '-' || r == '_' || r == '.')) {
			return false
		}
	}
	return true
}
