package manifest_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/manifest"
	"github.com/cruxible/cruxprov/refusal"
)

// TestEmbedFileOtherNameSaysNoFlag: an output named for another wheel is
// refused saying what to do in words: it said "pass -o DIR", the CLI's
// flag, which a Go caller of EmbedFile has not (the CLI refuses it as a
// usage error first, naming its flag itself). internal/archtest's
// TestLibrariesNameNoCLI checks long flags only.
func TestEmbedFileOtherNameSaysNoFlag(t *testing.T) {
	dir := t.TempDir()
	src := wheeltest.Write(t, dir, "acme_echo-1.0.0-py3-none-any.whl", map[string]string{"acme_echo/__init__.py": ""})
	_, err := manifest.EmbedFile(context.Background(), src, filepath.Join(dir, "acme_echo-2.0.0-py3-none-any.whl"), nil, nil)
	if refusal.CodeOf(err) != refusal.WheelInvalid || !strings.Contains(err.Error(), "write it into a directory to keep the name") || strings.Contains(err.Error(), "-o") {
		t.Fatalf("%v: want wheel_invalid saying to write it into a directory, naming no flag", err)
	}
}
