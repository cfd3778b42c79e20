package bench

import (
	"math"
	"testing"
	"time"
)

func TestLoadParsing(t *testing.T) {
	a, err := parseCPUTimes([]byte("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseCPUTimes([]byte("cpu  200 0 100 1500 100 0 0 100 7 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Over the interval: 100+50+700+50+100 = 1000 jiffies, idle 750,
	// steal 100: busy 25 %, steal 10 %.
	l := loadBetween(a, b, time.Now(), time.Second)
	if math.Abs(l.BusyPct-25) > 1e-9 || math.Abs(l.StealPct-10) > 1e-9 || l.Interval != 1 {
		t.Errorf("%+v, want busy 25 %%, steal 10 %%", l)
	}
	if _, err := parseCPUTimes([]byte("intr 1 2\n")); err == nil {
		t.Error("no cpu line accepted")
	}
	if _, err := parseCPUTimes([]byte("cpu 1 x 3 4\n")); err == nil {
		t.Error("bad number accepted")
	}
	l1, l5, l15, err := parseLoadAvg([]byte("0.52 1.25 2.00 3/456 789\n"))
	if err != nil || l1 != 0.52 || l5 != 1.25 || l15 != 2 {
		t.Errorf("loadavg: %v %v %v %v", l1, l5, l15, err)
	}
	if _, _, _, err := parseLoadAvg([]byte("0.5")); err == nil {
		t.Error("short loadavg accepted")
	}
	if l := SampleLoad(10 * time.Millisecond); l == nil || l.Interval <= 0 || l.BusyPct < 0 || l.BusyPct > 100 {
		t.Errorf("SampleLoad: %+v", l)
	}
}
