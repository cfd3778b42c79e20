// Package topo builds the two-host test bed of `sluice bench`: a system
// under test (SUT) and a peer, each a network namespace, joined by a veth
// pair. Addresses live only inside the namespaces, names are unique per
// run, and Close removes everything (callers defer it; the command also
// cancels on SIGINT/SIGTERM so the deferred Close runs).
//
// In remote mode (Options.Remote) no namespaces are made: the SUT is the
// namespace the process runs in and the peer is another machine that runs
// netserver.
package topo

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Role names one end of the test bed.
type Role int

const (
	// SUT is the system under test: configurations (filters, marking)
	// are applied to it. Which end runs the netperf client depends on
	// the test (see result.Test.Client); locally both run a netserver.
	SUT Role = iota
	// Peer is the other end; in remote mode a machine running netserver.
	Peer
)

// String returns "sut" or "peer".
func (r Role) String() string {
	switch r {
	case SUT:
		return "sut"
	case Peer:
		return "peer"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// Toggle is a tri-state switch for a link feature.
type Toggle int

const (
	// Default leaves the kernel's setting alone.
	Default Toggle = iota
	// On enables the feature.
	On
	// Off disables the feature.
	Off
)

// ParseToggle reads "", "default", "on" or "off".
func ParseToggle(s string) (Toggle, error) {
	switch strings.ToLower(s) {
	case "", "default":
		return Default, nil
	case "on", "true", "1":
		return On, nil
	case "off", "false", "0":
		return Off, nil
	}
	return Default, fmt.Errorf("topo: bad toggle %q (want on, off or default)", s)
}

// String returns "default", "on" or "off".
func (t Toggle) String() string {
	switch t {
	case On:
		return "on"
	case Off:
		return "off"
	}
	return "default"
}

// Options configure New. The zero value is a usable local test bed.
type Options struct {
	// Prefix starts the namespace names; default "slb". Names are
	// Prefix-PID-RANDOM-sut / -peer so Sweep can find leftovers of dead
	// processes without touching concurrent runs.
	Prefix string
	// MTU of both veth ends; 0 keeps the kernel default (1500).
	MTU int
	// GRO, GSO and TSO on the veth ends.
	GRO, GSO, TSO Toggle
	// CPUs, if not empty, pins every thread of the process to these
	// CPUs (the client and the in-process netserver share the process,
	// so pinning is per process, not per host).
	CPUs []int
	// Remote, if set, is the address of a machine running netserver:
	// no namespaces are created and the SUT is the current namespace.
	Remote string
}

// Host describes one end of the test bed as configurations see it.
type Host struct {
	Role Role
	// NetNS is the path of the host's network namespace (for
	// netperf.Config.NetNS or nftables.WithNetNSFd); "" means the
	// namespace the process was in when the test bed was made.
	NetNS string
	// Link is the name of the host's interface towards the other end,
	// Index its ifindex inside NetNS.
	Link  string
	Index int
	// Inside is, on the gateway of the gateway topology, the interface
	// towards the client (Link is the one towards the server); empty
	// elsewhere.
	Inside string
	// Speed is the line rate in bits/s of the link profile the
	// configuration is applied for (0: not shaped); the runner sets it
	// on the copy it hands to Apply.
	Speed uint64
	// Addr and Addr6 are the host's own IPv4 and IPv6 addresses,
	// PeerAddr and PeerAddr6 those of the other end (the IPv6 ones only
	// in remote mode, towards an IPv6 remote).
	Addr, Addr6         netip.Addr
	PeerAddr, PeerAddr6 netip.Addr

	topo *Topo
	do   func(func() error) error // hosts of a Gateway
}

// Do runs fn on an OS thread that is inside the host's namespace.
// Goroutines started by fn do not inherit the namespace, but sockets
// opened by fn stay in it.
func (h *Host) Do(fn func() error) error {
	if h.do != nil {
		return h.do(fn)
	}
	if h.topo == nil {
		return errors.New("topo: host is not part of a test bed")
	}
	return h.topo.Do(h.Role, fn)
}

// Addresses used inside the namespaces. They never leave the namespaces,
// so every run can use the same ones. The local test beds carry IPv4 only
// (IPv6 is off in their namespaces); IPv6 is used in remote mode when the
// remote's address is one.
var (
	SUTAddr  = netip.MustParseAddr("10.231.0.1")
	PeerAddr = netip.MustParseAddr("10.231.0.2")
)

const prefixLen4 = 30

// ErrNotSupported is returned where the OS lacks network namespaces.
var ErrNotSupported = errors.New("topo: not supported on this system")

// ErrRemote is returned by Do(Peer, …) in remote mode: the peer is
// another machine.
var ErrRemote = errors.New("topo: peer is a remote machine")

// Addresses of the gateway topology (client — gateway — server). The
// client dials ServiceAddr, which the server holds on its loopback and
// the gateway routes to it, so the same test reaches the server whether
// a configuration forwards it, masquerades it or redirects it (dnat/rdr
// of ServiceAddr to ServerAddr).
var (
	GWClientNet  = netip.MustParseAddr("10.232.1.0")
	ClientAddr   = netip.MustParseAddr("10.232.1.2")
	GWInsideAddr = netip.MustParseAddr("10.232.1.1")
	GWOutAddr    = netip.MustParseAddr("10.232.2.1")
	ServerAddr   = netip.MustParseAddr("10.232.2.2")
	ServiceAddr  = netip.MustParseAddr("10.232.9.9")
)

// GWRole names a namespace of the gateway topology.
type GWRole int

// The gateway topology's hosts: the netperf client, the gateway (the
// system under test, forwarding between its two links) and the server
// running netserver.
const (
	GWClient GWRole = iota
	GWGateway
	GWServer
)
