package nat

// ftpState is the per-session state of the ftp proxy.
type ftpState struct{}
