package bench

import (
	"os"
	"testing"

	"sluice/internal/bench/run"
)

func TestMain(m *testing.M) {
	run.NetserverHelper()
	os.Exit(m.Run())
}
