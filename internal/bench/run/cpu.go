package run

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuTicks is the sum of the ten tick fields of /proc/stat's "cpu" line
// and its idle part (idle + iowait, as netperf counts them).
type cpuTicks struct{ total, idle uint64 }

func readCPU() (cpuTicks, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}, err
	}
	return parseCPU(b)
}

func parseCPU(b []byte) (cpuTicks, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		var t cpuTicks
		for i, s := range f[1:] {
			if i == 10 {
				break
			}
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return cpuTicks{}, fmt.Errorf("/proc/stat: field %d: %w", i+1, err)
			}
			t.total += v
			if i == 3 || i == 4 { // idle, iowait
				t.idle += v
			}
		}
		return t, nil
	}
	return cpuTicks{}, fmt.Errorf("/proc/stat: no cpu line")
}

// utilisation returns the mean CPU utilisation in % between two samples.
func utilisation(a, b cpuTicks) float64 {
	dt := float64(b.total - a.total)
	if b.total <= a.total {
		return 0
	}
	return 100 * (1 - float64(b.idle-a.idle)/dt)
}

// serviceDemand is netperf's: util% · 10^4 / rate · ncpus, where rate is
// KB/s (us/KB) for streams and Trans/s (us/Tr) for RR tests.
func serviceDemand(utilPct, rate float64, ncpus int) float64 {
	if rate <= 0 {
		return 0
	}
	return utilPct * 1e4 / rate * float64(ncpus)
}
