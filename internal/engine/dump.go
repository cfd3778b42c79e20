package engine

import (
	"fmt"
	"io"
	"strconv"

	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// protoName returns the /etc/protocols name of p, or its number.
func protoName(p uint8, resolve bool) string {
	if resolve {
		switch p {
		case 1:
			return "icmp"
		case 6:
			return "tcp"
		case 17:
			return "udp"
		case 58:
			return "ipv6-icmp"
		}
	}
	return strconv.Itoa(int(p))
}

// PrintState writes one state entry as IPFilter's printstate (5.x
// format, ipf-reference §6.2) does; ipftest -D and ipfstat -sl use it.
func PrintState(w io.Writer, e *state.Entry, resolve bool) {
	fmt.Fprintf(w, "%d:%s src:%s", e.V, protoName(e.Proto, resolve), e.Src)
	tcpudp := e.Proto == 6 || e.Proto == 17
	if tcpudp {
		if e.WildSrcPort() {
			fmt.Fprint(w, ",*")
		} else {
			fmt.Fprintf(w, ",%d", e.SPort)
		}
	}
	fmt.Fprintf(w, " dst:%s", e.Dst)
	if tcpudp {
		if e.WildDstPort() {
			fmt.Fprint(w, ",*")
		} else {
			fmt.Fprintf(w, ",%d", e.DPort)
		}
	}
	if e.Proto == 6 {
		fmt.Fprintf(w, " state:%d/%d", e.TCPState[0], e.TCPState[1])
	}
	if e.Clone() {
		fmt.Fprint(w, " CLONE")
	}
	fmt.Fprintln(w)
	switch e.Proto {
	case 6:
		fmt.Fprintf(w, "\t%x:%x %d<<%d:%d<<%d\n", e.TCP[0].End, e.TCP[1].End,
			uint16(e.TCP[0].MaxWin), e.TCP[0].WinScale, uint16(e.TCP[1].MaxWin), e.TCP[1].WinScale)
	case 1, 58:
		// IPFilter prints the id as stored, in network byte order, and
		// a sequence number its state entries never fill in (0).
		id := e.ICMPID>>8 | e.ICMPID<<8
		fmt.Fprintf(w, "\tid %d seq 0 type %d\n", id, e.ICMPType)
	case 47:
		// printstate lists GRE's call ids, which IPFilter's state
		// entries never fill in.
		fmt.Fprint(w, "\tcall 0/0\n")
	}
	fmt.Fprintf(w, "\tFWD: IN pkts %d bytes %d OUT pkts %d bytes %d\n", e.Pkts[0], e.Bytes[0], e.Pkts[1], e.Bytes[1])
	fmt.Fprintf(w, "\tREV: IN pkts %d bytes %d OUT pkts %d bytes %d\n", e.Pkts[2], e.Bytes[2], e.Pkts[3], e.Bytes[3])
	fmt.Fprintf(w, "\ttag %d pass %#x = %s\n", e.Tag, e.Pass, PassString(e.Pass))
	fmt.Fprintf(w, "\tinterfaces: in X[%s],X[%s] out X[%s],X[%s]\n", e.IfNames[0], e.IfNames[1], e.IfNames[2], e.IfNames[3])
	if e.SyncNum != 0 {
		// The sync record keeps the creating packet's direction flag,
		// which IPFilter sets for a packet to 0.0.0.0 (::): it takes
		// such a packet for a reply (see TCP state to 0.0.0.0).
		rev := 0
		if e.Dst.IsUnspecified() {
			rev = 1
		}
		fmt.Fprintf(w, "\tSync status: idx %d num %d v %d pr %d rev %d\n", e.SyncIdx, e.SyncNum, e.V, e.Proto, rev)
	} else {
		fmt.Fprintf(w, "\tSync status: not synchronized\n")
	}
}

// PassString describes FR_* flags the way printstate does.
func PassString(pass uint32) string {
	s := ""
	// The command is compared whole, as IPFilter's printer does (auth
	// is pass|block: an auth rule's entry, made for a packet its pps
	// blocked, prints "auth"; semantics pps-keep-state).
	switch cmd := pass & ruleset.FRCmdMask; {
	case cmd == ruleset.FRAuth:
		s = "auth"
	case cmd == ruleset.FRPreauth:
		s = "preauth"
	case pass&ruleset.FRPass != 0:
		s = "pass"
	case pass&ruleset.FRBlock != 0:
		s = "block"
		switch pass & ruleset.FRRetMask {
		case ruleset.FRRetRST:
			s += " return-rst"
		case ruleset.FRRetICMP:
			s += " return-icmp"
		case ruleset.FRFakeICMP:
			s += " return-icmp-as-dest"
		}
	case pass&ruleset.FRLogMask == ruleset.FRLog:
		s = "log"
	case pass&ruleset.FRAccount != 0:
		s = "count"
	case pass&ruleset.FRAuth != 0:
		s = "auth"
	}
	if pass&ruleset.FROutQue != 0 {
		s += " out"
	} else {
		s += " in"
	}
	if pass&ruleset.FRLog != 0 {
		s += " log"
		if pass&ruleset.FRLogBody != 0 {
			s += " body"
		}
		if pass&ruleset.FRLogFirst != 0 {
			s += " first"
		}
		if pass&ruleset.FRLogOrBlock != 0 {
			s += " or-block"
		}
	}
	if pass&ruleset.FRQuick != 0 {
		s += " quick"
	}
	if pass&ruleset.FRKeepFrag != 0 {
		s += " keep frags"
	}
	if pass&ruleset.FRKeepState != 0 {
		s += " keep state"
		if pass&(ruleset.FRStateSync|ruleset.FRStStrict|ruleset.FRStLoose) != 0 {
			s += " ("
			if pass&ruleset.FRStateSync != 0 {
				s += " sync"
			}
			if pass&ruleset.FRStStrict != 0 {
				s += " strict"
			}
			if pass&ruleset.FRStLoose != 0 {
				s += " loose"
			}
			s += " )"
		}
	}
	return s
}
