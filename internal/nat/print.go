package nat

import (
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"

	"sluice/internal/rules/ipnat"
	"sluice/internal/rules/netfmt"
)

// Dump writes the NAT part of ipftest -D: the rules, the active
// sessions (newest first) and the host map, in IPFilter's formats.
func (n *NAT) Dump(w io.Writer) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var b strings.Builder
	b.WriteString("List of active MAP/Redirect filters:\n")
	for _, r := range n.rules {
		b.WriteString(r.Rule.String())
	}
	b.WriteString("\nList of active sessions:\n")
	for i := len(n.active) - 1; i >= 0; i-- {
		b.WriteString(n.active[i].String())
	}
	b.WriteString("\nHostmap table:\n")
	hms := make([]*hostmap, 0, n.nHostmaps)
	for _, l := range n.hostmaps {
		hms = append(hms, l...)
	}
	// Newest first, as IPFilter's list is kept.
	sort.Slice(hms, func(i, j int) bool { return hms[i].seq > hms[j].seq })
	for _, h := range hms {
		b.WriteString(h.String())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// activeAddr prints an address as printactiveaddress does: IPv4 padded
// with the given width, IPv6 unpadded and "any" when its first 32 bits
// are zero (printhostmask without a mask).
func activeAddr(a netip.Addr, pad bool) string {
	if a.Is4() {
		s := netfmt.NtopV4(a.As4())
		if pad {
			return fmt.Sprintf("%-15s", s)
		}
		return s
	}
	b := a.As16()
	if b[0]|b[1]|b[2]|b[3] == 0 {
		return "any"
	}
	return netfmt.NtopV6(b)
}

func natType(s *session) string {
	if s.rcmd {
		// ipf_p_rcmd_portmsg adds the back-connection in the other
		// direction than its parent: a map rule's shows as RDR.
		if s.dir == In {
			return "RDR"
		}
		return "MAP"
	}
	switch s.rule.Type {
	case ipnat.Map:
		return "MAP"
	case ipnat.MapBlock:
		return "MAP-BLOCK"
	case ipnat.Rdr:
		return "RDR"
	case ipnat.Bimap:
		return "BIMAP"
	case ipnat.RewriteOut:
		return "RWR-MAP"
	case ipnat.RewriteIn:
		return "RWR-RDR"
	case ipnat.DivertOut:
		return "DIV-MAP"
	case ipnat.DivertIn:
		return "DIV-RDR"
	}
	return "?"
}

// String formats the session as printactivenat does (without -v).
func (s *session) String() string {
	var b strings.Builder
	b.WriteString(natType(s) + " ")
	if s.clone {
		b.WriteString("CLONE ")
	}
	ports := s.flags&flagTCPUDP != 0
	port := func(p uint16) {
		if ports {
			fmt.Fprintf(&b, " %-5d", p)
		}
	}
	switch {
	case s.rule.Type == ipnat.RewriteIn || s.rule.Type == ipnat.RewriteOut:
		b.WriteString(activeAddr(s.osrc, true))
		port(s.osport)
		b.WriteString(" " + activeAddr(s.odst, true))
		port(s.odport)
		b.WriteString("<- -> " + activeAddr(s.nsrc, true))
		port(s.nsport)
		b.WriteString(" " + activeAddr(s.ndst, true))
		port(s.ndport)
	case s.dir == Out:
		b.WriteString(activeAddr(s.osrc, true))
		port(s.osport)
		b.WriteString(" <- -> " + activeAddr(s.nsrc, true))
		port(s.nsport)
		b.WriteString(" [" + activeAddr(s.odst, false))
		if ports {
			fmt.Fprintf(&b, " %d", s.odport)
		}
		b.WriteString("]")
	default:
		b.WriteString(activeAddr(s.ndst, true))
		port(s.ndport)
		b.WriteString(" <- -> " + activeAddr(s.odst, true))
		port(s.odport)
		b.WriteString(" [" + activeAddr(s.osrc, false))
		if ports {
			fmt.Fprintf(&b, " %d", s.osport)
		}
		b.WriteString("]")
	}
	b.WriteByte('\n')
	if s.proxy != nil {
		b.WriteString("\tproxy active\n")
	}
	return b.String()
}

// String formats a host map entry as printhostmap does.
func (h *hostmap) String() string {
	return activeAddr(h.osrc, false) + "," + activeAddr(h.odst, false) + " -> " +
		activeAddr(h.nsrc, false) + "," + activeAddr(h.ndst, false) +
		fmt.Sprintf(" (use = %d)\n", h.ref)
}

// Flush removes every session (ipnat -F) and returns how many there were.
func (n *NAT) Flush() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := len(n.active)
	for _, s := range n.active {
		n.unlink(s)
	}
	n.active = nil
	n.wild = nil
	return c
}

// Stats reports the number of rules, sessions and host map entries.
func (n *NAT) Stats() (rules, sessions, hostmaps int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.rules), len(n.active), n.nHostmaps
}
