package marker_test

import (
	"fmt"

	"github.com/cruxible/cruxprov/marker"
)

func Example() {
	m, err := marker.Parse(`python_version>='3.9' and (sys.platform == 'linux' or extra == 'Win_Support')`)
	if err != nil {
		panic(err)
	}
	env, err := marker.NewEnv(map[string]string{"python_version": "3.12", "sys_platform": "darwin"})
	if err != nil {
		panic(err)
	}
	plain, _ := m.Evaluate(env)
	withExtra, _ := m.Evaluate(env.WithExtra("win-support"))
	fmt.Println(m)
	fmt.Println(plain, withExtra)
	// Output:
	// python_version >= "3.9" and (sys_platform == "linux" or extra == "win-support")
	// false true
}
