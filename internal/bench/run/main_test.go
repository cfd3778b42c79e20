package run

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	NetserverHelper()
	os.Exit(m.Run())
}
