package ipftext

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"sluice/internal/packet"
)

// Record is one item of a packet input file.
type Record struct {
	// Out is the direction: false = in, true = out.
	Out bool
	// Iface is the interface name given with the packet ("" = the
	// caller's default, anon0 in ipftest).
	Iface string
	// IfaceAddr is the address assigned with "name=addr" (hex "[dir,IF=A]"
	// prefix or text "on IF=A"); invalid when none was given. ipftest
	// keeps the first address assigned to an interface.
	IfaceAddr netip.Addr
	// LinkFlags are the link-layer flags of a hex "+mcast"/"+bcast"/
	// "+mbcast" suffix, already mapped to packet flags for
	// packet.ParseOptions.LinkFlags.
	LinkFlags packet.Flags
	// Packet is the packet, a prefix of the buffer given to Next. It is
	// nil for a "nic" record.
	Packet []byte
	// NICs are the interface names of a text "nic" line.
	NICs []string
	// Line is the input line the record ended on (1-based).
	Line int
}

// Reader is implemented by TextReader and HexReader.
type Reader interface {
	// Next reads the next record, storing packet bytes in buf. It returns
	// io.EOF at the end of the input. A *SyntaxError reports one bad
	// input item; the reader is positioned after it and Next may be
	// called again (ipftest prints the message and carries on).
	Next(buf []byte) (Record, error)
}

// SyntaxError is a malformed input line.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ErrBufferTooSmall is returned when a packet does not fit the buffer
// given to Next.
var ErrBufferTooSmall = errors.New("ipftext: packet larger than buffer")

// NewReader returns the reader for an ipftest -F format name.
func NewReader(format string, r io.Reader) (Reader, error) {
	switch format {
	case "text", "":
		return NewTextReader(r), nil
	case "hex":
		return NewHexReader(r), nil
	}
	return nil, fmt.Errorf("unknown input format %q", format)
}

// splitIface splits "name=addr" into its name and address.
func splitIface(s string) (string, netip.Addr) {
	name, addr, ok := strings.Cut(s, "=")
	if !ok {
		return s, netip.Addr{}
	}
	a, err := netip.ParseAddr(strings.TrimSpace(addr))
	if err != nil {
		if a4, ok := InetAddr(addr); ok {
			a = a4
		}
	}
	return name, a
}

// ---------------------------------------------------------------------
// hex format (lib/ipft_hx.c)

// HexReader reads the "hex" packet format: optional "[dir,ifname]"
// prefixes, hex digits over one or more lines, a packet ended by an empty
// line. Checksums are left as they are.
type HexReader struct {
	s    *bufio.Reader
	line int
}

// NewHexReader returns a HexReader over r.
func NewHexReader(r io.Reader) *HexReader { return &HexReader{s: bufio.NewReader(r)} }

// readLine returns the next line without its newline; nl reports whether
// a newline ended it.
func readLine(s *bufio.Reader) (line string, nl bool, err error) {
	l, err := s.ReadString('\n')
	if strings.HasSuffix(l, "\n") {
		return l[:len(l)-1], true, nil
	}
	if l != "" && err == io.EOF {
		return l, false, nil
	}
	return l, false, err
}

// Next implements Reader. As in ipftest, the packet is the data
// accumulated up to an empty line; a packet not followed by an empty line
// at the end of the file is dropped, and an empty line with no data
// before it ends the input (ipftest stops on a zero-length read).
func (h *HexReader) Next(buf []byte) (Record, error) {
	var rec Record
	n := 0
	for {
		line, nl, err := readLine(h.s)
		if err != nil {
			return Record{}, err
		}
		h.line++
		rec.Line = h.line
		if nl && line == "" {
			if n == 0 {
				return Record{}, io.EOF
			}
			rec.Packet = buf[:n]
			return rec, nil
		}
		if k := strings.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		if line == "" {
			continue
		}
		s := line
		if line[0] == '[' {
			if end := strings.IndexByte(line, ']'); end > 0 {
				t := line[1:end]
				rest := line[end:] // starts at ']'
				if len(t) > 0 {
					rest = rest[1:] // the ']' becomes the string end
					if dir, name, ok := strings.Cut(t, ","); ok {
						rec.Iface, rec.IfaceAddr = splitIface(name)
						switch {
						case strings.HasPrefix(dir, "i"):
							rec.Out = false
						case strings.HasPrefix(dir, "o"):
							rec.Out = true
						}
					} else {
						rec.Iface, rec.IfaceAddr = splitIface(t)
					}
				}
				// ipftest's "while (*s++ == '+')" always consumes the
				// character it tests.
				for len(rest) > 0 {
					c := rest[0]
					rest = rest[1:]
					if c != '+' {
						break
					}
					if hasPrefixFold(rest, "mcast") {
						rec.LinkFlags |= packet.FlagMulticast | packet.FlagMBCast
						rest = rest[5:]
					}
					if hasPrefixFold(rest, "bcast") {
						rec.LinkFlags |= packet.FlagBroadcast | packet.FlagMBCast
						rest = rest[5:]
					}
					if hasPrefixFold(rest, "mbcast") {
						// Read and skipped: ipftest marks the packet
						// with nothing the filter sees.
						rest = rest[6:]
					}
				}
				s = strings.TrimLeft(rest, " \t\r\v\f")
			}
		}
		var ok bool
		if n, ok = readHex(s, buf, n); !ok {
			return Record{}, ErrBufferTooSmall
		}
	}
}

func hasPrefixFold(s, p string) bool {
	return len(s) >= len(p) && strings.EqualFold(s[:len(p)], p)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// readHex is ipft_hx.c's readhex: pairs of hex digits form bytes, a blank
// after a lone digit ends that byte, anything else ends the line's data.
func readHex(s string, buf []byte, n int) (int, bool) {
	half := false
	for k := 0; k < len(s); k++ {
		c := s[k]
		if isSpace(c) {
			if half {
				n++
				half = false
			}
			continue
		}
		v, ok := hexVal(c)
		if !ok {
			break
		}
		if n >= len(buf) {
			return n, false
		}
		if !half {
			buf[n] = v << 4
			half = true
		} else {
			buf[n] |= v
			n++
			half = false
		}
	}
	// A lone digit at the end of the line is dropped: readhex returns
	// without advancing and the next line overwrites that byte.
	return n, true
}
