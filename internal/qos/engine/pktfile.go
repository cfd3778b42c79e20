package engine

import (
	"errors"
	"fmt"
	"io"

	"sluice/internal/packet/ipftext"
)

// InputPacket is one packet read from an IPFilter-kit packet file.
type InputPacket struct {
	Line   int    // line where the packet ends
	Out    bool   // direction: outbound
	Ifname string // interface, "anon0" when the file names none
	Data   []byte // starts at the IP header
}

// ReadPackets reads a whole packet file in the IPFilter test kit's `text`
// or `hex` format (ipf-conformance README §6), using internal/packet's
// readers. Unlike ipftest it stops at the first malformed line.
func ReadPackets(r io.Reader, format string) ([]InputPacket, error) {
	rd, err := ipftext.NewReader(format, r)
	if err != nil {
		return nil, err
	}
	if tr, ok := rd.(*ipftext.TextReader); ok {
		tr.EchoID = 0 // ipftest uses its pid; a fixed value keeps -test output stable
	}
	var out []InputPacket
	buf := make([]byte, 65536)
	for {
		rec, err := rd.Next(buf)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s input: %w", format, err)
		}
		if rec.Packet == nil { // a "nic" line
			continue
		}
		p := InputPacket{Line: rec.Line, Out: rec.Out, Ifname: rec.Iface, Data: append([]byte(nil), rec.Packet...)}
		if p.Ifname == "" {
			p.Ifname = "anon0"
		}
		out = append(out, p)
	}
}
