package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"sluice/internal/bench/result"
)

// cpuTimes are the aggregate CPU counters of /proc/stat (jiffies).
type cpuTimes struct{ total, idle, steal uint64 }

func readCPUTimes() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	return parseCPUTimes(b)
}

// parseCPUTimes reads the "cpu" line: user nice system idle iowait irq
// softirq steal guest guest_nice. Guest time is already counted in user
// and nice, so it is not added again.
func parseCPUTimes(stat []byte) (cpuTimes, error) {
	for _, line := range bytes.Split(stat, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		var v [8]uint64
		for i := 0; i < len(v) && i+1 < len(f); i++ {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return cpuTimes{}, fmt.Errorf("/proc/stat: %q: %w", f[i+1], err)
			}
			v[i] = n
		}
		var t cpuTimes
		for _, x := range v {
			t.total += x
		}
		t.idle = v[3] + v[4]
		t.steal = v[7]
		return t, nil
	}
	return cpuTimes{}, fmt.Errorf("/proc/stat: no cpu line")
}

func readLoadAvg() (l1, l5, l15 float64, err error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, 0, 0, err
	}
	return parseLoadAvg(b)
}

func parseLoadAvg(b []byte) (l1, l5, l15 float64, err error) {
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, 0, 0, fmt.Errorf("/proc/loadavg: %q", b)
	}
	var v [3]float64
	for i := range v {
		if v[i], err = strconv.ParseFloat(f[i], 64); err != nil {
			return 0, 0, 0, fmt.Errorf("/proc/loadavg: %w", err)
		}
	}
	return v[0], v[1], v[2], nil
}

// loadBetween fills a Load from two CPU samples and the load averages.
func loadBetween(a, b cpuTimes, at time.Time, interval time.Duration) *result.Load {
	l := &result.Load{Time: at, Interval: interval.Seconds()}
	l.Load1, l.Load5, l.Load15, _ = readLoadAvg()
	if d := float64(b.total - a.total); b.total > a.total {
		l.StealPct = 100 * float64(b.steal-a.steal) / d
		l.BusyPct = 100 * (1 - float64(b.idle-a.idle)/d)
	}
	return l
}

// SampleLoad measures the machine's load over window: the load
// averages at its end, the steal and busy shares over it.
func SampleLoad(window time.Duration) *result.Load {
	a, err := readCPUTimes()
	if err != nil {
		return nil
	}
	time.Sleep(window)
	b, err := readCPUTimes()
	if err != nil {
		return nil
	}
	return loadBetween(a, b, time.Now(), window)
}

// loadMonitor follows the load during a run: steal and busy over the
// whole run, the highest 1-minute load average seen (sampled every
// period).
type loadMonitor struct {
	start  time.Time
	first  cpuTimes
	ok     bool
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex // guards max
	max    float64
	period time.Duration
}

func startLoadMonitor(period time.Duration) *loadMonitor {
	m := &loadMonitor{start: time.Now(), stop: make(chan struct{}), period: period}
	m.first, _ = readCPUTimes()
	m.ok = m.first.total > 0
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				if l1, _, _, err := readLoadAvg(); err == nil {
					m.mu.Lock()
					m.max = max(m.max, l1)
					m.mu.Unlock()
				}
			}
		}
	}()
	return m
}

// finish stops the sampler and returns the load over the run.
func (m *loadMonitor) finish() *result.Load {
	close(m.stop)
	m.wg.Wait()
	if !m.ok {
		return nil
	}
	b, err := readCPUTimes()
	if err != nil {
		return nil
	}
	l := loadBetween(m.first, b, time.Now(), time.Since(m.start))
	m.mu.Lock()
	l.MaxLoad1 = max(m.max, l.Load1)
	m.mu.Unlock()
	return l
}
