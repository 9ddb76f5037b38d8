package pep440_test

import (
	"fmt"

	"github.com/cruxible/cruxprov/pep440"
)

func Example() {
	v := pep440.MustParse("V1.0-RC.1+Ubuntu-2")
	set, err := pep440.ParseSpecifierSet(">=1.0a1, !=1.1.*")
	if err != nil {
		panic(err)
	}
	fmt.Println(v, v.IsPrerelease(), v.Public())
	fmt.Println(set, set.Contains(v, true), set.Contains(v, false))
	fmt.Println(pep440.Compare(pep440.MustParse("1.0.dev0"), pep440.MustParse("1.0a0")))
	// Output:
	// 1.0rc1+ubuntu.2 true 1.0rc1
	// !=1.1.*,>=1.0a1 true false
	// -1
}
