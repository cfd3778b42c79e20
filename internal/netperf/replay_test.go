package netperf

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"sluice/internal/netperf/proto"
)

// TestClientAgainstReplayedCServer plays the C netserver's captured bytes
// (-i 3,3 TCP_RR, with the byte-swapped junk of quirk Q1 in later
// responses and all results) to the Go client over a real connection. The
// client's requests must match the captured ones, and the run must succeed
// with the C server's counts.
func TestClientAgainstReplayedCServer(t *testing.T) {
	msgs := captureMsgs(t, "tcp_rr_conf3")
	var reqs, srv [][]byte
	for _, m := range msgs {
		if m.FromClient {
			reqs = append(reqs, m.Data)
		} else {
			srv = append(srv, m.Data)
		}
	}
	ctl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	data, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	dport := uint32(data.Addr().(*net.TCPAddr).Port)
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			c, err := ctl.Accept()
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			for it := range 3 {
				var m proto.Msg
				if err := proto.ReadMsg(c, &m); err != nil {
					return err
				}
				want := append([]byte(nil), reqs[it]...)
				if it > 0 {
					binary.BigEndian.PutUint32(want[0x58:], dport) // we asked for our own port again
				}
				if !bytes.Equal(m[:], want) {
					t.Errorf("iteration %d: request differs from the capture", it)
				}
				rsp := append([]byte(nil), srv[2*it]...)
				binary.BigEndian.PutUint32(rsp[0x34:], dport)
				if _, err := c.Write(rsp); err != nil {
					return err
				}
				d, err := data.Accept()
				if err != nil {
					return err
				}
				buf := make([]byte, 1)
				for {
					if _, err := io.ReadFull(d, buf); err != nil {
						break
					}
					if _, err := d.Write(buf); err != nil {
						break
					}
				}
				d.Close()
				if _, err := c.Write(srv[2*it+1]); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	r, err := Run(context.Background(), Config{Test: TCPRR, Host: "127.0.0.1", Port: ctl.Addr().(*net.TCPAddr).Port,
		Duration: time.Second, ConfMax: 3, ConfMin: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if r.Confidence == nil || r.Confidence.Iterations != 3 {
		t.Fatalf("got confidence %+v", r.Confidence)
	}
	if r.RemoteCPU != -1 || r.RemoteTrans <= 0 || r.RSS != 16384 || r.RSR != 131072 {
		t.Errorf("got remote cpu %v trans %d rss %d rsr %d", r.RemoteCPU, r.RemoteTrans, r.RSS, r.RSR)
	}
}

// TestServerAnswersCapturedRequests sends the C netperf's captured request
// bytes to the Go server, checks the response word by word against the C
// server's, then plays the client's side of the data phase.
func TestServerAnswersCapturedRequests(t *testing.T) {
	_, port := startServer(t)
	for _, name := range []string{"tcp_stream", "tcp_rr", "udp_rr"} {
		t.Run(name, func(t *testing.T) {
			msgs := captureMsgs(t, name)
			c := dialCtl(t, port)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(msgs[0].Data); err != nil {
				t.Fatal(err)
			}
			var m proto.Msg
			if err := proto.ReadMsg(c, &m); err != nil {
				t.Fatal(err)
			}
			var got, want proto.Response
			got.Decode(&m)
			wm, _ := proto.FromBytes(msgs[1].Data)
			want.Decode(wm)
			udp := name == "udp_rr"
			st := 1
			if udp {
				st = 2
			}
			snd, rcv, err := probeSockBufs(4, st, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got.SendBufSize != int32(snd) || got.RecvBufSize != int32(rcv) {
				t.Errorf("buffers %d/%d, want the OS defaults %d/%d", got.SendBufSize, got.RecvBufSize, snd, rcv)
			}
			// Normalise what legitimately differs: the port and the
			// machine's default buffer sizes.
			want.DataPort = got.DataPort
			want.SendBufSize, want.RecvBufSize = got.SendBufSize, got.RecvBufSize
			if name == "tcp_stream" {
				want.RecvSize = got.RecvBufSize
			}
			if got != want {
				t.Errorf("response\n got %+v\nwant %+v", got, want)
			}
			dst := "127.0.0.1:" + strconv.Itoa(int(got.DataPort))
			var sent uint64
			switch name {
			case "tcp_stream":
				d, err := net.Dial("tcp", dst)
				if err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 16384)
				for range 100 {
					n, _ := d.Write(buf)
					sent += uint64(n)
				}
				d.(*net.TCPConn).CloseWrite()
				d.Read(buf) // EOF once the server has read everything
				d.Close()
			case "tcp_rr", "udp_rr":
				network := "tcp"
				if udp {
					network = "udp"
				}
				d, err := net.Dial(network, dst)
				if err != nil {
					t.Fatal(err)
				}
				one := make([]byte, 1)
				for range 10 {
					if _, err := d.Write(one); err != nil {
						t.Fatal(err)
					}
					if _, err := d.Read(one); err != nil {
						t.Fatal(err)
					}
					sent++
				}
				if udp {
					for range 3 {
						d.Write(nil)
					}
				} else {
					d.(*net.TCPConn).CloseWrite()
					d.Read(one)
				}
				d.Close()
			}
			if err := proto.ReadMsg(c, &m); err != nil {
				t.Fatal(err)
			}
			var res proto.Results
			res.Decode(&m)
			if res.Errno != 0 || res.BytesReceived != sent {
				t.Errorf("results errno %d bytes %d, want 0 and %d", res.Errno, res.BytesReceived, sent)
			}
			if name != "tcp_stream" && res.Trans != uint32(sent) {
				t.Errorf("results trans %d, want %d", res.Trans, sent)
			}
			measured := msgs[0].Data[0x3b]&proto.FlagMeasureCPU != 0
			if measured && (res.CPUMethod != proto.CPUMethodProcStat || res.NumCPUs <= 0 || res.CPUUtil < 0 || res.CPUUtil > 100.01) {
				t.Errorf("cpu fields %+v", res)
			}
			if name != "udp_rr" && res.CongControl == "" {
				t.Error("flag 0x20 set but no congestion control name returned")
			}
		})
	}
}
