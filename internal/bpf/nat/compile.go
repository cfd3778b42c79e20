//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	gonat "sluice/internal/nat"
	"sluice/internal/rules/ipnat"
)

// Image is a NAT rule set compiled for the kernel's maps: the rules in
// file order, the order each direction tries them in, and their printed
// text (what ipnat -l lists). It is built from the Go engine's compiled
// rules, field by field, so the kernel allocates and matches as the
// engine does.
type Image struct {
	rules  []natNatRule
	state  []natNatRstate
	texts  []string
	order  [2][]uint16   // by direction (DIR_IN, DIR_OUT), hash table order
	bucket [2][]uint8    // each rule's bucket in its direction's table
	masks  [2][2][]uint8 // by direction and family: the masks walked, longest first
	ifaces []string
}

// Len returns the number of rules.
func (im *Image) Len() int { return len(im.rules) }

// Interfaces returns the interfaces the rules name, in order, each once.
func (im *Image) Interfaces() []string { return append([]string(nil), im.ifaces...) }

// CompileOptions tune Compile.
type CompileOptions struct {
	// File names the rules' source in error messages.
	File string
	// Ifindex resolves an interface name; nil uses the host's
	// interfaces. A name that does not resolve makes the rule match
	// nothing until the rules are loaded again (as IPFilter binds
	// interfaces by name when rules are loaded or synced).
	Ifindex func(name string) (int, bool)
}

// ErrUnsupported wraps errors.ErrUnsupported for what the engine does but
// the kernel datapath cannot.
var ErrUnsupported = fmt.Errorf("not supported by the kernel NAT datapath (it runs in ipftest -N only): %w", errors.ErrUnsupported)

// ifNever is the ifindex of a rule interface that does not exist.
const ifNever = 0xffffffff

// Compile compiles rules for the kernel. Rules the kernel cannot run as
// the engine does are refused with an error wrapping ErrUnsupported and
// naming the rule's position; nothing is partially compiled.
func Compile(rules []*ipnat.Rule, opts CompileOptions) (*Image, error) {
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("%d NAT rules: the kernel datapath holds at most %d", len(rules), MaxRules)
	}
	file := opts.File
	if file == "" {
		file = "ipnat.conf"
	}
	for _, r := range rules {
		if err := supported(r); err != nil {
			return nil, fmt.Errorf("%s:%d:%d: %s: %w", file, r.Pos.Line, r.Pos.Col, err.Error(), ErrUnsupported)
		}
	}
	eng, err := engineCompile(rules)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	crs, maps, rdrs := eng.Compiled()
	ifindex := opts.Ifindex
	if ifindex == nil {
		ifindex = func(name string) (int, bool) {
			ifc, err := net.InterfaceByName(name)
			if err != nil {
				return 0, false
			}
			return ifc.Index, true
		}
	}
	im := &Image{}
	// Each name is looked up once per load: net.InterfaceByName reads
	// every interface from the kernel, once per rule would make a big
	// ipnat.conf cost seconds.
	seen := map[string]uint32{}
	resolve := func(name string) uint32 {
		if name == "" || name == "*" {
			return 0
		}
		if idx, ok := seen[name]; ok {
			return idx
		}
		im.ifaces = append(im.ifaces, name)
		idx := uint32(ifNever)
		if i, ok := ifindex(name); ok && i > 0 {
			idx = uint32(i)
		}
		seen[name] = idx
		return idx
	}
	for _, cr := range crs {
		nr, st := compileRule(cr)
		nr.Inif = resolve(cr.InIf)
		nr.Outif = resolve(cr.OutIf)
		im.rules = append(im.rules, nr)
		im.state = append(im.state, st)
		im.texts = append(im.texts, strings.TrimRight(cr.Rule.String(), "\n"))
	}
	for _, i := range rdrs {
		im.add(dirIn, i, crs[i].V6, crs[i].RdrBucket, crs[i].RdrMask)
	}
	for _, i := range maps {
		im.add(dirOut, i, crs[i].V6, crs[i].MapBucket, crs[i].MapMask)
	}
	for dir := range im.masks {
		for f := range im.masks[dir] {
			slices.Sort(im.masks[dir][f])
			slices.Reverse(im.masks[dir][f])
		}
	}
	return im, nil
}

// add appends rule i to a direction's table, and its mask to the masks
// its family's packets walk.
func (im *Image) add(dir, i int, v6 bool, bucket, mask int) {
	im.order[dir] = append(im.order[dir], uint16(i))
	im.bucket[dir] = append(im.bucket[dir], uint8(bucket))
	f := 0
	if v6 {
		f = 1
	}
	if !slices.Contains(im.masks[dir][f], uint8(mask)) {
		im.masks[dir][f] = append(im.masks[dir][f], uint8(mask))
	}
}

// ErrEngine is returned (wrapped) when the Go engine cannot compile a rule
// it was handed: the rules are refused rather than the command crashing.
var ErrEngine = errors.New("the NAT engine cannot compile the rules")

// engineCompile compiles rules with the Go engine, turning a panic into an
// error.
func engineCompile(rules []*ipnat.Rule) (n *gonat.NAT, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = nil, fmt.Errorf("%w: %v", ErrEngine, p)
		}
	}()
	return gonat.New(&ipnat.File{Rules: rules}, gonat.Config{})
}

// supported returns why the kernel cannot run r as the engine does, or nil.
func supported(r *ipnat.Rule) error {
	switch r.Type {
	case ipnat.DivertIn, ipnat.DivertOut:
		return errors.New("divert rules wrap packets in IP/UDP")
	}
	for _, a := range []ipnat.Addr{r.Src, r.Dst, r.Orig, r.New, r.NewSrc, r.NewDst} {
		if a.Kind == ipnat.AddrLookup {
			return fmt.Errorf("%s/%s: pool, hash and dstlist operands", a.Table, a.Name)
		}
	}
	if r.Tag != "" {
		return fmt.Errorf("tag %s: the kernel filter does not hand its set-tag(nat=...) to NAT", r.Tag)
	}
	if r.ProxyName != "" && !strings.EqualFold(r.ProxyName, "ftp") {
		return fmt.Errorf("proxy %s: only the ftp proxy runs in the kernel", r.ProxyName)
	}
	if r.Age[0] < 0 || r.Age[1] < 0 || r.Age[0] > 1<<30 || r.Age[1] > 1<<30 {
		return fmt.Errorf("age %d/%d out of range", r.Age[0], r.Age[1])
	}
	return nil
}

// Port comparison operators (PO_*).
var portOps = map[string]uint8{"": 0, "=": 1, "!=": 2, "<": 3, ">": 4, "<=": 5, ">=": 6, "<>": 7, "><": 8, ":": 9}

func compileOp(o gonat.Operand) natNatOp {
	return natNatOp{A: o.A, M: o.M, Kind: uint32(o.Kind), Masklen: uint32(o.MaskLen)}
}

// compileRule translates one engine rule, field by field.
func compileRule(cr gonat.CompiledRule) (natNatRule, natNatRstate) {
	r := cr.Rule
	var f uint32
	set := func(c bool, bit uint32) {
		if c {
			f |= bit
		}
	}
	set(r.No, rfNo)
	set(cr.V6, rfV6)
	set(r.Filter, rfFilter)
	set(r.NotSrc, rfNotSrc)
	set(cr.NotDst, rfNotDst)
	set(r.TCP, rfTCP)
	set(r.UDP, rfUDP)
	set(r.ICMPQuery, rfICMPQ)
	set(r.Portmap, rfPortmap)
	set(r.PortAuto, rfAuto)
	set(r.Sequential, rfSeq)
	set(r.ICMPIDMap, rfICMPIDMap)
	set(r.ICMPIDMap && r.PortTest(), rfIDMapQ)
	set(r.FixedDPort, rfFixedDP)
	set(r.RoundRobin, rfRR)
	set(r.Sticky, rfSticky)
	set(strings.EqualFold(r.ProxyName, "ftp"), rfFTP)
	set(r.ProxyName != "", rfProxy)
	nr := natNatRule{
		Flags:     f,
		Type:      uint8(r.Type),
		Proto:     uint8(r.Proto),
		SportOp:   portOps[r.SrcPort.Op],
		DportOp:   portOps[r.DstPort.Op],
		SportP1:   uint16(r.SrcPort.P1),
		SportP2:   uint16(r.SrcPort.P2),
		DportP1:   uint16(r.DstPort.P1),
		DportP2:   uint16(r.DstPort.P2),
		OportMin:  uint16(r.OPortMin),
		OportMax:  uint16(r.OPortMax),
		Spmin:     uint16(r.SPMin),
		Spmax:     uint16(r.SPMax),
		Dpmin:     uint16(r.DPMin),
		Dpmax:     uint16(r.DPMax),
		ProxyPort: uint16(r.ProxyPort),
		Mss:       uint16(r.MSSClamp),
		Age:       [2]uint32{uint32(r.Age[0]), uint32(r.Age[1])},
		Ppip:      uint32(cr.PPIP),
		Ippip:     uint32(cr.IPPIP),
		Mapmask:   uint32(cr.MapMask),
		Rdrmask:   uint32(cr.RdrMask),
		Src:       compileOp(cr.Src),
		Dst:       compileOp(cr.Dst),
		Orig:      compileOp(cr.Orig),
		Nw:        compileOp(cr.New),
		Nsrc:      compileOp(cr.NewSrc),
		Ndst:      compileOp(cr.NewDst),
	}
	st := natNatRstate{Snip: cr.SNip, Dnip: cr.DNip, Spnext: int32(cr.SPNext), Dpnext: int32(cr.DPNext)}
	return nr, st
}
