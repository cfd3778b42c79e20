package syscount

import (
	"os"
	"syscall"
	"testing"

	"sluice/internal/testutil"
)

func TestParseCSV(t *testing.T) {
	good := "# started on Tue Dec  1 23:57:44 2026\n\n98340,,raw_syscalls:sys_enter,478111830,100.00,,\n49365,,context-switches,478111830,100.00,,\nEvents disabled\n"
	got, err := ParseCSV(good)
	if err != nil {
		t.Fatal(err)
	}
	if got["raw_syscalls:sys_enter"] != 98340 || got["context-switches"] != 49365 || len(got) != 2 {
		t.Errorf("got %v", got)
	}
	for _, bad := range []string{
		"",
		"# only a comment\n",
		"<not supported>,,raw_syscalls:sys_enter,0,100.00,,\n",
		"<not counted>,,context-switches,0,0.00,,\n",
		"12x,,context-switches,1,100.00,,\n",
	} {
		if got, err := ParseCSV(bad); err == nil {
			t.Errorf("%q: got %v, want an error", bad, got)
		}
	}
}

// TestAttach counts this process's own system calls with perf
// stat -p between start and stop: at least the getppid calls made in
// between, and not wildly more (the runtime's own calls meanwhile). It
// needs perf (linux-perf), which the measurement needs too.
func TestAttach(t *testing.T) {
	if err := Available(); err != nil {
		testutil.SkipOrFail(t, "no perf to count with (CI installs linux-perf): %v", err)
	}
	c, err := Attach(os.Getpid(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Calls before start must not count.
	for range 5000 {
		syscall.Getppid()
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for range n {
		syscall.Getppid()
	}
	counts, err := c.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if got := counts.Syscalls(); got < n || got > n+1500 {
		t.Errorf("%d getppid calls counted as %d system calls", n, got)
	}
	if _, ok := counts[SwitchEvent]; !ok {
		t.Errorf("no context switch count in %v", counts)
	}
}
