package netperf

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// inNetNS runs fn on a goroutine locked to an OS thread that has joined the
// network namespace at path; every socket fn creates on that goroutine lives
// in the namespace. The thread is restored afterwards, or, if restoring
// fails, left locked so the runtime discards it with the goroutine.
func inNetNS(path string, fn func() error) error {
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("netperf: opening netns %s: %w", path, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netperf: current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netperf: entering netns %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// Keep the thread locked: it dies with this goroutine.
			errc <- fmt.Errorf("netperf: restoring netns: %w (test error: %v)", err, ferr)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
