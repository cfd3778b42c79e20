// Package syscount counts a process's system calls and context switches
// with perf stat: the kernel's raw_syscalls:sys_enter tracepoint, no
// ptrace, so the process runs at nearly its own speed. The parity script
// reports the counts per unit beside CPU per unit, and the netperf tests
// hold the Go data loops to C's calls per message with them.
package syscount

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Counts are perf's counts by event name.
type Counts map[string]int64

// Syscalls is the system calls counted.
func (c Counts) Syscalls() int64 { return c[SyscallEvent] }

// Switches is the context switches counted (voluntary and involuntary).
func (c Counts) Switches() int64 { return c[SwitchEvent] }

// The events counted.
const (
	SyscallEvent = "raw_syscalls:sys_enter"
	SwitchEvent  = "context-switches"
	events       = SyscallEvent + "," + SwitchEvent
)

// ParseCSV reads perf stat -x, output: "value,unit,event,..." per
// line, comments (#) and blank lines skipped. An event perf could not
// count ("<not counted>", "<not supported>") is an error: a missing count
// must not read as zero work.
func ParseCSV(s string) (Counts, error) {
	counts := Counts{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 3 {
			continue // perf's "Events disabled" notes and the like
		}
		ev := f[2]
		if ev == "" {
			continue
		}
		if strings.HasPrefix(f[0], "<") {
			return nil, fmt.Errorf("perf: %s %s", ev, f[0])
		}
		n, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("perf: %s: bad count %q", ev, f[0])
		}
		counts[ev] = int64(n)
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("perf: no counts in %q", s)
	}
	return counts, nil
}

// Prefix is the command line that runs a program under perf stat, its
// events counted from its exec on, the counts written to out (read them
// with ReadFile).
func Prefix(out string) []string {
	return []string{"perf", "stat", "-x,", "-o", out, "-e", events, "--"}
}

// ReadFile parses a perf stat -x, output file.
func ReadFile(path string) (Counts, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseCSV(string(b))
}
