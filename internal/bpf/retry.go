package bpf

import "time"

// armTries and armPause bound how often a load tries to start the state
// sweeper's timer. bpf_timer_init takes its memory with kmalloc_nolock from
// Linux 6.18, which gives up (ENOMEM) where a sleeping allocation would
// wait: nat18 saw it fail for single sessions and in bursts of about a
// second (docs/datapath-cost.md, "A session that outlived its lifetime").
// A load is not failed for one such refusal; a sweeper that cannot be
// started after about 1.5 s still fails it (a table nothing reclaims would
// fill, and the previous rules stay in force).
const (
	armTries = 6
	armPause = 100 * time.Millisecond
)

// retry calls f until it succeeds or has been called tries times, sleeping
// (through sleep, for tests) i*pause before the i-th repetition; it
// returns f's last error.
func retry(tries int, pause time.Duration, sleep func(time.Duration), f func() error) error {
	var err error
	for i := 0; i < tries; i++ {
		if i > 0 {
			sleep(time.Duration(i) * pause)
		}
		if err = f(); err == nil {
			return nil
		}
	}
	return err
}

// RetryArm calls f (which starts a sweeper's timer) as a load starts the
// filter's sweeper: up to armTries times, armPause apart and growing. The
// NAT datapath starts its own sweeper with it.
func RetryArm(f func() error) error { return retry(armTries, armPause, time.Sleep, f) }
