//go:build !linux

package ipfctl

// ReadStatus reports ErrStatusUnsupported: there is no kernel datapath
// outside Linux.
func ReadStatus(filterDir, qosDir string) (*Status, error) { return nil, ErrStatusUnsupported }
