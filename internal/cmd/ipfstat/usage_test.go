package ipfstat

import (
	"testing"

	"sluice/internal/testutil"
)

// TestUsageComplete: the -h text mentions every option the command takes.
func TestUsageComplete(t *testing.T) { testutil.CheckUsage(t, Usage, optString) }
