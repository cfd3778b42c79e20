package netfmt

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Host is a parsed address in IPFilter's i6addr_t layout: an IPv4 address
// occupies the first four bytes. Fam is 0 when the family could not be
// told (a literal 0), 4 or 6.
type Host struct {
	Fam int
	A   [16]byte
}

// V4 returns the first four bytes as an IPv4 address.
func (h Host) V4() [4]byte { return [4]byte{h.A[0], h.A[1], h.A[2], h.A[3]} }

// Word4 returns the first 32-bit word in host order.
func (h Host) Word4() uint32 { return binary.BigEndian.Uint32(h.A[:4]) }

// IsNumber reports whether s is a decimal or 0x-hex number.
func IsNumber(s string) bool {
	_, err := ParseUint(s)
	return err == nil
}

// ParseUint parses a decimal or 0x-prefixed hexadecimal 32-bit number.
func ParseUint(s string) (uint32, error) {
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		v, err := strconv.ParseUint(s[2:], 16, 32)
		return uint32(v), err
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, fmt.Errorf("not a number")
	}
	v, err := strconv.ParseUint(s, 10, 32)
	return uint32(v), err
}

// ParseDotted parses a strict a.b.c.d quad.
func ParseDotted(s string) ([4]byte, bool) {
	var a [4]byte
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return a, false
	}
	for i, p := range parts {
		if p == "" || len(p) > 3 {
			return a, false
		}
		v, err := strconv.Atoi(p)
		if err != nil || v > 255 || p[0] == '+' || p[0] == '-' {
			return a, false
		}
		a[i] = byte(v)
	}
	return a, true
}

// ParseHost reads an address word: a number (stored as an IPv4 value),
// a dotted quad, an IPv6 literal or a host name, which is resolved for
// the wanted family (6 = IPv6, otherwise IPv4).
func ParseHost(s string, family int) (Host, error) {
	var h Host
	if v, err := ParseUint(s); err == nil {
		binary.BigEndian.PutUint32(h.A[:4], v)
		if v != 0 {
			h.Fam = 4
		}
		return h, nil
	}
	if a, ok := ParseDotted(s); ok {
		copy(h.A[:4], a[:])
		h.Fam = 4
		return h, nil
	}
	if strings.Contains(s, ":") {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return h, fmt.Errorf("bad IPv6 address %q", s)
		}
		h.A = a.As16()
		h.Fam = 6
		return h, nil
	}
	if !isHostName(s) {
		return h, fmt.Errorf("bad address %q", s)
	}
	a, err := ResolveHost(s, family)
	if err != nil {
		return h, err
	}
	if a.Is4() {
		b := a.As4()
		copy(h.A[:4], b[:])
		h.Fam = 4
	} else {
		h.A = a.As16()
		h.Fam = 6
	}
	return h, nil
}

func isHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return s[0] != '-' && s[0] != '.'
}
