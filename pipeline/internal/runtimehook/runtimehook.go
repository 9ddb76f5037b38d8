// Package runtimehook holds the switch of pipeline.RequireRuntime that
// only tests turn: pipeline/pipelinetest sets it (WithoutRuntimeCheck),
// and no command links that package, so a cruxprov binary never installs
// or builds with it set.
//
// It owns nothing else, and it is internal to pipeline: no package outside
// pipeline/ can import it.
package runtimehook

import "sync/atomic"

// NoRuntimeCheck, set, lets install and image build take a provider whose
// lock resolves no runtime (cruxible-provider-runtime), which
// pipeline.RequireRuntime refuses runtime_missing otherwise: a pin or an
// image such as an older cruxprov, or another tool, made, whose refusal at
// run a test needs to exercise.
var NoRuntimeCheck atomic.Bool
