package index

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// readNetrc reads the credentials of the netrc file at path: none, and
// no error, when it does not exist.
// errNoNetrc is readNetrc's answer for a netrc file that does not exist:
// no credential, and no warning.
var errNoNetrc = errors.New("no such file")

func readNetrc(path string) ([]Credential, error) {
	fi, err := os.Stat(path) // before opening: a FIFO would block
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoNetrc
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxNetrc+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxNetrc {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxNetrc)
	}
	return ParseNetrc(b), nil
}

// ParseNetrc reads the credentials of a .netrc file: one per "machine"
// entry with a login or a password ("default" entries are ignored: a
// credential is only ever sent to the host it names). Macro definitions
// are skipped. It never fails: what it cannot read it leaves out.
func ParseNetrc(data []byte) []Credential {
	var out []Credential
	var cur *Credential
	flush := func() {
		if cur != nil && cur.Host != "" && (cur.Username != "" || cur.Password != "") {
			out = append(out, *cur)
		}
		cur = nil
	}
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	inMacro := false
	var toks []string
	for _, line := range lines {
		if inMacro {
			if strings.TrimSpace(line) == "" {
				inMacro = false
			}
			continue
		}
		if i := strings.Index(line, "#"); i >= 0 && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			line = line[:i]
		}
		fields := strings.Fields(line)
		for i := 0; i < len(fields); i++ {
			if fields[i] == "macdef" {
				inMacro = true
				toks = append(toks, fields[:i]...)
				toks = append(toks, "\x00macdef")
				fields = nil
				break
			}
		}
		toks = append(toks, fields...)
	}
	for i := 0; i < len(toks); i++ {
		next := func() string {
			if i+1 < len(toks) {
				i++
				return toks[i]
			}
			return ""
		}
		switch toks[i] {
		case "machine":
			flush()
			cur = &Credential{Host: next()}
		case "default", "\x00macdef":
			flush()
		case "login":
			if v := next(); cur != nil {
				cur.Username = v
			}
		case "password":
			if v := next(); cur != nil {
				cur.Password = v
			}
		case "account":
			next()
		}
	}
	flush()
	return out
}
