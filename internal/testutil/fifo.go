//go:build unix

package testutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// FIFO makes a named pipe in a temporary directory and writes data into it
// once a reader opens it, then closes it: a rule "file" that has no size
// to check first (the commands' bounded reads). wait returns the writer's
// close error; a reader that stops early makes the rest of the write fail
// with EPIPE, which is not reported.
func FIFO(t *testing.T, data []byte) (path string, wait func() error) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			done <- err
			return
		}
		w.Write(data)
		done <- w.Close()
	}()
	return path, func() error { return <-done }
}
