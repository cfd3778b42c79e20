package ipfctl

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/syslog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"sluice/internal/bpf"
	"sluice/internal/rules/ipf"
)

// A confirm-or-roll-back load (ipf -W N ... then ipf -C) works without a
// daemon that must already run:
//
//  1. Under the lock, after the command line is planned (so it is known
//     to be good), ipf starts a detached watchdog (this same program,
//     re-executed in a session of its own with WatchdogEnv set) and hands
//     it, on a pipe, the rule sets as they were and a random token. The
//     watchdog keeps them in memory only.
//  2. ipf writes the token into the datapath's config (bpf Token) and
//     applies the command line.
//  3. ipf -C clears the token. The watchdog polls it; when it changes it
//     exits. When the time is up and the token is still its own, it takes
//     the lock and loads the saved sets back (or removes the datapath if
//     none was loaded before), then clears the token.
//
// A later -W load replaces the token, so the earlier watchdog leaves
// without restoring anything; ipf -D removes the token with the datapath.

// watchdogSpec is what the watchdog reads on its standard input.
type watchdogSpec struct {
	Token    uint64
	Deadline time.Time
	PinDir   string
	PoolDir  string
	// Loaded tells whether a datapath was loaded before the load; if not,
	// rolling back removes it.
	Loaded bool
	// Sets are the printed rules of the active and the inactive set
	// before the load.
	Sets [2][]string
}

// armRollback starts the watchdog for this transaction and makes commit
// write the token first (if a datapath is loaded) and last.
func (t *tx) armRollback(within time.Duration) error {
	spec := &watchdogSpec{
		Deadline: time.Now().Add(within),
		PinDir:   t.k.dir,
		PoolDir:  t.k.poolStore().Dir(),
		Loaded:   t.d != nil,
	}
	if t.d != nil {
		for _, s := range []Set{SetActive, SetInactive} {
			if err := t.readOrig(s); err != nil {
				return err
			}
			for _, r := range t.orig[s].rules {
				spec.Sets[s] = append(spec.Sets[s], ipf.FormatRule(r))
			}
		}
	}
	var b [8]byte
	for spec.Token == 0 {
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		spec.Token = binary.LittleEndian.Uint64(b[:])
	}
	start := t.k.watchdog
	if start == nil {
		start = startWatchdog
	}
	if err := start(spec); err != nil {
		return fmt.Errorf("starting the rollback watchdog: %w", err)
	}
	t.token = spec.Token
	setToken := func([]Result) error {
		d, err := t.live()
		if err != nil || d == nil {
			return err
		}
		return d.SetToken(spec.Token)
	}
	// first (when loaded), after every load of the datapath (flushSets),
	// and last
	t.steps = append(append([]func([]Result) error{setToken}, t.steps...), setToken)
	return nil
}

// startWatchdog re-executes this program as the watchdog, detached from
// the terminal and the session (so a dropped SSH connection does not take
// it down), and waits until it has read the spec.
func startWatchdog(spec *watchdogSpec) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	in, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer in.Close()
	defer inW.Close()
	ackR, ack, err := os.Pipe()
	if err != nil {
		return err
	}
	defer ackR.Close()
	defer ack.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), WatchdogEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, ack, null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	in.Close()
	ack.Close()
	if err := json.NewEncoder(inW).Encode(spec); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return err
	}
	inW.Close()
	ackR.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(ackR).ReadString('\n')
	if err != nil || line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("no answer from %s (%q): %v", exe, line, err)
	}
	// it lives on by itself; nothing waits for it
	return cmd.Process.Release()
}

// RunWatchdog is the watchdog process (see armRollback): it reads the spec
// from stdin, answers "ready" on ack (and closes it when it can), then
// waits for the confirmation or the deadline. It returns the exit status.
func RunWatchdog(stdin io.Reader, ack io.Writer) int {
	var spec watchdogSpec
	if err := json.NewDecoder(stdin).Decode(&spec); err != nil {
		fmt.Fprintf(ack, "bad spec: %v\n", err)
		return 2
	}
	fmt.Fprint(ack, "ready\n")
	if c, ok := ack.(io.Closer); ok {
		c.Close()
	}
	restored, err := watch(&spec, 500*time.Millisecond)
	if err != nil || restored {
		logRollback(&spec, err)
	}
	if err != nil {
		return 1
	}
	return 0
}

// watch polls the token until the deadline and restores the saved sets if
// it is still there; restored reports whether it did.
func watch(spec *watchdogSpec, poll time.Duration) (restored bool, err error) {
	k := NewKernelWithPools(spec.PinDir, spec.PoolDir)
	defer k.Close()
	// the token is written while ipf applies the load (for a first load,
	// only once the datapath exists): leave early only when it was seen
	// and then changed (confirmed, or replaced by a later -W load)
	seen := false
	for {
		wait := time.Until(spec.Deadline)
		if wait <= 0 {
			break
		}
		time.Sleep(min(wait, poll))
		mine := k.tokenIs(spec.Token)
		if seen && !mine {
			return false, nil
		}
		seen = seen || mine
	}
	return k.rollback(spec)
}

// tokenIs reports whether the datapath still carries token (false when it
// is gone or cannot be read).
func (b *Kernel) tokenIs(token uint64) bool {
	d, err := bpf.OpenPinned(b.dir)
	if err != nil {
		return false
	}
	defer d.Close()
	return d.Token() == token
}

// rollback puts the saved sets back if the token is still the spec's.
func (b *Kernel) rollback(spec *watchdogSpec) (bool, error) {
	unlock, err := lockTx(b.dir, true, false)
	if err != nil {
		return false, err
	}
	defer unlock()
	defer b.Close()
	d, err := b.openIfLoaded()
	if err != nil || d == nil || d.Token() != spec.Token {
		return false, err
	}
	if !spec.Loaded {
		b.Close()
		return true, Remove(b.dir)
	}
	t, err := b.newTx()
	if err != nil {
		return false, err
	}
	defer t.close()
	for _, s := range []Set{SetActive, SetInactive} {
		var rules []*ipf.Rule
		if len(spec.Sets[s]) > 0 {
			src := ""
			for _, r := range spec.Sets[s] {
				src += r + "\n"
			}
			rules, err = ipf.Parse("(saved "+s.String()+" set)", []byte(src), ipf.ParseOptions{NoResolve: true})
			if err != nil {
				return false, err
			}
		}
		t.set(s, rules)
	}
	if err := t.flushSets(); err != nil {
		return false, err
	}
	if _, err := t.commit(); err != nil {
		return false, err
	}
	if d, err := b.open(); err == nil {
		return true, d.SetToken(0)
	}
	return true, nil
}

// logRollback tells syslog (the journal) what the watchdog did: it has no
// terminal to print on.
func logRollback(spec *watchdogSpec, err error) {
	w, serr := syslog.New(syslog.LOG_WARNING|syslog.LOG_AUTHPRIV, "ipf")
	if serr != nil {
		return
	}
	defer w.Close()
	if err != nil {
		w.Err(fmt.Sprintf("rolling back the unconfirmed load in %s failed: %v", spec.PinDir, err))
		return
	}
	w.Warning(fmt.Sprintf("load in %s not confirmed (ipf -C) in time: previous rule sets restored", spec.PinDir))
}

// Confirm implements Backend: it keeps the rules of a load made with
// ConfirmWithin by clearing the token its watchdog watches.
func (b *Kernel) Confirm() error {
	unlock, err := lockTx(b.dir, true, false)
	if err != nil {
		return err
	}
	defer unlock()
	defer b.Close()
	d, err := b.openIfLoaded()
	if err != nil {
		return err
	}
	if d == nil || d.Token() == 0 {
		return ErrNotConfirmable
	}
	return d.SetToken(0)
}
