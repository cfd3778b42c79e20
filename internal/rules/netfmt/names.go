package netfmt

import (
	"strconv"

	"sluice/internal/ipnames"
)

// ProtoName returns the /etc/protocols name of p, or "" if it has none.
func ProtoName(p int) string {
	if p < 0 || p > 255 {
		return ""
	}
	return ipnames.ProtoName(uint8(p))
}

// ProtoNumber looks a protocol up by number or by name, as
// getprotobyname does (sluice/internal/ipnames).
func ProtoNumber(s string) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 255 {
			return 0, false
		}
		return n, true
	}
	n, ok := ipnames.ProtoByName(s)
	return int(n), ok
}

// ServicePort resolves a port number, or a service name of tcp or udp.
func ServicePort(s string) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 65535 {
			return 0, false
		}
		return n, true
	}
	p, ok := ipnames.ServiceByName(s, "")
	return int(p), ok
}
