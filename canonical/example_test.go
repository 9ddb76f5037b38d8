package canonical

import "fmt"

func ExampleTransform() {
	out, err := Transform([]byte(`{"b": 1E3, "a": [0.50, -0, "\u00e9\n"]}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output: {"a":[0.5,0,"é\n"],"b":1000}
}
