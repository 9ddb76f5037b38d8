package main

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeHeapBytes is how much of the heap hugeHeap asks to have backed by
// transparent huge pages: more than a cold create of the bench's large
// corpus touches, and only address space until something is allocated in
// it (each 2 MiB is backed when first touched).
const hugeHeapBytes = 64 << 20

// hugeHeap asks the kernel to back the start of the Go heap with
// transparent huge pages, for the commands that build a tree (env create,
// install, image build). Those touch ~37 MiB of fresh heap, and the Go
// runtime maps its heap without MADV_HUGEPAGE, so with the kernel's default
// THP mode ("madvise") each 4 KiB page is a fault of its own: ~9,200 faults
// in a cold create of the bench's medium corpus (2,100 with this), at
// ~11 µs a fault on this machine's VM (100 ms, 15% of the command's own
// CPU), where a 2 MiB page is one fault. It allocates one large object,
// which the runtime places in fresh, untouched address space at the start
// of its heap, marks its range MADV_HUGEPAGE (a hint: it changes no byte
// and fails harmlessly where THP is off), and lets it go: the next
// allocations reuse that range. Measured
// by scripts/cold-ab.sh with GODEBUG=disablethp=1 on one side
// (docs/seal.md, "Tricks"); GODEBUG=disablethp=1, the Go runtime's own
// switch for huge pages, turns it off, and the compile processes' malloc
// tuning with it (materialize.Request.PlainMalloc). It returns the start
// of the range it marked (0 when off), for its test.
func hugeHeap() uintptr {
	if hugePagesOff() {
		return 0
	}
	b := make([]byte, hugeHeapBytes)
	if unix.Madvise(b, unix.MADV_HUGEPAGE) != nil {
		return 0
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	runtime.KeepAlive(b)
	b = nil
	runtime.GC()
	return start
}
