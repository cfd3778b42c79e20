package bpf

import (
	"errors"
	"testing"
	"time"
)

func TestRetry(t *testing.T) {
	errNoMem := errors.New("cannot allocate memory")
	for _, c := range []struct {
		fails     int // f fails this many times, then succeeds
		wantCalls int
		wantErr   bool
		wantSlept time.Duration
	}{
		{0, 1, false, 0},
		{1, 2, false, armPause},
		{armTries - 1, armTries, false, armPause * time.Duration(armTries*(armTries-1)/2)},
		{armTries, armTries, true, armPause * time.Duration(armTries*(armTries-1)/2)},
		{100, armTries, true, armPause * time.Duration(armTries*(armTries-1)/2)},
	} {
		calls := 0
		var slept time.Duration
		err := retry(armTries, armPause, func(d time.Duration) { slept += d }, func() error {
			calls++
			if calls <= c.fails {
				return errNoMem
			}
			return nil
		})
		if calls != c.wantCalls || (err != nil) != c.wantErr || slept != c.wantSlept {
			t.Errorf("failing %d times: %d calls, err %v, slept %v; want %d calls, error %v, %v",
				c.fails, calls, err, slept, c.wantCalls, c.wantErr, c.wantSlept)
		}
		if c.wantErr && !errors.Is(err, errNoMem) {
			t.Errorf("failing %d times: error %v, want f's own", c.fails, err)
		}
	}
}
