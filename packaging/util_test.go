package packaging

import (
	"testing"

	"sluice/internal/testutil"
)

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	testutil.SkipOrFail(t, format, args...)
}
