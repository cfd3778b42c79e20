//go:build unix

package rulefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/testutil"
)

// TestRead: under the bound a file, stdin and a FIFO are read whole; over
// it each fails, naming the source, the FIFO (no size) at the bound.
func TestRead(t *testing.T) {
	const max = 1 << 10
	small, big := strings.Repeat("a", max), strings.Repeat("b", max+1)
	dir := t.TempDir()
	for _, c := range []struct{ name, text string }{{"small", small}, {"big", big}} {
		if err := os.WriteFile(filepath.Join(dir, c.name), []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := Read(filepath.Join(dir, "small"), nil, max); err != nil || string(b) != small {
		t.Errorf("file at the bound: %d bytes, %v", len(b), err)
	}
	if _, err := Read(filepath.Join(dir, "big"), nil, max); err == nil || !strings.Contains(err.Error(), "big: 1025 bytes, more than 0 MiB") {
		t.Errorf("file over the bound: %v", err)
	}
	if b, err := Read("-", strings.NewReader(small), max); err != nil || string(b) != small {
		t.Errorf("stdin at the bound: %d bytes, %v", len(b), err)
	}
	if _, err := Read("-", strings.NewReader(big), max); err == nil || !strings.HasPrefix(err.Error(), "(stdin): more than") {
		t.Errorf("stdin over the bound: %v", err)
	}
	fifo, wait := testutil.FIFO(t, []byte(strings.Repeat(big, 4)))
	_, err := Read(fifo, nil, max)
	wait()
	if err == nil || !strings.Contains(err.Error(), "fifo: more than") {
		t.Errorf("endless FIFO: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "none"), nil, max); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}
