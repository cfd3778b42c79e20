package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The environment variables that move the kernel datapaths' pins and the
// ippool store away from their defaults (ipfctl.PinDirEnv, QoSDirEnv and
// PoolDirEnv, repeated here because ipfctl's own tests import this
// package; TestOfflineEnvNames in ipfctl checks they agree).
const (
	EnvBPFDir  = "SLUICE_BPF_DIR"
	EnvQoSDir  = "SLUICE_QOS_DIR"
	EnvPoolDir = "SLUICE_POOL_DIR"
)

// OfflineEnv returns environ with SLUICE_BPF_DIR, SLUICE_QOS_DIR and
// SLUICE_POOL_DIR pointing at empty directories it makes under dir, and
// no other value of them. Commands run with it find no filter, no NAT, no
// IPQoS and no pool store even on a host where they are live, so their
// output is the same everywhere (ipf -n prints no "what would change"
// lines, ipnat -f has no device to load into) and nothing of the host is
// changed.
func OfflineEnv(environ []string, dir string) ([]string, error) {
	out := make([]string, 0, len(environ)+3)
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if k != EnvBPFDir && k != EnvQoSDir && k != EnvPoolDir {
			out = append(out, kv)
		}
	}
	for _, v := range []struct{ env, sub string }{{EnvBPFDir, "bpf"}, {EnvQoSDir, "qos"}, {EnvPoolDir, "pools"}} {
		d := filepath.Join(dir, v.sub)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("offline environment: %w", err)
		}
		out = append(out, v.env+"="+d)
	}
	return out, nil
}

// RunOffline runs a package's tests (from TestMain) with OfflineEnv in
// force for the whole process: commands the tests run in process or as
// children see no live datapath. A test that wants one sets its own
// directories with t.Setenv. It returns m.Run's exit code.
func RunOffline(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-offline-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	env, err := OfflineEnv(os.Environ(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == EnvBPFDir || k == EnvQoSDir || k == EnvPoolDir {
			os.Setenv(k, v)
		}
	}
	return m.Run()
}
