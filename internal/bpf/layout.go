package bpf

// The constants of include/filter.h the Go side uses. The structs are
// bpf2go's (filter_bpfel.go); consts_test.go checks every value here, and
// ruleset's FR_* flags, against the header's #defines.

// Capacity of the kernel rule storage.
const (
	MaxRules   = 4194304 // RULE_CAP: rules a set may hold (storage is sized from the set)
	idxRules   = 16384   // IDX_RULES: the bitmap index covers sets this large
	MaxLists   = 512     // lists per slot: in, out, count in, count out, groups
	maxDepth   = 16      // group nesting the scan follows
	ifaceSlots = 4096    // IFACE_SLOTS: the link-layer length table
	// scanBudget is the steps one scan may take (SCAN_BUDGET, bpf_loop's
	// limit); CompileSet refuses a set that could need more.
	scanBudget = 8388608
	numSlots   = 3
	blockBits  = 4 // the index works on blocks of 1<<blockBits rules
	numBlocks  = idxRules >> blockBits
	blockWord  = numBlocks / 64
	logSnap    = 128
)

// List ids within a slot; groups start at listGroup0.
const (
	listIn      = 0
	listOut     = 1
	listAcctIn  = 2
	listAcctOut = 3
	listGroup0  = 4
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

// Config keys (CFG_* in filter.h; the packet path's are 1..8, one line).
const (
	cfgInactive  = 0
	cfgActive    = 1
	cfgEnabled   = 2
	cfgDefPass   = 3
	cfgAnyL3     = 4 // attached to an interface without a link-layer header
	cfgLogFlags  = 5
	cfgIndex0    = 6 // 6..8: the slot's IDX_* and FEAT_* bits
	cfgClock     = 9
	cfgMinTTL    = 10
	cfgStateMax  = 11
	cfgToTCP     = 12
	cfgToUDP     = 24
	cfgToUDPAck  = 25
	cfgToICMP    = 26
	cfgToICMPAck = 27
	cfgToIP      = 28
	cfgStateLog  = 29
	cfgFragTTL   = 30
	cfgStateSize = 31
	cfgWMHigh    = 32
	cfgWMLow     = 33
	cfgWMFreq    = 34
	cfgDCA       = 35
	cfgGen0      = 36 // 36..38: generation of each slot's rules
	cfgSwapLog   = 39 // user space only: an ipf -s in progress (see Swap)
	cfgToken     = 40 // user space only: Token/SetToken
	cfgSetNo     = 41 // IPFilter set number (0/1) of the active set; user space only
	cfgAllIfaces = 42 // user space only: the filter belongs on every interface
	cfgSpec      = 43 // user space only: progSpec.key of the attached programs (0: unknown)
	cfgClsact    = 44 // user space only: attached with the clsact fallback (generic programs)
	cfgNATOff    = 45 // user space only: ipf -T nat_inline=0 (NAT's path never inside the filter)
	cfgNATInline = 46 // user space only: NAT's path inside the filter: jiffy length | halves<<32 (0 off)
	cfgFragSize  = 47 // frag_size: the fragment cache's most entries (0, an older configuration: fragSizeDef)
	cfgNetNS     = 48 // user space only: NetNSID of the network namespace it filters in (netns_linux.go; 0 none yet)
	cfgN         = 64
)

// Values of cfgIndex0+slot (IDX_* in filter.h): which index dimensions the
// slot has; 0 is no index.
const (
	idxOn    = 1 // destination address and port
	idxSrc   = 2 // source address
	idxSport = 4 // source port

	// What else the slot's rules use (FEAT_* in filter.h), in the same
	// word: a packet skips what no rule needs.
	featAcctIn  = 0x100
	featAcctOut = 0x200
	featClock   = 0x400    // keep state/frags, pps, keep limit
	featRoute   = 0x800    // to, dup-to, fastroute
	featIdle    = 0x1000   // no rules in the main lists
	featLimits  = 0x2000   // pps, keep limit
	featLog     = 0x4000   // rules that log
	featRet     = 0x8000   // return-* (or a keep limit's)
	featPool    = 0x10000  // pools, group-map calls
	featExpr    = 0x20000  // exp { } rules
	featFrags   = 0x40000  // k_feat only: fragment entries may exist
	featHotIn   = 0x80000  // in: the scans need no index (compact main list)
	featHotOut  = 0x100000 // out: the same (compact main list, accounting too)

	// k_mode of a specialised program (KM_* in filter.h)
	kmConfig = 0
	kmOff    = 1
	kmIdle   = 2
)

// State entry flags (SF_* in filter.h) the Go side reads.
const (
	sfSwap = 0x02 // the entry's source is its canonical key's dst
	sfTwin = 0x04 // the key's twin holds the flow's entry the other way
	// sfGFill: a wildcard entry filled in where it was by a packet to
	// its group, under its group key (the wildcard key, dst the group)
	sfGFill = 0x08
)

// Statistics indexes (ST_* in filter.h).
const (
	stDir      = 32
	stPass     = 0
	stPkts     = 1
	stMiss     = 2
	stStKept   = 3
	stBlock    = 14
	stShort    = 5
	stBad      = 6
	stLogPass  = 7
	stLogBlock = 8
	stLogged   = 9
	stLogFail  = 10
	stAcct     = 11
	stStLost   = 12
	stIPv6     = 13
	stNomatch  = 4
	stFrag     = 15
	stNotIP    = 16
	// stClean + (nomatch) + 2*(IPv6): a packet passed on the idle path
	// or by a constant list, counted once for pass, pkts and miss (and
	// nomatch, IPv6); statBlock adds it to each
	stClean        = 17
	stCleanNomatch = 1
	stCleanIPv6    = 2
	stRST          = 64
	stICMPRep      = 65
	stAddTCP       = 66
	stAddUDP       = 67
	stAddICMP      = 68
	stAddOther     = 69
	stMaxRef       = 72
	stExpired      = 73
	stClosed       = 74
	stDCA          = 75
	stPPS          = 76
	stRetFail      = 77
	stOOW          = 78
	stRouted       = 80
	stDupped       = 81
	stRouteErr     = 82
	stScanCut      = 83
	stDCAFull      = 86
	stSrcFull      = 87
	numStats       = 128
	numReasons     = 32
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

// The compact lists and compact matches (HOT_*, CM_* in filter.h).
const (
	hotMax = 32
	// hotlist.ok (HOT_* in filter.h)
	hotCompact = 1
	hotNoIdx   = 2
	cmOut      = 0x0001
	cmNever    = 0x0002
	cmProto    = 0x0004
	cmTCPUDP   = 0x0008
	cmSrc      = 0x0010
	cmNotSrc   = 0x0020
	cmDst      = 0x0040
	cmNotDst   = 0x0080
	cmPorts    = 0x0100
	cmSport    = 0x0200
	cmDport    = 0x0400
	cmFlags    = 0x0800
	cmFull     = 0x1000
	cmRun      = 0x2000
	cmRun4     = 0x4000
	cmRunSrc   = 0x8000
)

// Table sizes and the sweeper (filter.h).
const (
	stateCap = 262144 // STATE_CAP: the most state entries; state_max's ceiling
	// STATE_STRIPES: a state entry's counters, one line per CPU mod this
	stateStripes = 4
	dcaCap       = 65536 // DCA_CAP
	srcCap       = 65536 // SRC_CAP: max-srcs counts (c/lib/srcs.h)
	sweepNS      = 500000000
	fragCap      = 4096 // FRAG_CAP: the fragment cache's map; frag_size's ceiling
	fragSizeDef  = 257  // FRAG_SIZE_DEF: frag_size where the configuration has none
)

// sluice_control operations (CTL_* in filter.h).
const (
	ctlArm   = 1
	ctlKill  = 2
	ctlSweep = 3
	ctlKeys  = 256
	// struct ctl_msg's magic: a call's own arguments, the program's answer
	ctlMagic   = 0x51c7c7a1
	ctlDone    = 0x51c7c7a2
	ctlMsgSize = 24
)

// ctlMsg is struct ctl_msg (filter.h): a control call's own arguments and
// result, after its packet's Ethernet header. bpf2go writes no type for it
// (no map holds one): TestLayoutConstants checks its size.
type ctlMsg struct {
	Magic, Op, N, Pad uint32
	Removed           uint64
}

// Log record kinds.
const (
	logPacket = 0
	logState  = 1
)

// Call functions (CALL_* in filter.h).
const (
	callSrcGrpmap = 1
	callDstGrpmap = 2
)

// Route flags (RT_* in filter.h).
const (
	rtTo    = 0x01
	rtDup   = 0x02
	rtFast  = 0x04
	rtReply = 0x08
)

const (
	textChunk   = 4096
	listNameLen = 24
)

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
	RSNScanCut  = 23
)

// stDMSlots is the number of st_dm's slots (ST_DM_SLOTS in filter.h): the
// state table's direct-mapped array (est11, est15).
const stDMSlots = 32768
