// Package cpu measures CPU utilisation the way netperf's netcpu_procstat.c
// does: the ten tick counters of every cpuN line of /proc/stat are sampled at
// the start and at the end of the data phase.
package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
)

// Field indexes within a cpuN line.
const (
	User = iota
	Nice
	System
	Idle
	IOWait
	IRQ
	SoftIRQ
	Steal
	Guest
	GuestNice
	NumFields
)

// Ticks is one CPU's counters.
type Ticks [NumFields]uint64

// Sample is a snapshot of every CPU.
type Sample []Ticks

// Read samples /proc/stat.
func Read() (Sample, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil, fmt.Errorf("sampling cpu: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads the cpuN lines of a /proc/stat image. Missing trailing fields
// (older kernels) read as zero.
func Parse(r io.Reader) (Sample, error) {
	var s Sample
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("cpu")) || len(line) < 4 || line[3] < '0' || line[3] > '9' {
			continue
		}
		fields := bytes.Fields(line)[1:]
		var t Ticks
		for i := 0; i < len(fields) && i < NumFields; i++ {
			v, err := strconv.ParseUint(string(fields[i]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parsing /proc/stat %q: %w", line, err)
			}
			t[i] = v
		}
		s = append(s, t)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("parsing /proc/stat: no cpuN lines")
	}
	return s, nil
}

// Util is the utilisation between two samples, in percent.
type Util struct {
	Util, User, System, IOWait, IRQ, SoftIRQ float64
	PeakID                                   int
	Peak                                     float64
	NumCPUs                                  int
}

// Compute returns the mean per-CPU utilisation between start and end, scaled
// by cf (wall time / elapsed, normally 1) as netperf does.
func Compute(start, end Sample, cf float64) Util {
	n := min(len(start), len(end))
	u := Util{NumCPUs: n}
	if n == 0 {
		return u
	}
	for i := range n {
		var d Ticks
		var total uint64
		for f := range NumFields {
			if end[i][f] >= start[i][f] {
				d[f] = end[i][f] - start[i][f]
			}
			total += d[f]
		}
		if total == 0 {
			continue
		}
		pct := func(f int) float64 { return 100 * float64(d[f]) / float64(total) }
		ui := 100 - pct(Idle)
		u.Util += ui
		u.User += pct(User)
		u.System += pct(System)
		u.IOWait += pct(IOWait)
		u.IRQ += pct(IRQ)
		u.SoftIRQ += pct(SoftIRQ)
		if ui > u.Peak {
			u.Peak, u.PeakID = ui, i
		}
	}
	k := cf / float64(n)
	u.Util *= k
	u.User *= k
	u.System *= k
	u.IOWait *= k
	u.IRQ *= k
	u.SoftIRQ *= k
	return u
}

// ServiceDemand returns netperf's service demand: util% × 10^4 / rate ×
// ncpus, where rate is KB/s (1024) for streams (giving us/KB) or trans/s for
// RR tests (giving us/Tr).
func ServiceDemand(utilPct, rate float64, ncpus int) float64 {
	if rate <= 0 {
		return 0
	}
	return utilPct * 1e4 / rate * float64(ncpus)
}
