package engine

import (
	"io"
	"os"
	"strings"
	"testing"

	"sluice/internal/rules/ipqos"

	"sluice/internal/qos"
)

// FuzzRunTest drives `ipqosadmin -test` end to end: a configuration, a packet
// file in text or hex format and an adapter name. Parsing the packet file
// and marking/printing its packets must never panic; bad input is an error.
func FuzzRunTest(f *testing.F) {
	conf, err := os.ReadFile("testdata/test.conf")
	if err != nil {
		f.Fatal(err)
	}
	for _, format := range []string{"text", "hex"} {
		pkts, err := os.ReadFile("testdata/packets." + format)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(conf), string(pkts), format == "hex", "")
		f.Add(string(conf), string(pkts), format == "hex", "nic0")
	}
	f.Add("", "out on nic0 tcp 10.1.1.1,20 10.2.2.2,1024 A\n", false, "")
	f.Add(string(conf), "[out,nic0] 45\n", true, "")
	f.Add(string(conf), "[out,nic0] 6000 0000 0000 2c00\n", true, "")
	f.Fuzz(func(t *testing.T, confSrc, pktSrc string, hex bool, adapter string) {
		cfg, err := ipqos.Parse("fuzz.conf", []byte(confSrc))
		if err != nil {
			return
		}
		rs, err := qos.Compile(cfg)
		if err != nil {
			return
		}
		format := "text"
		if hex {
			format = "hex"
		}
		pkts, err := ReadPackets(strings.NewReader(pktSrc), format)
		if err != nil {
			return
		}
		_ = RunTest(io.Discard, rs, adapter, pkts)
	})
}
