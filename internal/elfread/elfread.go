// Package elfread reads the few facts cruxprov takes from an ELF file
// (its type and machine, the loader its PT_INTERP names, its run paths)
// from a file it did not write: a host interpreter, its extension
// modules, a cruxshim given on the command line. debug/elf is not
// hardened against malformed input (its documentation: it may panic or
// allocate what a header claims); Read bounds what it takes and turns a
// panic of debug/elf into an error, so a damaged or hostile file is "not
// an ELF file this reads", never a crash.
package elfread

import (
	"debug/elf"
	"fmt"
	"io"
	"strings"
)

// MaxInterp bounds a PT_INTERP's size (PATH_MAX): a larger one names no
// loader.
const MaxInterp = 4096

// Info is what Read takes from an ELF file.
type Info struct {
	Type    elf.Type
	Machine elf.Machine
	// Dynamic: the file has a PT_INTERP program header; Interp is the
	// loader it names (its NULs trimmed), "" when it is longer than
	// MaxInterp (no loader's name).
	Dynamic bool
	Interp  string
	// Runpaths are the DT_RUNPATH then DT_RPATH strings, as written
	// (colon-separated lists), when Options.Runpaths asked for them.
	Runpaths []string
}

// Options says what Read reads beyond the header and program headers.
type Options struct {
	Runpaths bool
}

// Read parses the ELF file r. An error says r is not an ELF file Read can
// read (a panic of debug/elf is one).
func Read(r io.ReaderAt, o Options) (info Info, err error) {
	defer func() {
		if p := recover(); p != nil {
			info, err = Info{}, fmt.Errorf("elf: malformed file (%v)", p)
		}
	}()
	f, err := elf.NewFile(r)
	if err != nil {
		return Info{}, err
	}
	info = Info{Type: f.Type, Machine: f.Machine}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		info.Dynamic = true
		if p.Filesz > MaxInterp {
			break
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return Info{}, fmt.Errorf("elf: PT_INTERP: %w", err)
		}
		info.Interp = strings.TrimRight(string(b), "\x00")
		break
	}
	if o.Runpaths {
		for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
			if v, err := f.DynString(tag); err == nil {
				info.Runpaths = append(info.Runpaths, v...)
			}
		}
	}
	return info, nil
}
