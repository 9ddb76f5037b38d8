package treehash

import (
	"crypto/sha256"
	"fmt"
)

// Records "D- 0 - empty\x00" and "F- 0 e3b0…b855 lib.txt\x00", hashed in
// path order; printf 'D- 0 - empty\0F- 0 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 lib.txt\0' | sha256sum
// agrees.
func ExampleOf() {
	entries := []Entry{
		{Path: "lib.txt", Kind: File, Size: 0, SHA256: sha256.Sum256(nil)},
		{Path: "empty", Kind: Dir},
	}
	fmt.Println(Of(entries))
	// Output: sha256:0554f37aba034431b17a2f20bfc305cf89413f406060653d1f2043f63af8a424
}
