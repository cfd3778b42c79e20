package zz_tmp

import (
	"fmt"
	"io"
	"os"
	"testing"

	"sluice/internal/packet"
	"sluice/internal/packet/ipftext"
)

func TestDump(t *testing.T) {
	for _, f := range []string{os.Getenv("F")} {
		fh, _ := os.Open(f)
		r, _ := ipftext.NewReader(os.Getenv("FMT"), fh)
		buf := make([]byte, 65536)
		for {
			rec, err := r.Next(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				fmt.Println("ERR", err)
				continue
			}
			if rec.Packet == nil {
				fmt.Println("NIC", rec.NICs)
				continue
			}
			var i packet.Info
			e := i.Parse(rec.Packet, packet.ParseOptions{VerifyChecksums: true, LinkFlags: rec.LinkFlags})
			fmt.Printf("%s  flags=%#x opt=%#x sec=%#x err=%v if=%q addr=%v\n", ipftext.AppendSummary(nil, rec.Out, rec.Iface, rec.Packet), i.Flags, i.OptMask, i.SecMask, e, rec.Iface, rec.IfaceAddr)
			if os.Getenv("X") != "" {
				fmt.Printf("%s", ipftext.AppendHex(nil, rec.Packet))
			}
		}
	}
}
