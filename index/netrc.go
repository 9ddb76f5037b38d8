package index

import "strings"

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
