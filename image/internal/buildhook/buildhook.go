// Package buildhook holds the switch of image.Build that only tests turn:
// image/imagetest sets it (WithoutRuntimeCheck), and no command links
// that package, so a cruxprov binary never builds with it set.
//
// It owns nothing else, and it is internal to image: no package outside
// image/ can import it.
package buildhook

import "sync/atomic"

// NoRuntimeCheck, set, lets image.Build make the image of a provider
// whose lock resolves no runtime (cruxible-provider-runtime), which it
// refuses runtime_missing otherwise: an image such as an older cruxprov,
// or another tool, made, whose refusal at run (pinned/container) a test
// needs to exercise.
var NoRuntimeCheck atomic.Bool
