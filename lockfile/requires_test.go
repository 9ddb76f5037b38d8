package lockfile

import (
	"errors"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/pep508"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

func TestResolveRequires(t *testing.T) {
	l := mustParse(t, good) // six 1.16.0; numpy 1.26.4; local 1.0+cpu; pytest 8.0 (default group); uvloop with the extra fast
	pre := mustParse(t, `[[packages]]
name = "httpx"
version = "1.0rc1"
wheels = [{ url = "https://x/httpx-1.0rc1-py3-none-any.whl", hashes = { sha256 = "`+sha+`" } }]
`)
	linux := mustParse(t, `[[packages]]
name = "httpx"
version = "0.27.2"
marker = "sys_platform == 'linux'"
wheels = [{ url = "https://x/httpx-0.27.2-py3-none-any.whl", hashes = { sha256 = "`+sha+`" } }]
`)
	for _, tc := range []struct {
		name     string
		lock     *Lock
		platform string
		requires []string
		// want is "" for a resolution, else substrings of the lock_invalid refusal.
		want []string
	}{
		{name: "met", requires: []string{"six>=1.16", "NumPy==1.26.*", "local", "pytest"}},
		{name: "absent", requires: []string{"six", "httpx==0.27.2"}, want: []string{`"httpx==0.27.2", but the lock has no httpx for cp312-manylinux_2_28_x86_64`, "re-lock", "uv export --format pylock.toml --no-emit-project", "embed the new lock in the provider's wheel"}},
		{name: "version outside the specifier", requires: []string{"six>=2"}, want: []string{`"six>=2", but the lock pins six 1.16.0`}},
		{name: "every unmet one named", requires: []string{"six>=2", "httpx"}, want: []string{"pins six 1.16.0", "has no httpx"}},
		{name: "name normalized", requires: []string{"SIX==1.16.0"}},
		{name: "local version", requires: []string{"local==1.0"}},
		{name: "marker excludes the platform", requires: []string{`pywin32>=306; sys_platform == "win32"`}},
		{name: "marker includes the platform", requires: []string{`pywin32>=306; sys_platform == "linux"`}, want: []string{"has no pywin32"}},
		{name: "python_version marker excludes the platform", requires: []string{`tomli>=1; python_version < "3.11"`}},
		{name: "extra only", requires: []string{`rich; extra == "cli"`}},
		{name: "extra or a platform", requires: []string{`rich; extra == "cli" or python_version >= "3.9"`}, want: []string{"has no rich"}},
		{name: "extra of the lock not selected", requires: []string{"uvloop"}, want: []string{"has no uvloop"}},
		{name: "package marker includes it on this platform", lock: linux, requires: []string{"httpx"}},
		{name: "package marker excludes it on this platform", lock: linux, platform: "cp312-macosx_14_0_arm64", requires: []string{"httpx"}, want: []string{"has no httpx for cp312-macosx_14_0_arm64"}},
		{name: "direct URL met by the name", requires: []string{"six @ https://example.com/six-0.1-py3-none-any.whl"}},
		{name: "direct URL absent", requires: []string{"httpx @ https://example.com/httpx-1-py3-none-any.whl"}, want: []string{"has no httpx"}},
		{name: "pre-release the lock pins", lock: pre, requires: []string{"httpx>=0.27"}},
		{name: "pre-release outside", lock: pre, requires: []string{"httpx<1.0rc1"}, want: []string{"pins httpx 1.0rc1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lk, plat := tc.lock, tc.platform
			if lk == nil {
				lk = l
			}
			if plat == "" {
				plat = "cp312-manylinux_2_28_x86_64"
			}
			var reqs []pep508.Requirement
			for _, s := range tc.requires {
				r, err := pep508.Parse(s)
				if err != nil {
					t.Fatal(err)
				}
				reqs = append(reqs, r)
			}
			opts := Options{Requires: reqs, Root: "acme-web-fetch 1.0.0"}
			_, err := Resolve(lk, preset(t, plat), opts)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, refusal.LockInvalid) {
				t.Fatalf("err = %v, want lock_invalid", err)
			}
			for _, w := range append(tc.want, "acme-web-fetch 1.0.0 requires") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
			reps, err := ResolveAll(lk, []*platform.Platform{preset(t, plat)}, opts)
			if !errors.Is(err, refusal.LockInvalid) || !errors.Is(reps[0].Requires, refusal.LockInvalid) || len(reps[0].Packages) == 0 {
				t.Errorf("ResolveAll: %v; report %+v", err, reps)
			}
		})
	}
}
