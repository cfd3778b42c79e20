package netperf

import (
	"runtime"
	"testing"
	"time"
)

// TestYielderStride: quick calls read the clock every 16th time, slow
// ones every time, so a loop of slow calls still yields within the
// runtime's 10 ms.
func TestYielderStride(t *testing.T) {
	var y yielder
	y.tick()
	if y.every != 1 {
		t.Fatalf("first check: stride %d, want 1", y.every)
	}
	quick := false
	for range 10_000 {
		y.tick()
		if y.every == 16 {
			quick = true
			break
		}
	}
	if !quick {
		t.Fatal("back-to-back calls never moved the stride to 16")
	}
	for range 16 {
		time.Sleep(yieldEvery / 4)
		y.tick()
	}
	if y.every != 1 {
		t.Errorf("calls %v apart: stride %d, want 1", yieldEvery/4, y.every)
	}
	if since := time.Since(y.yielded); since > 2*yieldEvery {
		t.Errorf("last yield %v ago after 16 calls %v apart", since, yieldEvery/4)
	}
}

// TestYielderRate: a loop of quick calls yields once per yieldEvery, not
// more (each yield wakes an idle runtime thread, work C netperf does not
// do), and not less (the runtime's monitor would preempt the loop after
// 10 ms).
func TestYielderRate(t *testing.T) {
	var y yielder
	start := time.Now()
	for time.Since(start) < 20*yieldEvery {
		y.tick()
	}
	elapsed := time.Since(start)
	if most := uint64(elapsed/yieldEvery) + 1; y.yields > most {
		t.Errorf("%d yields in %v, want at most %d", y.yields, elapsed, most)
	}
	// A loaded machine can stretch the gaps; it cannot remove them all.
	if y.yields < 2 {
		t.Errorf("%d yields in %v", y.yields, elapsed)
	}
}

func TestSpareProc(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(1)
	SpareProc()
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Errorf("GOMAXPROCS 1 became %d, want 2", n)
	}
	runtime.GOMAXPROCS(3)
	SpareProc()
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Errorf("GOMAXPROCS 3 became %d, want it left alone", n)
	}
}
