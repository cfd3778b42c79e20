package state

// TCP connection states of one side of an entry, numbered as IPFilter's
// IPF_TCPS_* so that dumps print the same numbers (ipf-reference §3.3).
const (
	TCPListen      = 0
	TCPSynSent     = 1
	TCPSynReceived = 2
	TCPHalfEstab   = 3
	TCPEstablished = 4
	TCPCloseWait   = 5
	TCPFinWait1    = 6
	TCPClosing     = 7
	TCPLastAck     = 8
	TCPFinWait2    = 9
	TCPTimeWait    = 10
	TCPClosed      = 11
	tcpNumStates   = 12
)

// TCP header flag bits.
const (
	THFin = 0x01
	THSyn = 0x02
	THRst = 0x04
	THPsh = 0x08
	THAck = 0x10
	THUrg = 0x20
	THEce = 0x40
	THCwr = 0x80

	thOpening = THSyn | THAck
	thAckMask = THFin | THSyn | THRst | THAck
)

// Per-side window flags.
const (
	wscaleSeen  = 0x1
	wscaleFirst = 0x2
	sackPermit  = 0x4
)

// maxAckWindow is IPFilter's MAXACKWINDOW: how far an ACK may lag behind or
// run ahead of what the other side has sent.
const maxAckWindow = 66000

// TCPSide is the window-tracking record of one direction (tcpdata_t).
type TCPSide struct {
	End      uint32 // next expected sequence number
	MaxEnd   uint32 // highest sequence the receiver will accept
	MaxWin   uint32 // largest window seen
	WinScale uint8
	WinFlags uint8
	MaxSeg   uint16
}

// fsmStep applies IPFilter's TCP state machine (ipf_tcp_state) to the
// states st of an entry for a packet from side dir with TCP flags and dlen
// bytes of payload. It returns 0 to reject, 1 to accept with a timer
// restart for the new state of side dir, 2 to accept without touching
// state or timer.
func fsmStep(st *[2]uint8, dir int, flags uint8, dlen int, tcpfsm bool) int {
	nstate := st[dir]
	ostate := st[1-dir]
	rval := 0
	if flags&THRst != 0 {
		if flags&THPsh == 0 && dlen == 0 {
			nstate = TCPClosed
		} else {
			nstate = TCPCloseWait
		}
		if ostate <= TCPEstablished {
			st[1-dir] = TCPCloseWait
		}
		rval = 1
	} else {
		switch nstate {
		case TCPListen:
			if flags&thOpening == thOpening {
				nstate, rval = TCPSynReceived, 1
			} else if flags&thOpening == THSyn {
				nstate, rval = TCPSynSent, 1
			}
			if !tcpfsm && flags&thAckMask == THAck {
				switch ostate {
				case TCPListen, TCPSynReceived:
					nstate, rval = TCPHalfEstab, 1
				case TCPHalfEstab, TCPEstablished:
					nstate, rval = TCPEstablished, 1
				}
			}
		case TCPSynSent:
			switch {
			case flags&^(THEce|THCwr) == THSyn:
				rval = 2
			case flags&(THSyn|THFin|THAck) == THAck:
				nstate, rval = TCPEstablished, 1
			case flags&THFin != 0:
				nstate, rval = TCPFinWait1, 1
			case flags&thOpening == thOpening:
				nstate, rval = TCPSynReceived, 1
			}
		case TCPSynReceived:
			switch {
			case flags&(THSyn|THFin|THAck) == THAck:
				nstate, rval = TCPEstablished, 1
			case flags&^(THEce|THCwr) == thOpening:
				rval = 2
			case flags&THFin != 0:
				nstate, rval = TCPFinWait1, 1
			}
		case TCPHalfEstab:
			if flags&THFin != 0 {
				nstate, rval = TCPFinWait1, 1
			} else if flags&thAckMask == THAck {
				switch ostate {
				case TCPListen, TCPSynSent, TCPSynReceived:
					rval = 1
				case TCPHalfEstab, TCPEstablished:
					nstate, rval = TCPEstablished, 1
				}
			}
		case TCPEstablished:
			rval = 1
			if flags&THFin != 0 {
				if ostate == TCPFinWait1 {
					nstate = TCPClosing
				} else {
					nstate = TCPFinWait1
				}
			} else if flags&THAck != 0 {
				if ostate == TCPFinWait1 {
					nstate = TCPCloseWait
				} else if ostate < TCPCloseWait {
					nstate = TCPEstablished
				}
			}
		case TCPCloseWait:
			if flags&THFin != 0 {
				nstate = TCPLastAck
			} else {
				nstate = TCPCloseWait
			}
			rval = 1
		case TCPFinWait1:
			if flags&THAck != 0 && ostate > TCPCloseWait {
				nstate = TCPLastAck
			} else {
				nstate = TCPFinWait1
			}
			rval = 1
		case TCPClosing:
			if flags&(THFin|THAck) == THAck {
				nstate = TCPTimeWait
			}
			rval = 1
		case TCPLastAck:
			if flags&THAck != 0 {
				rval = 1
			}
		case TCPFinWait2:
			// Unused by IPFilter: anything here is rejected.
		case TCPTimeWait:
			if ostate == TCPLastAck {
				nstate, rval = TCPClosed, 1
			} else {
				rval = 2
			}
		case TCPClosed:
			rval = 2
		}
	}
	if rval == 1 {
		st[dir] = nstate
	}
	return rval
}

// inWindow is ipf_state_tcpinwindow: it checks a segment from side f
// against the window of side t and updates both on success. It returns
// false when the segment is out of window.
func inWindow(f, t *TCPSide, p *Packet, tcpfsm, strict bool) bool {
	flags := p.TCPFlags
	seq, ack := p.Seq, p.Ack
	var win uint32
	if flags&THSyn != 0 {
		win = uint32(p.Win)
	} else {
		win = uint32(p.Win) << f.WinScale
	}
	if win == 0 {
		win = 1
	}
	dsize := uint32(p.DataLen)
	if flags&THSyn != 0 {
		dsize++
	}
	if flags&THFin != 0 {
		dsize++
	}
	if flags&THSyn == 0 && f.WinFlags&wscaleFirst != 0 {
		f.WinFlags &^= wscaleFirst
		f.MaxWin = win
	}
	end := seq + dsize
	if f.End == 0 && (!tcpfsm || flags&thOpening == thOpening) {
		f.End = end - 1
		f.MaxWin = 1
		f.MaxEnd = end + win
	}
	if flags&THAck == 0 {
		ack = t.End
	} else if flags&(THAck|THRst) == THAck|THRst && ack == 0 {
		ack = t.End
	}
	maxwin := t.MaxWin
	ackskew := int32(t.End - ack)
	if strict && seq != f.End {
		return false
	}
	inseq := false
	switch {
	case seqGE(f.MaxEnd, end) && seqGE(seq, f.End-maxwin) &&
		-int64(ackskew) <= maxAckWindow && int64(ackskew) <= int64(maxAckWindow)<<f.WinScale:
		inseq = true
	case seq == f.MaxEnd && ackskew == 0 && f.WinFlags&sackPermit != 0 && t.WinFlags&sackPermit != 0:
		inseq = true
	case seq == 0 && flags == THRst|THAck && ackskew >= -1 && ackskew <= 1:
		inseq = true
	case !tcpfsm && f.WinFlags&(wscaleSeen|wscaleFirst) == 0:
		if seq == f.MaxEnd && ackskew == 0 {
			inseq = true
		} else if seqGE(seq+maxwin, f.End-maxwin) {
			inseq = true
		}
	}
	if !inseq {
		return false
	}
	if ackskew < 0 {
		t.End = ack
	}
	if f.MaxWin < win {
		f.MaxWin = win
	}
	if seqGT(end, f.End) {
		f.End = end
	}
	if seqGE(ack+win, t.MaxEnd) {
		t.MaxEnd = ack + win
	}
	return true
}

func seqGE(a, b uint32) bool { return int32(a-b) >= 0 }
func seqGT(a, b uint32) bool { return int32(a-b) > 0 }

// parseTCPOptions is ipf_tcpoptions: it records window scale, MSS and
// SACK-permitted from a SYN's options. It returns false if an option has
// the wrong length (the packet is then bad).
func parseTCPOptions(opts []byte, td *TCPSide) bool {
	ok := true
	for i := 0; i < len(opts); {
		kind := opts[i]
		if kind == 0 {
			break
		}
		if kind == 1 {
			i++
			continue
		}
		if i+1 >= len(opts) {
			break
		}
		l := int(opts[i+1])
		if l < 2 || i+l > len(opts) {
			break
		}
		switch kind {
		case 3: // window scale
			if l == 3 {
				s := opts[i+2]
				if s > 14 {
					s = 14
				}
				td.WinScale = s
				td.WinFlags |= wscaleSeen | wscaleFirst
			} else {
				ok = false
			}
		case 2: // MSS
			if l == 4 {
				td.MaxSeg = uint16(opts[i+2])<<8 | uint16(opts[i+3])
			} else {
				ok = false
			}
		case 4: // SACK permitted
			if l == 2 {
				td.WinFlags |= sackPermit
			} else {
				ok = false
			}
		}
		i += l
	}
	return ok
}
