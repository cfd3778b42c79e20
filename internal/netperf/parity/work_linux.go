package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// procCtx returns the voluntary and involuntary context switches of every
// live thread of pid, from /proc/PID/task/*/status: the server's
// counterpart of the client's rusage. Threads that exited are not in it;
// the servers' threads live as long as the server.
func procCtx(pid int) (vol, invol int64, err error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil {
		return 0, 0, err
	}
	if len(tasks) == 0 {
		return 0, 0, fmt.Errorf("no process %d", pid)
	}
	for _, path := range tasks {
		f, err := os.Open(path)
		if err != nil {
			continue // the thread exited meanwhile
		}
		v, i := parseCtx(f)
		f.Close()
		vol, invol = vol+v, invol+i
	}
	return vol, invol, nil
}

// parseCtx reads the two context switch counts of a /proc status file.
func parseCtx(f *os.File) (vol, invol int64) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "voluntary_ctxt_switches":
			vol = n
		case "nonvoluntary_ctxt_switches":
			invol = n
		}
	}
	return vol, invol
}

// setAffinity binds every thread of pid to cpu (threads it starts later
// inherit it from their creator), as taskset -a -p does.
func setAffinity(pid, cpu int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	var set unix.CPUSet
	set.Set(cpu)
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("binding thread %d of %d to CPU %d: %w", tid, pid, cpu, err)
		}
	}
	return nil
}
