package ipf

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

// TestBigFileGC: a rule file over bigFile turns the collector off up to
// a memory limit of 1 GiB plus 40 bytes per byte of the file; a lower
// limit already set (GOMEMLIMIT) stays. A small file changes nothing.
func TestBigFileGC(t *testing.T) {
	pct, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	defer func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
	}()
	restore := func() {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(1 << 62)
	}
	run := func(src string) int {
		c := &Command{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{},
			ReadFile: func(string) ([]byte, error) { return []byte(src), nil }}
		return c.Run([]string{"-n", "-f", "rules.conf"})
	}

	restore()
	if rc := run("pass in all\n"); rc != 0 {
		t.Fatalf("small file: exit %d", rc)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("small file: GOGC %d, want 100", got)
	}

	restore()
	big := strings.Repeat("block in from 198.18.0.1/32 to any\n", bigFile/34+1)
	if rc := run(big); rc != 0 {
		t.Fatalf("big file: exit %d", rc)
	}
	if got := debug.SetGCPercent(100); got != -1 {
		t.Errorf("big file: GOGC %d, want off", got)
	}
	if got, want := debug.SetMemoryLimit(-1), int64(1<<30)+40*int64(len(big)); got != want {
		t.Errorf("big file: memory limit %d, want %d", got, want)
	}

	restore()
	debug.SetMemoryLimit(512 << 20)
	bigFileGC(len(big))
	if got := debug.SetMemoryLimit(-1); got != 512<<20 {
		t.Errorf("a lower limit became %d", got)
	}
}
