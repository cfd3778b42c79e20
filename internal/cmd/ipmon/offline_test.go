package ipmon

import (
	"os"
	"testing"

	"sluice/internal/testutil"
)

// TestMain runs the tests with no datapath in reach (testutil.RunOffline):
// on a host with a live filter the commands would otherwise report or
// change it. Privileged tests set their own pin directories.
func TestMain(m *testing.M) { os.Exit(testutil.RunOffline(m)) }
