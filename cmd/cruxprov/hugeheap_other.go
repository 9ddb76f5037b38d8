//go:build !linux

package main

// hugeHeap does nothing here: the hint it gives is Linux's (hugeheap_linux.go).
func hugeHeap() uintptr { return 0 }
