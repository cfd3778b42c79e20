package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// attachedCounter counts a running process's system calls and context
// switches with perf stat -p: the kernel's raw_syscalls:sys_enter
// tracepoint, no ptrace, so the process runs at nearly its own speed.
// The events are created disabled and enabled through perf's control
// pipe, so the count covers exactly the span between start and stop.
type attachedCounter struct {
	cmd      *exec.Cmd
	ctl      *os.File // perf reads commands from it
	ack      *bufio.Reader
	ackFile  *os.File
	out      string
	finished bool
}

// perfAvailable reports whether perf can count the syscall tracepoint.
func perfAvailable() error {
	out, err := exec.Command("perf", "stat", "-x,", "-e", perfEvents, "--", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("perf stat -e %s: %v: %s", perfEvents, err, strings.TrimSpace(string(out)))
	}
	if _, err := parsePerfCSV(string(out)); err != nil {
		return err
	}
	return nil
}

// attachCounter starts perf stat on pid with its events disabled.
func attachCounter(pid int, dir string) (*attachedCounter, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ackR, ackW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	out := filepath.Join(dir, fmt.Sprintf("perf-%d.csv", pid))
	cmd := exec.Command("perf", "stat", "-x,", "-o", out, "-e", perfEvents, "-D", "-1", "--control", "fd:3,4", "-p", strconv.Itoa(pid))
	cmd.ExtraFiles = []*os.File{ctlR, ackW}
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{ctlR, ctlW, ackR, ackW} {
			f.Close()
		}
		return nil, err
	}
	ctlR.Close()
	ackW.Close()
	return &attachedCounter{cmd: cmd, ctl: ctlW, ack: bufio.NewReader(ackR), ackFile: ackR, out: out}, nil
}

// command sends perf a control command and waits for its acknowledgement.
func (c *attachedCounter) command(what string) error {
	if _, err := c.ctl.WriteString(what + "\n"); err != nil {
		return fmt.Errorf("perf %s: %w", what, err)
	}
	// perf writes "ack\n" with its C string's terminating NUL, which
	// then leads the next acknowledgement.
	line, err := c.ack.ReadString('\n')
	if err != nil || strings.Trim(line, "\x00\n") != "ack" {
		return fmt.Errorf("perf %s: no acknowledgement (%q, %v)", what, line, err)
	}
	return nil
}

func (c *attachedCounter) start() error { return c.command("enable") }

// stop disables the events, ends perf and returns its counts.
func (c *attachedCounter) stop() (map[string]int64, error) {
	err := c.command("disable")
	c.close()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(c.out)
	if err != nil {
		return nil, err
	}
	return parsePerfCSV(string(b))
}

// close ends perf (SIGINT makes it write its counts) and waits for it.
func (c *attachedCounter) close() {
	if c.finished {
		return
	}
	c.finished = true
	_ = c.cmd.Process.Signal(os.Interrupt)
	_ = c.cmd.Wait()
	c.ctl.Close()
	c.ackFile.Close()
}
