package asuser

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"
)

// User is a user the machine has subordinate ids for.
type User struct {
	Name, Home string
	UID, GID   int
}

// subidCounts reads an /etc/subuid-style file: how many subordinate ids
// each owner (a name or a numeric uid) has, and the owners in file order.
func subidCounts(path string) (map[string]int64, []string) {
	counts := map[string]int64{}
	var order []string
	f, err := os.Open(path)
	if err != nil {
		return counts, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) != 3 {
			continue
		}
		n, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil || n <= 0 {
			continue
		}
		if _, seen := counts[parts[0]]; !seen {
			order = append(order, parts[0])
		}
		counts[parts[0]] += n
	}
	return counts, order
}

// Subid is the first user other than root that /etc/subuid and
// /etc/subgid give at least 65536 ids each (the container's user 65534
// is mapped into them) and that has a home directory for podman's
// storage; want (the tests pass
// CRUXPROV_ROOTLESS_USER) names one instead. It skips t, naming
// what is missing, where there is none.
func Subid(t testing.TB, want string) User {
	t.Helper()
	for _, tool := range []string{"newuidmap", "newgidmap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install uidmap): rootless podman cannot map subordinate ids", tool)
		}
	}
	uids, order := subidCounts("/etc/subuid")
	gids, _ := subidCounts("/etc/subgid")
	if want != "" {
		order = []string{want}
	}
	var why []string
	for _, owner := range order {
		u, err := user.Lookup(owner)
		if err != nil {
			if u, err = user.LookupId(owner); err != nil {
				why = append(why, fmt.Sprintf("%s: no such user", owner))
				continue
			}
		}
		count := func(m map[string]int64) int64 { return m[u.Username] + m[u.Uid] }
		if u.Uid == "0" {
			continue
		}
		if count(uids) < 65536 || count(gids) < 65536 {
			why = append(why, fmt.Sprintf("%s: %d subordinate uids and %d gids, fewer than 65536", u.Username, count(uids), count(gids)))
			continue
		}
		if st, err := os.Stat(u.HomeDir); err != nil || !st.IsDir() {
			why = append(why, fmt.Sprintf("%s: no home directory %s for podman's storage", u.Username, u.HomeDir))
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return User{Name: u.Username, Home: u.HomeDir, UID: uid, GID: gid}
	}
	t.Skipf("no user other than root has subordinate ids in /etc/subuid and /etc/subgid (%s): "+
		"useradd --create-home cruxprov-rootless && usermod --add-subuids 100000-165535 --add-subgids 100000-165535 cruxprov-rootless (.ci/run does)",
		strings.Join(why, "; "))
	return User{}
}
