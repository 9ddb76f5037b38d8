package wheel_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/cruxible/cruxprov/wheel"
)

// Write is deterministic: the same entries give the same bytes, so the
// digest below is a known answer (it changes only if the writer does).
func ExampleWrite() {
	var buf bytes.Buffer
	err := wheel.Write(&buf, "hello_world-0.1-py3-none-any.whl", []wheel.Entry{
		{Name: "hello_world/__init__.py", Data: []byte("print('hello')\n")},
		{Name: "hello_world-0.1.dist-info/WHEEL", Data: []byte("Wheel-Version: 1.0\nGenerator: example\nRoot-Is-Purelib: true\nTag: py3-none-any\n")},
		{Name: "hello_world-0.1.dist-info/METADATA", Data: []byte("Metadata-Version: 2.1\nName: hello-world\nVersion: 0.1\n")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("sha256:%x\n", sha256.Sum256(buf.Bytes()))

	w, err := wheel.OpenReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "hello_world-0.1-py3-none-any.whl")
	if err != nil {
		panic(err)
	}
	fmt.Println(w.DistInfo(), w.Verify(context.Background()))
	for _, f := range w.Files() {
		fmt.Println(f.Name, f.Size)
	}
	// Output:
	// sha256:17631503e1f2ec1f7ca9b0487d9b277100cde41f3d7fdcd742ad0275a0487dbc
	// hello_world-0.1.dist-info <nil>
	// hello_world/__init__.py 15
	// hello_world-0.1.dist-info/METADATA 53
	// hello_world-0.1.dist-info/WHEEL 78
	// hello_world-0.1.dist-info/RECORD 288
}
