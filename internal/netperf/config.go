// Package netperf is a Go netperf 2.7: a client (Run) and an in-process
// netserver (Server) speaking the C tools' omni control protocol, so either
// side interoperates with the C programs.
package netperf

import (
	"fmt"
	"strings"
	"time"

	"sluice/internal/netperf/proto"
)

// Test names.
const (
	TCPStream = "TCP_STREAM"
	TCPMaerts = "TCP_MAERTS"
	TCPRR     = "TCP_RR"
	TCPCRR    = "TCP_CRR"
	UDPStream = "UDP_STREAM"
	UDPRR     = "UDP_RR"
)

// DefaultPort is netserver's control port.
const DefaultPort = 12865

// Version is the netperf release whose protocol and behaviour this
// package follows.
const Version = "2.7.1"

// Implementation names this netperf in reports that say which netperf
// measured them (sluice bench), as opposed to the C tools.
const Implementation = "Go netperf " + Version + " (sluice/internal/netperf)"

// Config describes one netperf test run from the client side.
type Config struct {
	Test         string        // "TCP_STREAM", "TCP_MAERTS", "TCP_RR", "TCP_CRR", "UDP_STREAM", "UDP_RR"
	Host         string        // netserver address (control connection), e.g. "10.0.0.2"
	Port         int           // control port, default 12865
	Duration     time.Duration // -l seconds (ignored if Transactions > 0)
	Transactions int64         // -l -N (RR tests)
	// SendSize and RecvSize are the message sizes of the side that sends
	// the stream and of the side that receives it (for TCP_MAERTS,
	// netserver sends); 0 = netperf's default (the socket buffer size).
	SendSize int
	RecvSize int
	// LocalSendSize and RemoteSendSize (-m local,remote), RemoteRecvSize
	// and LocalRecvSize (-M remote,local) set one side's message size as
	// netperf's options do; where non-zero they take precedence over
	// SendSize and RecvSize. A size for a side that does not send (or
	// receive) in the test is reported but unused, as in netperf.
	LocalSendSize, RemoteSendSize, LocalRecvSize, RemoteRecvSize int
	ReqSize                                                      int // -r req,resp (RR tests; 0 = 1)
	RespSize                                                     int
	// Socket buffer sizes, 0 = the system's default: -s send,recv and
	// -S send,recv.
	LocalSendBuf, LocalRecvBuf, RemoteSendBuf, RemoteRecvBuf int
	NoDelay                                                  bool // -D: TCP_NODELAY on both ends' data sockets
	LocalCPU                                                 bool // -c
	RemoteCPU                                                bool // -C
	// NetNS is an optional network namespace path (/run/netns/x or
	// /proc/PID/ns/net) in which the client's sockets are opened; "" = the
	// current namespace.
	NetNS string

	// Family restricts addresses: 0 any, 4 (-4) or 6 (-6).
	Family int
	// LocalAddr is the client's local address (-L), "" = any.
	LocalAddr string
	// LocalDataPort and RemoteDataPort are the test's -P lport,rport.
	LocalDataPort, RemoteDataPort int
	// BindRemoteCPU asks netserver to bind the test to CPU
	// RemoteCPUAffinity (-T ,n).
	BindRemoteCPU     bool
	RemoteCPUAffinity int
	// BindLocalCPU binds the client's data loop to CPU LocalCPUAffinity
	// (-T n,).
	BindLocalCPU     bool
	LocalCPUAffinity int
	// Passphrase is sent first when set (-Z).
	Passphrase string
	// ConfMax and ConfMin are -i max,min; ConfMax <= 1 means one iteration.
	ConfMax, ConfMin int
	// ConfLevel (95 or 99) and ConfWidth (percent) are -I lvl,width.
	ConfLevel int
	ConfWidth float64
	// ConfResultOnly stops iterating once the result alone is within the
	// interval, whatever the CPU utilisations do (-r).
	ConfResultOnly bool
	// DataHost, when set, is the netserver address the data connection
	// goes to (test option -H), which netserver is also asked to listen
	// on; by default it is the control connection's.
	DataHost string
	// AllowRouting lets UDP_STREAM's data be routed through a gateway
	// (test option -R 1); netperf sets SO_DONTROUTE otherwise.
	AllowRouting bool
	// Latency asks the RR loops to time every transaction (for the latency
	// output selectors); it costs two clock reads per transaction.
	Latency bool
	// ResponseTimeout bounds the wait for the server's answer (default 120 s).
	ResponseTimeout time.Duration

	// DemoInterval, when positive and Interim is set, turns on demo mode
	// (-D): interim results about every DemoInterval during the test.
	DemoInterval time.Duration
	// DemoAlways reads the clock after every unit of work (a negative -D
	// time) instead of estimating how many units make an interval.
	DemoAlways bool
	// DemoUnits is the first guess of units per interval (-D ,units):
	// bytes for stream tests, transactions for RR tests. 0 = netperf's 100.
	DemoUnits float64
	// Interim receives demo mode's interim results, from the data loop.
	Interim func(Interim)
	// Connected, when set, is called once the control connection is up,
	// before the first iteration (netperf prints its banner then).
	Connected func()
}

// CPUStats is one side's CPU utilisation breakdown, in percent.
type CPUStats struct {
	Util, User, System, IOWait, IRQ, SoftIRQ float64
	Peak                                     float64
	PeakID                                   int
	NumCPUs                                  int
	Method                                   byte // 'S' for /proc/stat
}

// Result is what a run measured, typed, with explicit units.
type Result struct {
	Test                 string
	Elapsed              time.Duration
	ThroughputMbps       float64 // 10^6 bits/s (stream tests; UDP_STREAM: as received)
	TransPerSec          float64 // Trans/s (RR/CRR)
	BytesSent, BytesRecv int64
	Transactions         int64
	LocalCPU, RemoteCPU  float64 // % utilisation, -1 if not measured
	LocalSD, RemoteSD    float64 // service demand: us/KB for streams, us/Tr for RR

	// LocalCPUStats and RemoteCPUStats hold the breakdown when measured.
	LocalCPUStats, RemoteCPUStats CPUStats
	// Socket buffer sizes: Local/Remote Send/Recv, at setup and at the end.
	LSS, LSR, RSS, RSR             int
	LSSEnd, LSREnd, RSSEnd, RSREnd int
	// Message sizes actually used.
	LocalSendSize, LocalRecvSize   int
	RemoteSendSize, RemoteRecvSize int
	ReqSize, RespSize              int
	LocalSendCalls, LocalRecvCalls int64
	// What the server reported.
	RemoteBytesSent, RemoteBytesRecv int64
	RemoteSendCalls, RemoteRecvCalls int64
	RemoteTrans                      int64
	RemoteElapsed                    float64
	RemoteCongControl                string
	// FailedSends counts datagrams the local side could not send (UDP).
	FailedSends int64
	// SendThroughputMbps is the rate the client offered in UDP_STREAM, where
	// ThroughputMbps is what netserver received (datagrams can be lost).
	SendThroughputMbps float64
	// MSS is the data connection's TCP_MAXSEG (TCP tests; -1 for UDP).
	MSS int
	// Buffer ring widths netperf computes for each side (reported by the
	// output selectors).
	LocalSendWidth, LocalRecvWidth, RemoteSendWidth, RemoteRecvWidth int
	// Retransmissions of the data connection (tcp_info), -1 when not
	// known (UDP, TCP_CRR).
	LocalRetrans, RemoteRetrans int
	// LocalCongControl is the data connection's congestion control.
	LocalCongControl string
	// Latency in microseconds (with Config.Latency): of each transaction
	// in RR tests, of each send or receive call in stream tests.
	MinLatency, MaxLatency, MeanLatency, P50Latency, P90Latency, P99Latency, StddevLatency float64
	// Confidence holds the iteration outcome when -i was used.
	Confidence *Confidence
}

// Confidence is the outcome of repeated iterations (-i/-I).
type Confidence struct {
	Iterations int
	Level      int
	Width      float64
	// Throughput, LocalCPU and RemoteCPU are the achieved interval widths
	// as netperf reports them: the percentage of the mean the confidence
	// interval spans (0 for quantities not measured).
	Throughput, LocalCPU, RemoteCPU float64
	// Met reports whether every measured quantity reached the width.
	Met bool
}

type testKind struct {
	name      string
	sockType  int32 // 1 stream, 2 dgram
	proto     int32
	direction int32 // server's view
	rr, crr   bool
}

var kinds = map[string]testKind{
	TCPStream: {TCPStream, 1, 6, proto.DirServerRecvs, false, false},
	TCPMaerts: {TCPMaerts, 1, 6, proto.DirServerSends, false, false},
	TCPRR:     {TCPRR, 1, 6, proto.DirBoth, true, false},
	TCPCRR:    {TCPCRR, 1, 6, proto.DirBoth, true, true},
	UDPStream: {UDPStream, 2, 17, proto.DirServerRecvs, false, false},
	UDPRR:     {UDPRR, 2, 17, proto.DirBoth, true, false},
}

func (k testKind) udp() bool { return k.sockType == 2 }

// clientSends reports whether the client transmits bulk data.
func (k testKind) clientSends() bool { return k.direction&proto.DirServerRecvs != 0 }

// KnownTest reports whether name is one of the six supported tests.
func KnownTest(name string) bool {
	_, ok := kinds[strings.ToUpper(name)]
	return ok
}

func lookupTest(name string) (testKind, error) {
	k, ok := kinds[strings.ToUpper(name)]
	if !ok {
		return k, fmt.Errorf("unsupported test %q (want one of TCP_STREAM, TCP_MAERTS, TCP_RR, TCP_CRR, UDP_STREAM, UDP_RR)", name)
	}
	return k, nil
}

// maxUDPPayload bounds UDP send sizes, as netperf does.
const maxUDPPayload = 65507

// maxSize bounds every size a Config may ask for: the control protocol
// carries sizes as 32-bit integers.
const maxSize = 1<<31 - 1

// params is a Config resolved against the local socket defaults.
type params struct {
	kind                  testKind
	lss, lsr              int // local socket buffers after setup
	sendSize, recvSize    int // local message sizes
	sendWidth, recvWidth  int
	reqSize, respSize     int
	remoteSend, remoteRcv int // requested remote message sizes, -1 default
}

func resolve(cfg *Config, k testKind, lss, lsr int) params {
	p := params{kind: k, lss: lss, lsr: lsr, remoteSend: -1, remoteRcv: -1}
	ls, rs, lr, rr := cfg.LocalSendSize, cfg.RemoteSendSize, cfg.LocalRecvSize, cfg.RemoteRecvSize
	if !k.rr {
		if k.clientSends() {
			ls, rr = orDefault(ls, cfg.SendSize), orDefault(rr, cfg.RecvSize)
		} else {
			rs, lr = orDefault(rs, cfg.SendSize), orDefault(lr, cfg.RecvSize)
		}
	}
	if rs > 0 {
		p.remoteSend = rs
	}
	if rr > 0 {
		p.remoteRcv = rr
	}
	p.sendSize, p.recvSize = ls, lr
	switch {
	case k.rr:
		p.reqSize, p.respSize = max(cfg.ReqSize, 1), max(cfg.RespSize, 1)
		p.sendWidth, p.recvWidth = 1, 1
	case k.clientSends():
		if p.sendSize <= 0 {
			// choose_send_size: the socket buffer, capped for UDP.
			p.sendSize = 4096
			if lss > 0 {
				p.sendSize = lss
				if k.udp() && p.sendSize > maxUDPPayload {
					p.sendSize = maxUDPPayload
				}
			}
		}
		p.sendWidth = max(lss/p.sendSize+1, 2)
	default:
		if p.recvSize <= 0 {
			p.recvSize = 4096
			if lsr > 0 {
				p.recvSize = lsr
			}
		}
		p.recvWidth = max(lsr/p.recvSize+1, 2)
	}
	return p
}

func orDefault(v, def int) int {
	if v != 0 {
		return v
	}
	return def
}

// buildRequest fills the DO_OMNI request for one iteration. dataPort is the
// server data port to ask for (0 = ephemeral), netperfPort the client's data
// port when it is known before the request (UDP, CRR).
func buildRequest(cfg *Config, p params, family int32, server [4]uint32, dataPort, netperfPort int) proto.Request {
	k := p.kind
	r := proto.Request{
		CPUAffinity:  -1,
		SendBufSize:  -1,
		SendSize:     int32(p.remoteSend),
		SendAlign:    8,
		SendWidth:    int32(p.sendWidth),
		RequestSize:  -1,
		RecvBufSize:  -1,
		RecvSize:     int32(p.remoteRcv),
		RecvAlign:    8,
		RecvWidth:    int32(p.recvWidth),
		ResponseSize: -1,
		SendDirty:    -1,
		RecvDirty:    -1,
		RecvClean:    -1,
		DataPort:     int32(dataPort),
		IPFamily:     family,
		SocketType:   k.sockType,
		Protocol:     k.proto,
		Direction:    k.direction,
		NetperfPort:  int32(netperfPort),
		NetserverIP:  server,
		SocketPrio:   -1,
		SocketTos:    -1,
	}
	if cfg.BindRemoteCPU {
		r.CPUAffinity = int32(cfg.RemoteCPUAffinity)
	}
	if cfg.RemoteSendBuf > 0 {
		r.SendBufSize = int32(cfg.RemoteSendBuf)
	}
	if cfg.RemoteRecvBuf > 0 {
		r.RecvBufSize = int32(cfg.RemoteRecvBuf)
	}
	if k.rr {
		r.RequestSize, r.ResponseSize = int32(p.reqSize), int32(p.respSize)
	}
	if !(k.udp() && !k.rr) || cfg.AllowRouting {
		r.Flags |= proto.FlagRoutingAllowed // UDP_STREAM sets SO_DONTROUTE
	}
	if cfg.RemoteCPU {
		r.Flags |= proto.FlagMeasureCPU
	}
	if k.crr {
		r.Flags |= proto.FlagConnectTest
	}
	if cfg.NoDelay {
		r.Flags |= proto.FlagNoDelay
	}
	if cfg.Transactions > 0 {
		r.TestLength = int32(-cfg.Transactions)
	} else {
		// The wire carries whole seconds; round sub-second API durations up
		// so the server's timer never ends before the client's.
		r.TestLength = int32(max((cfg.Duration+time.Second-1)/time.Second, 1))
	}
	return r
}
