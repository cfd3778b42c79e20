//go:build !linux

package datapath

import "sluice/internal/bench/config"

// Datapaths returns no datapath where the eBPF datapaths do not exist:
// the sluice-* configurations are then skipped as "datapath not
// available".
func Datapaths() config.Datapaths { return config.Datapaths{} }
