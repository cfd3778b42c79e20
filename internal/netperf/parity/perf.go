package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// parsePerfCSV reads perf stat -x, output: "value,unit,event,..." per
// line, comments (#) and blank lines skipped. An event perf could not
// count ("<not counted>", "<not supported>") is an error: a missing count
// must not read as zero work.
func parsePerfCSV(s string) (map[string]int64, error) {
	counts := map[string]int64{}
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

// perfEvents are what a counted run counts.
const perfEvents = "raw_syscalls:sys_enter,context-switches"

// perfPrefix is the command that runs a client under perf stat, its
// events counted from its exec on; the counts go to out.
func perfPrefix(out string) []string {
	return []string{"perf", "stat", "-x,", "-o", out, "-e", perfEvents, "--"}
}

// readPerfFile parses a perf stat -x, output file.
func readPerfFile(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parsePerfCSV(string(b))
}
