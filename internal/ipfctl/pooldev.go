package ipfctl

import (
	"fmt"

	"sluice/internal/rules/ippool"
)

// PoolDevice is the kernel's table store, IPFilter's /dev/iplookup, as
// ippool uses it.
type PoolDevice interface {
	// Pools returns the loaded tables.
	Pools() (*ippool.File, error)
	// UpdatePools edits the loaded tables and applies the result to the
	// packet filter; when edit or the apply fails nothing changes.
	UpdatePools(edit func(*ippool.File) error) error
}

// PoolSpaceError is a load whose pool tables do not fit the kernel's
// pool map.
type PoolSpaceError struct {
	Need, Used, Max int
	// Table names the table (and where it is defined) when one table is
	// known to be the cause; ippool fills in the file.
	Table *ippool.Table
}

func (e *PoolSpaceError) Error() string {
	what := "the pool tables of the rules need"
	if e.Table != nil {
		what = fmt.Sprintf("pool table %s/%s needs", e.Table.Role, e.Table.Name)
	}
	return fmt.Sprintf("%s %d pool entries, but the kernel datapath's pool map has room for %d more (%d in all, %d used by the loaded sets)",
		what, e.Need, max(e.Max-e.Used, 0), e.Max, e.Used)
}
