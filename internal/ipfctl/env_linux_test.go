package ipfctl

import (
	"testing"

	"sluice/internal/testutil"
)

// TestOfflineEnvNames: testutil.OfflineEnv, which keeps tests' commands
// away from a live datapath, must set the variables ipfctl reads.
func TestOfflineEnvNames(t *testing.T) {
	for _, c := range []struct{ ours, testutil string }{
		{PinDirEnv, testutil.EnvBPFDir}, {QoSDirEnv, testutil.EnvQoSDir}, {PoolDirEnv, testutil.EnvPoolDir},
	} {
		if c.ours != c.testutil {
			t.Errorf("ipfctl reads %s, testutil sets %s", c.ours, c.testutil)
		}
	}
}
