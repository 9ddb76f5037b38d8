package index

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParseNetrc: whatever the operator's netrc holds, ParseNetrc returns
// credentials (it never fails) without panicking, each for a named host
// with a login or a password, none holding white space; and those
// credentials, written back as a netrc, read back the same.
func FuzzParseNetrc(f *testing.F) {
	for _, s := range []string{
		"machine a.example login u password p\n",
		"machine a.example\n  login u\n  password p # note\ndefault login x password y\n",
		"machine a login u macdef init\ncd /\n\nmachine b password q\n",
		"machine a#b login u#x password #p\r\nmachine c account z login v\n",
		"login u password p\nmachine\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		creds := ParseNetrc(b)
		var sb strings.Builder
		roundTrips := true
		for _, c := range creds {
			if c.Host == "" || c.Username == "" && c.Password == "" {
				t.Fatalf("credential %+v", c)
			}
			for _, v := range []string{c.Host, c.Username, c.Password} {
				if strings.ContainsAny(v, " \t\r\n") {
					t.Fatalf("a field with white space: %q", v)
				}
				switch {
				case v == "", strings.HasPrefix(v, "#"), v == "machine", v == "default", v == "login", v == "password", v == "account", v == "macdef":
					roundTrips = false // not one token of its own in a netrc
				}
			}
			sb.WriteString("machine " + c.Host + " login " + c.Username + " password " + c.Password + "\n")
		}
		if !roundTrips {
			return
		}
		if again := ParseNetrc([]byte(sb.String())); !reflect.DeepEqual(again, creds) {
			t.Fatalf("%q -> %+v -> %q -> %+v", b, creds, sb.String(), again)
		}
	})
}
