//go:build unix

package ipmon

import (
	"os"
	"os/exec"
	"syscall"
)

// daemonEnv marks the re-executed child so it does not detach again.
const daemonEnv = "SLUICE_IPMON_DAEMON"

// daemonize implements -D: Go cannot fork, so ipmon re-executes itself in
// a new session with its standard streams on /dev/null and the parent
// returns done = true. In the child it returns done = false.
func daemonize(args []string) (done bool, err error) {
	if os.Getenv(daemonEnv) == "1" {
		return false, nil
	}
	self, err := os.Executable()
	if err != nil {
		return false, err
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	defer null.Close()
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), daemonEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return false, err
	}
	return true, cmd.Process.Release()
}
