// Package materialize owns the local backend of DESIGN §7: building a
// Python environment for an explicit platform and interpreter without
// running Python's venv module or pip. It probes the interpreter once
// (ProbeInterpreter), lays out the venv in Go, installs every wheel of a
// Resolution in parallel per the wheel spec (RECORD checked while
// extracting, .data schemes, console and gui scripts, shebang rewriting,
// INSTALLER, a regenerated RECORD, install_conflict on two wheels writing
// one path with different bytes), compiles bytecode with the env's own
// interpreter (unchecked-hash, reproducible), and seals the result into
// $HOME/envs/<materialization digest hex> through a staging directory, a
// flock per digest and a rename (Create).
//
// The seal and stat index formats and verification live in the
// package seal, which an executor imports alone.
//
// It does not resolve locks (lockfile/), fetch wheels (fetch/), parse
// wheels (wheel/), or decide which env an accepted pin names (the
// pin-level verify does). It never prints; progress goes through an
// events callback.
package materialize
