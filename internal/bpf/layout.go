package bpf

import "fmt"

// Go mirrors of include/filter.h. layout_test.go checks every struct's size
// and field offsets against the BTF of the compiled object, so a change on
// one side that is not made on the other fails the tests.

// Capacity of the kernel rule storage.
const (
	MaxRules  = 16384 // rules per slot (all lists and groups of one set)
	MaxLists  = 512   // lists per slot: in, out, count in, count out, groups
	maxDepth  = 16    // group nesting the scan follows
	numSlots  = 3
	blockBits = 4 // the index works on blocks of 1<<blockBits rules
	numBlocks = MaxRules >> blockBits
	blockWord = numBlocks / 64
	logSnap   = 128
)

// List ids within a slot; groups start at listGroup0.
const (
	listIn      = 0
	listOut     = 1
	listAcctIn  = 2
	listAcctOut = 3
	listGroup0  = 4
)

// Rule action flags (FR_* in filter.h).
const (
	frCmdMask    = 0x0000f
	frLogOnly    = 0x00000
	frBlock      = 0x00001
	frPass       = 0x00002
	frAuth       = 0x00003
	frPreauth    = 0x00004
	frAccount    = 0x00005
	frSkip       = 0x00006
	frNomatchCmd = 0x00007
	frCallNow    = 0x00010
	frQuick      = 0x00080
	frKeepFrag   = 0x00100
	frKeepState  = 0x00200
	frRetRST     = 0x00800
	frRetICMP    = 0x01000
	frFakeICMP   = 0x03000
	frRetMask    = 0x03800
	frOutQue     = 0x04000
	frInQue      = 0x08000
	frLogBody    = 0x10000
	frLogFirst   = 0x20000
	frLog        = 0x40000
	frLogOrBlock = 0x100000
	frFragStrict = 0x200000
	frStStrict   = 0x400000
	frNoICMPErr  = 0x1000000
	frStLoose    = 0x2000000
	frKeepLimit  = 0x4000000
	frNomatch    = 0x8000000
	frLimitCumul = 0x10000000
)

// The datapath's FR_* action bits, as RuleInfo.Flags and LogRecord.Pass
// carry them. They are the datapath's own numbering (filter.h), not
// IPFilter's ip_fil.h values; the command-field values (FRCmdMask) match.
const (
	FRCmdMask    = frCmdMask
	FRLogOnly    = frLogOnly // command 0: a `log` rule
	FRBlock      = frBlock
	FRPass       = frPass
	FRAuth       = frAuth
	FRPreauth    = frPreauth
	FRAccount    = frAccount
	FRSkip       = frSkip
	FRNomatchCmd = frNomatchCmd
	FRQuick      = frQuick
	FRKeepFrag   = frKeepFrag
	FRKeepState  = frKeepState
	FRRetRST     = frRetRST
	FRRetICMP    = frRetICMP
	FRFakeICMP   = frFakeICMP
	FRRetMask    = frRetMask
	FROutQue     = frOutQue
	FRInQue      = frInQue
	FRLogBody    = frLogBody
	FRLogFirst   = frLogFirst
	FRLog        = frLog
	FRLogOrBlock = frLogOrBlock
	FRFragStrict = frFragStrict
	FRStStrict   = frStStrict
	FRNoICMPErr  = frNoICMPErr
	FRStLoose    = frStLoose
	FRKeepLimit  = frKeepLimit
	FRNomatch    = frNomatch // logged because nothing matched (ipf -l nomatch)
	FRLimitCumul = frLimitCumul
)

// Rule test bits (M_* in filter.h).
const (
	mIface   = 0x0001
	mSrc     = 0x0002
	mDst     = 0x0004
	mNotSrc  = 0x0008
	mNotDst  = 0x0010
	mProto   = 0x0020
	mTCPUDP  = 0x0040
	mTos     = 0x0080
	mTTL     = 0x0100
	mFlags   = 0x0200
	mICMP    = 0x0400
	mSport   = 0x0800
	mDport   = 0x1000
	mWith    = 0x2000
	mOpt     = 0x4000
	mNever   = 0x8000
	mSec     = 0x10000
	mSrcPool = 0x20000
	mDstPool = 0x40000
	mExpr    = 0x80000
)

// exp { "..." } storage (expr_val in filter.h).
const (
	maxExprs    = 4096 // values per slot
	maxExprVals = 64   // values per rule
)

// rawExpr mirrors struct expr_val.
type rawExpr struct {
	W     [4]uint32
	M     [4]uint32
	Num   uint32
	Mask  uint32
	Op    uint8
	Proto uint8
	Not   uint8
	End   uint8
}

// Config keys.
const (
	cfgActive    = 0
	cfgInactive  = 1
	cfgEnabled   = 2
	cfgDefPass   = 3
	cfgClock     = 4
	cfgLogFlags  = 5
	cfgMinTTL    = 6
	cfgStateMax  = 7
	cfgIndex0    = 8
	cfgSetNo     = 11 // IPFilter set number (0/1) of the active set; user space only
	cfgToTCP     = 12
	cfgToUDP     = 24
	cfgToUDPAck  = 25
	cfgToICMP    = 26
	cfgToICMPAck = 27
	cfgToIP      = 28
	cfgStateLog  = 29
	cfgN         = 32
)

// Values of cfgIndex0+slot (IDX_* in filter.h): which index dimensions the
// slot has; 0 is no index.
const (
	idxOn    = 1 // destination address and port
	idxSrc   = 2 // source address
	idxSport = 4 // source port
)

// Statistics indexes.
const (
	stDir      = 16
	stPass     = 0
	stBlock    = 1
	stNomatch  = 2
	stAcct     = 3
	stShort    = 4
	stBad      = 5
	stLogPass  = 6
	stLogBlock = 7
	stLogged   = 8
	stLogFail  = 9
	stStKept   = 10
	stStLost   = 11
	stIPv6     = 12
	stPkts     = 13
	stFrag     = 14
	stNotIP    = 15
	stRST      = 32
	stICMPRep  = 33
	stAddTCP   = 34
	stAddUDP   = 35
	stAddICMP  = 36
	stAddOther = 37
	stHits     = 38
	stMisses   = 39
	stMaxRef   = 40
	stExpired  = 41
	stClosed   = 42
	stDCA      = 43
	stPPS      = 44
	stRetFail  = 45
	stOOW      = 46
	stRouted   = 48
	stDupped   = 49
	stRouteErr = 50
	numStats   = 64
	numReasons = 32
)

// Port operators.
const (
	portEq    = 1
	portNe    = 2
	portLt    = 3
	portGt    = 4
	portLe    = 5
	portGe    = 6
	portOut   = 7
	portIn    = 8
	portRange = 9
)

// Log record kinds.
const (
	logPacket = 0
	logState  = 1
)

// rawRule mirrors struct rule.
type rawRule struct {
	Action     uint32
	Match      uint32
	Ifindex    [2]uint32
	Src        [4]uint32
	Smask      [4]uint32
	Dst        [4]uint32
	Dmask      [4]uint32
	WithMask   uint32
	WithWant   uint32
	OptMask    uint32
	OptWant    uint32
	SportLo    uint16
	SportHi    uint16
	DportLo    uint16
	DportHi    uint16
	SportOp    uint8
	DportOp    uint8
	Family     uint8
	Proto      uint8
	Tos        uint8
	TTL        uint8
	Tcpf       uint8
	TcpfMask   uint8
	ICMPVal    uint16
	ICMPMask   uint16
	Head       uint16
	RetCode    uint8
	SecMask    uint8
	SecWant    uint8
	Pad0       [3]uint8
	Skip       uint32
	PPS        uint32
	StateLimit uint32
	KeepLimit  uint32
	AgeFwd     uint32
	AgeRev     uint32
	Logtag     uint32
	GroupNo    uint32
	RuleNo     uint32
	SrcPool    uint16
	DstPool    uint16
	ToIfindex  uint32
	DupIfindex uint32
	ToNH       [4]uint32
	DupNH      [4]uint32
	Route      uint8
	ToNHFam    uint8
	DupNHFam   uint8
	Pad1       uint8
	ExprStart  uint32
	ExprCount  uint32
	CallTable  uint16
	Call       uint8
	Pad2       uint8
}

// Call functions (CALL_* in filter.h).
const (
	callSrcGrpmap = 1
	callDstGrpmap = 2
)

// Route flags (RT_* in filter.h).
const (
	rtTo   = 0x01
	rtDup  = 0x02
	rtFast = 0x04
)

// rawList mirrors struct list.
type rawList struct {
	Start uint32
	Count uint32
}

// rawCounter mirrors struct counter.
type rawCounter struct {
	Pkts  uint64
	Bytes uint64
}

// rawLPMKey mirrors struct lpm_key.
type rawLPMKey struct {
	Prefixlen uint32
	Slot      uint32
	Family    uint32
	Addr      [4]uint32
}

// rawPortKey mirrors struct port_key.
type rawPortKey struct {
	Slot uint32
	Port uint32
}

// rawBlocks mirrors struct blocks.
type rawBlocks struct {
	W [blockWord]uint64
}

// rawStateKey mirrors struct state_key.
type rawStateKey struct {
	Src    [4]uint32
	Dst    [4]uint32
	Sport  uint16
	Dport  uint16
	Proto  uint8
	Family uint8
	Wild   uint16 // 1: wildcard destination, filled by the first reply
}

// rawTCPSide mirrors struct tcp_side.
type rawTCPSide struct {
	End    uint32
	Maxend uint32
	Maxwin uint32
	Wscale uint8
	Wflags uint8
	State  uint8
	Pad    uint8
}

// rawStateEntry mirrors struct state_entry.
type rawStateEntry struct {
	Created  uint64
	Expire   uint64
	Last     uint64
	Pkts     [4]uint64
	Bytes    [4]uint64
	Pass     uint32
	Rule     uint32
	Slot     uint32
	Ifindex  [4]uint32
	Age      [2]uint32
	Logtag   uint32
	RuleNo   uint32
	GroupNo  uint32
	Flags    uint8
	Secclass uint8
	Pad      [2]uint8
	TCP      [2]rawTCPSide
	Flx      [4]uint32
	Opt      uint32
}

// rawLogRec mirrors struct log_rec.
type rawLogRec struct {
	TS      uint64
	Kind    uint32
	Ifindex uint32
	RuleNo  uint32
	GroupNo uint32
	Pass    uint32
	Reason  uint32
	PFlags  uint32
	Plen    uint32
	Logtag  uint32
	Caplen  uint16
	Dir     uint8
	Family  uint8
	Data    [logSnap]byte
}

const (
	textLen     = 376
	listNameLen = 24
)

// rawRuleText mirrors struct rule_text.
type rawRuleText struct {
	Len  uint32
	Pad  uint32
	Text [textLen]byte
}

// rawListMeta mirrors struct list_meta.
type rawListMeta struct {
	Dir  uint32
	Acct uint32
	Name [listNameLen]byte
}

// Block reasons in Stats.Drops and LogRecord.Reason (IPFilter's FRB_*
// numbering as ipmon prints it; 20 and above are Sluice's own).
const (
	RSNNone     = 0
	RSNFilter   = 1
	RSNLogFail  = 2
	RSNPPS      = 3
	RSNJumbo    = 4
	RSNStateAdd = 6
	RSNPullup   = 13
	RSNBadFrag  = 15
	RSNBad      = 20
	RSNDCA      = 21
)

// ReasonName returns ipmon's name for a block reason.
func ReasonName(r uint32) string {
	switch r {
	case RSNFilter:
		return "filter-rule"
	case RSNLogFail:
		return "log-or-block_1"
	case RSNPPS:
		return "pps-rate"
	case RSNJumbo:
		return "jumbogram"
	case RSNStateAdd:
		return "state_add-fail"
	case RSNPullup:
		return "pullup-fail"
	case RSNBadFrag:
		return "bad-frag"
	case RSNBad:
		return "bad-packet"
	case RSNDCA:
		return "keep-limit"
	}
	return fmt.Sprintf("reason-%d", r)
}

// rawFragKey mirrors struct frag_key.
type rawFragKey struct {
	Src    [4]uint32
	Dst    [4]uint32
	ID     uint32
	Proto  uint8
	Family uint8
	Pad    uint16
}

// rawFragEntry mirrors struct frag_entry.
type rawFragEntry struct {
	Expire  uint64
	Pass    uint32
	RuleNo  uint32
	GroupNo uint32
	Logtag  uint32
}
