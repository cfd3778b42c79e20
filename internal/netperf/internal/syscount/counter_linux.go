//go:build linux

package syscount

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Counter counts a running process's system calls and context
// switches with perf stat -p: the kernel's raw_syscalls:sys_enter
// tracepoint, no ptrace, so the process runs at nearly its own speed.
// The events are created disabled and enabled through perf's control
// pipe, so the count covers exactly the span between start and stop.
type Counter struct {
	cmd      *exec.Cmd
	ctl      *os.File // perf reads commands from it
	ack      *bufio.Reader
	ackFile  *os.File
	out      string
	finished bool
}

// Available reports whether perf can count the syscall tracepoint (and
// the extra events given).
func Available(extra ...string) error {
	evs := strings.Join(append([]string{events}, extra...), ",")
	out, err := exec.Command("perf", "stat", "-x,", "-e", evs, "--", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("perf stat -e %s: %v: %s", evs, err, strings.TrimSpace(string(out)))
	}
	if _, err := ParseCSV(string(out)); err != nil {
		return err
	}
	return nil
}

// Attach starts perf stat on pid (all its threads, and the ones they
// start) with its events disabled; dir holds perf's output.
func Attach(pid int, dir string) (*Counter, error) {
	return AttachEvents(pid, dir)
}

// AttachEvents is Attach counting these perf events too (tracepoints such
// as syscalls:sys_enter_nanosleep), reported under their names.
func AttachEvents(pid int, dir string, extra ...string) (*Counter, error) {
	evs := strings.Join(append([]string{events}, extra...), ",")
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
	cmd := exec.Command("perf", "stat", "-x,", "-o", out, "-e", evs, "-D", "-1", "--control", "fd:3,4", "-p", strconv.Itoa(pid))
	cmd.ExtraFiles = []*os.File{ctlR, ackW}
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{ctlR, ctlW, ackR, ackW} {
			f.Close()
		}
		return nil, err
	}
	ctlR.Close()
	ackW.Close()
	return &Counter{cmd: cmd, ctl: ctlW, ack: bufio.NewReader(ackR), ackFile: ackR, out: out}, nil
}

// command sends perf a control command and waits for its acknowledgement.
func (c *Counter) command(what string) error {
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

// Start enables the events.
func (c *Counter) Start() error { return c.command("enable") }

// Stop disables the events, ends perf and returns its counts.
func (c *Counter) Stop() (Counts, error) {
	err := c.command("disable")
	c.Close()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(c.out)
	if err != nil {
		return nil, err
	}
	return ParseCSV(string(b))
}

// Close ends perf (SIGINT makes it write its counts) and waits for it.
func (c *Counter) Close() {
	if c.finished {
		return
	}
	c.finished = true
	_ = c.cmd.Process.Signal(os.Interrupt)
	_ = c.cmd.Wait()
	c.ctl.Close()
	c.ackFile.Close()
}
