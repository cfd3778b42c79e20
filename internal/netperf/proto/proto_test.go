package proto

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"testing"

	"sluice/internal/netperf/internal/pcaptest"
)

func captured(t *testing.T, name string) []pcaptest.Message {
	t.Helper()
	port := uint16(22865)
	if name == "passphrase" {
		port = 22867
	}
	msgs, err := pcaptest.ReadMessages(filepath.Join(pcaptest.Dir, name+".pcap"), port, MsgSize)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestCapturesRoundTrip decodes every captured request and response and
// re-encodes it; the bytes must come back identical. Results are checked
// field by field because the C server leaves junk in them (Q1).
func TestCapturesRoundTrip(t *testing.T) {
	for _, name := range []string{"tcp_stream", "tcp_maerts", "tcp_rr", "tcp_crr", "udp_stream", "udp_rr", "tcp_rr_conf3"} {
		t.Run(name, func(t *testing.T) {
			msgs := captured(t, name)
			var reqs, rsps int
			for i, cm := range msgs {
				m, err := FromBytes(cm.Data)
				if err != nil {
					t.Fatal(err)
				}
				if cm.FromClient {
					reqs++
					if m.Type() != TypeDoOmni {
						t.Fatalf("msg %d: type %d, want %d", i, m.Type(), TypeDoOmni)
					}
					var r Request
					r.Decode(m)
					var back Msg
					r.Encode(&back)
					if !bytes.Equal(back[:], m[:]) {
						t.Errorf("msg %d: request does not re-encode to the captured bytes", i)
					}
					continue
				}
				// Server messages alternate response, results.
				rsps++
				if rsps%2 == 1 {
					var r Response
					r.Decode(m)
					if r.Errno != 0 || r.DataPort <= 0 || r.DataPort > 65535 {
						t.Errorf("msg %d: response errno %d port %d", i, r.Errno, r.DataPort)
					}
					if rsps == 1 { // later responses carry swapped junk (Q1)
						var back Msg
						r.Encode(&back)
						if !bytes.Equal(back[:], m[:]) {
							t.Errorf("msg %d: response does not re-encode to the captured bytes", i)
						}
					}
				} else {
					var r Results
					r.Decode(m)
					if r.Errno != 0 {
						t.Errorf("msg %d: results errno %d", i, r.Errno)
					}
					if r.Elapsed < 0.9 || r.Elapsed > 2.1 {
						t.Errorf("msg %d: elapsed %v", i, r.Elapsed)
					}
				}
			}
			if reqs == 0 || rsps != 2*reqs {
				t.Errorf("got %d requests and %d server messages", reqs, rsps)
			}
		})
	}
}

func TestResultsTCPStream(t *testing.T) {
	msgs := captured(t, "tcp_stream")
	m, _ := FromBytes(msgs[2].Data)
	var r Results
	r.Decode(m)
	if r.BytesReceived != 7454867456 || r.RecvCalls != 58690 || r.SendBufSize != 3939840 {
		t.Errorf("got rx %d calls %d sndbuf %d", r.BytesReceived, r.RecvCalls, r.SendBufSize)
	}
	if r.CPUMethod != CPUMethodProcStat || r.NumCPUs != 2 || r.CongControl != "bbr" {
		t.Errorf("got method %d cpus %d cc %q", r.CPUMethod, r.NumCPUs, r.CongControl)
	}
	if r.CPUUtil < 99.24 || r.CPUUtil > 99.26 {
		t.Errorf("got util %v, want 99.25", r.CPUUtil)
	}
	// Round trip of a clean Results value.
	var back Msg
	r.Encode(&back)
	var r2 Results
	r2.Decode(&back)
	var back2 Msg
	r2.Encode(&back2)
	if back2 != back || r2.BytesReceived != r.BytesReceived || r2.CongControl != r.CongControl {
		t.Errorf("round trip: got %+v, want %+v", r2, r)
	}
}

func TestPassphrase(t *testing.T) {
	msgs := captured(t, "passphrase")
	var phrases []string
	for _, cm := range msgs {
		m, _ := FromBytes(cm.Data)
		if cm.FromClient && m.Type() == TypePassphrase {
			phrases = append(phrases, m.Passphrase())
			var back Msg
			if err := EncodePassphrase(&back, m.Passphrase()); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back[:], m[:]) {
				t.Errorf("passphrase %q does not re-encode to the captured bytes", m.Passphrase())
			}
		}
	}
	if len(phrases) != 2 || phrases[0] != "s3cret" || phrases[1] != "wrong" {
		t.Errorf("got phrases %q", phrases)
	}
	var m Msg
	if err := EncodePassphrase(&m, string(make([]byte, MaxPassphrase+1))); err == nil {
		t.Error("overlong passphrase accepted")
	}
}

func TestIPWords(t *testing.T) {
	if w := IPWords(netip.MustParseAddr("127.0.0.1")); w != [4]uint32{0x7f000001} {
		t.Errorf("got %x", w)
	}
	a6 := netip.MustParseAddr("2001:db8::1")
	w := IPWords(a6)
	// A little-endian C host htonl's each group of the raw bytes.
	if w[0] != 0xb80d0120 || w[3] != 0x01000000 {
		t.Errorf("got %08x", w)
	}
	if got := AddrFromWords(w, FamilyINET6); got != a6 {
		t.Errorf("got %v, want %v", got, a6)
	}
	if got := AddrFromWords(IPWords(netip.MustParseAddr("10.1.2.3")), FamilyINET); got.String() != "10.1.2.3" {
		t.Errorf("got %v", got)
	}
}

func TestFromBytesShort(t *testing.T) {
	if _, err := FromBytes(make([]byte, 655)); err == nil {
		t.Error("short message accepted")
	}
}

// codec is what the three omni messages have in common.
type codec interface {
	Encode(*Msg)
	Decode(*Msg)
}

func FuzzDecode(f *testing.F) {
	f.Add(make([]byte, MsgSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Msg
		copy(m[:], b)
		var rq Request
		rq.Decode(&m)
		var rs Response
		rs.Decode(&m)
		var res Results
		res.Decode(&m)
		// Decode → encode → decode is a fixed point.
		var m2 Msg
		rq.Encode(&m2)
		var rq2 Request
		rq2.Decode(&m2)
		if rq2.Flags != rq.Flags || rq2.TestLength != rq.TestLength || rq2.CongControl != rq.CongControl[:min(len(rq.CongControl), 15)] {
			t.Fatalf("request not stable")
		}
		// Every field of the three messages: encoding what was decoded
		// and decoding it again gives the same bytes, so no field is
		// read from one offset and written to another (strings are
		// cut to their C size by the first encoding, NaNs kept).
		for _, c := range []struct {
			name      string
			decoded   codec // decoded from b
			redecoded codec // decoded from its encoding
		}{{"request", &rq, &Request{}}, {"response", &rs, &Response{}}, {"results", &res, &Results{}}} {
			var m2, m3 Msg
			c.decoded.Encode(&m2)
			c.redecoded.Decode(&m2)
			c.redecoded.Encode(&m3)
			if m3 != m2 {
				t.Fatalf("%s: encode(decode(m)) not a fixed point", c.name)
			}
		}
	})
}
