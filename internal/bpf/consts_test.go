package bpf

import (
	"bufio"
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sluice/internal/ipflog"
	"sluice/internal/packet"
	"sluice/internal/rules/ipf"
	"sluice/internal/ruleset"
	"sluice/internal/state"
)

// headerDefines returns the integer #defines of the C headers in
// c/include: every fact the program and the Go side share has one value,
// written in C and checked here against the Go constant of the same
// meaning.
func headerDefines(t *testing.T) map[string]int64 {
	t.Helper()
	files, err := filepath.Glob("c/include/*.h")
	if err != nil || len(files) == 0 {
		t.Fatalf("no headers in c/include: %v", err)
	}
	re := regexp.MustCompile(`^#define\s+([A-Z][A-Z0-9_]*)\s+(0x[0-9a-fA-F]+|[0-9]+)\b`)
	defs := map[string]int64{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			m := re.FindStringSubmatch(strings.TrimSpace(sc.Text()))
			if m == nil {
				continue
			}
			v, err := strconv.ParseInt(m[2], 0, 64)
			if err != nil {
				t.Fatalf("%s: %s: %v", f, m[1], err)
			}
			if old, ok := defs[m[1]]; ok && old != v {
				t.Errorf("%s defined twice: %#x and %#x", m[1], old, v)
			}
			defs[m[1]] = v
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return defs
}

// TestHeaderConstants compares the C headers' #defines with the Go
// constants: IPFilter's FR_* flags (ruleset, and ipflog's copy for log
// records), FI_* packet flags, TCP states, port operators, and the
// datapath's own numbering (config keys, statistics, reasons, ...).
func TestHeaderConstants(t *testing.T) {
	defs := headerDefines(t)
	want := map[string]int64{
		// IPFilter's ip_fil.h, as ruleset has them
		"FR_CALL": int64(ruleset.FRCall), "FR_BLOCK": int64(ruleset.FRBlock), "FR_PASS": int64(ruleset.FRPass),
		"FR_AUTH": int64(ruleset.FRAuth), "FR_PREAUTH": int64(ruleset.FRPreauth), "FR_ACCOUNT": int64(ruleset.FRAccount),
		"FR_SKIP": int64(ruleset.FRSkip), "FR_DECAPSULATE": int64(ruleset.FRDecap), "FR_CMDMASK": int64(ruleset.FRCmdMask),
		"FR_CALLNOW": int64(ruleset.FRCallNow), "FR_LOG": int64(ruleset.FRLog), "FR_NOTSRCIP": int64(ruleset.FRNotSrcIP),
		"FR_NOTDSTIP": int64(ruleset.FRNotDstIP), "FR_QUICK": int64(ruleset.FRQuick), "FR_KEEPFRAG": int64(ruleset.FRKeepFrag),
		"FR_KEEPSTATE": int64(ruleset.FRKeepState), "FR_FASTROUTE": int64(ruleset.FRFastroute), "FR_RETRST": int64(ruleset.FRRetRST),
		"FR_RETICMP": int64(ruleset.FRRetICMP), "FR_FAKEICMP": int64(ruleset.FRFakeICMP), "FR_RETMASK": int64(ruleset.FRRetMask),
		"FR_OUTQUE": int64(ruleset.FROutQue), "FR_INQUE": int64(ruleset.FRInQue), "FR_LOGBODY": int64(ruleset.FRLogBody),
		"FR_LOGFIRST": int64(ruleset.FRLogFirst), "FR_LOGORBLOCK": int64(ruleset.FRLogOrBlock), "FR_STLOOSE": int64(ruleset.FRStLoose),
		"FR_FRSTRICT": int64(ruleset.FRFragStrict), "FR_STSTRICT": int64(ruleset.FRStStrict), "FR_NEWISN": int64(ruleset.FRNewISN),
		"FR_NOICMPERR": int64(ruleset.FRNoICMPErr), "FR_STATESYNC": int64(ruleset.FRStateSync), "FR_COPIED": int64(ruleset.FRCopied),
		"FR_INACTIVE": int64(ruleset.FRInactive), "FR_NOMATCH": int64(ruleset.FRNoMatch),
		"FF_LOGPASS": ipflog.FFLogPass, "FF_LOGBLOCK": ipflog.FFLogBlock, "FF_LOGNOMATCH": ipflog.FFLogNoMatch,
		// FI_* packet flags
		"PF_TCPUDP": int64(packet.FlagTCPUDP), "PF_IPOPTS": int64(packet.FlagOptions), "PF_FRAG": int64(packet.FlagFrag),
		"PF_SHORT": int64(packet.FlagShort), "PF_NAT": int64(packet.FlagNATed), "PF_MCAST": int64(packet.FlagMulticast),
		"PF_BCAST": int64(packet.FlagBroadcast), "PF_MBCAST": int64(packet.FlagMBCast), "PF_STATE": int64(packet.FlagState),
		"PF_BADNAT": int64(packet.FlagBadNAT), "PF_BAD": int64(packet.FlagBad), "PF_OOW": int64(packet.FlagOOW),
		"PF_ICMPERR": int64(packet.FlagICMPErr), "PF_FRAGBODY": int64(packet.FlagFragBody), "PF_BADSRC": int64(packet.FlagBadSrc),
		"PF_LOWTTL": int64(packet.FlagLowTTL), "PF_V6HDRS": ipf.FI_V6EXTHDR, "PF_ICMPQUERY": int64(packet.FlagICMPQuery),
		"PF_AH": int64(packet.FlagAH), "PF_CMP": int64(packet.FlagCmpMask),
		// IPv6 extension header bits (v6hdr)
		"V6X_HOPOPTS": ipf.V6HdrHopOpts, "V6X_IPV6": ipf.V6HdrIPv6, "V6X_ROUTING": ipf.V6HdrRouting, "V6X_FRAG": ipf.V6HdrFrag,
		"V6X_ESP": ipf.V6HdrESP, "V6X_AH": ipf.V6HdrAH, "V6X_NONE": ipf.V6HdrNone, "V6X_DSTOPTS": ipf.V6HdrDstOpts,
		"V6X_MOBILITY": ipf.V6HdrMobility,
		// TCP states
		"TS_LISTEN": state.TCPListen, "TS_SYN_SENT": state.TCPSynSent, "TS_SYN_RECEIVED": state.TCPSynReceived,
		"TS_HALF_ESTAB": state.TCPHalfEstab, "TS_ESTABLISHED": state.TCPEstablished, "TS_CLOSE_WAIT": state.TCPCloseWait,
		"TS_FIN_WAIT_1": state.TCPFinWait1, "TS_CLOSING": state.TCPClosing, "TS_LAST_ACK": state.TCPLastAck,
		"TS_FIN_WAIT_2": state.TCPFinWait2, "TS_TIME_WAIT": state.TCPTimeWait, "TS_CLOSED": state.TCPClosed,
		// port operators: the parser's
		"PORT_EQ": int64(ipf.PortEq), "PORT_NE": int64(ipf.PortNe), "PORT_LT": int64(ipf.PortLt), "PORT_GT": int64(ipf.PortGt),
		"PORT_LE": int64(ipf.PortLe), "PORT_GE": int64(ipf.PortGe), "PORT_OUT": int64(ipf.PortOutRange),
		"PORT_IN": int64(ipf.PortInRange), "PORT_RANGE": int64(ipf.PortRange),
		// exp { } fields, as compileExpr maps them
		"EXPR_NONE": int64(exprOps[ruleset.ExprNone]), "EXPR_PROTO": int64(exprOps[ruleset.ExprProto]),
		"EXPR_ADDR": int64(exprOps[ruleset.ExprAddr]), "EXPR_SRC": int64(exprOps[ruleset.ExprSrc]),
		"EXPR_DST": int64(exprOps[ruleset.ExprDst]), "EXPR_ADDR6": int64(exprOps[ruleset.ExprAddr6]),
		"EXPR_SRC6": int64(exprOps[ruleset.ExprSrc6]), "EXPR_DST6": int64(exprOps[ruleset.ExprDst6]),
		"EXPR_PORT": int64(exprOps[ruleset.ExprPort]), "EXPR_SPORT": int64(exprOps[ruleset.ExprSport]),
		"EXPR_DPORT": int64(exprOps[ruleset.ExprDport]), "EXPR_FLAGS": int64(exprOps[ruleset.ExprFlags]),
		// the datapath's own numbering
		"RULE_CAP": MaxRules, "IDX_RULES": idxRules, "TEXT_CHUNK": textChunk, "SCAN_BUDGET": scanBudget, "MAX_LISTS": MaxLists, "MAX_DEPTH": maxDepth, "NSLOTS": numSlots, "BLOCK_SHIFT": blockBits,
		"LOG_SNAP": logSnap, "LIST_NAME_LEN": listNameLen, "MAX_EXPRS": maxExprs,
		"MAX_EXPR_VALS": maxExprVals,
		"LIST_IN":       listIn, "LIST_OUT": listOut, "LIST_ACCT_IN": listAcctIn, "LIST_ACCT_OUT": listAcctOut,
		"LIST_GROUP0": listGroup0,
		"M_IFACE":     mIface, "M_SRC": mSrc, "M_DST": mDst, "M_NOTSRC": mNotSrc, "M_NOTDST": mNotDst, "M_PROTO": mProto,
		"M_TCPUDP": mTCPUDP, "M_TOS": mTos, "M_TTL": mTTL, "M_FLAGS": mFlags, "M_ICMP": mICMP, "M_SPORT": mSport,
		"M_DPORT": mDport, "M_WITH": mWith, "M_OPT": mOpt, "M_NEVER": mNever, "M_SEC": mSec, "M_SRCPOOL": mSrcPool,
		"M_DSTPOOL": mDstPool, "M_EXPR": mExpr,
		"CFG_ACTIVE": cfgActive, "CFG_INACTIVE": cfgInactive, "CFG_ENABLED": cfgEnabled, "CFG_DEFPASS": cfgDefPass,
		"CFG_CLOCK": cfgClock, "CFG_LOGFLAGS": cfgLogFlags, "CFG_MINTTL": cfgMinTTL, "CFG_STATEMAX": cfgStateMax,
		"CFG_INDEX0": cfgIndex0, "CFG_TO_TCP": cfgToTCP, "CFG_TO_UDP": cfgToUDP, "CFG_TO_UDPACK": cfgToUDPAck,
		"CFG_TO_ICMP": cfgToICMP, "CFG_TO_ICMPACK": cfgToICMPAck, "CFG_TO_IP": cfgToIP, "CFG_STATELOG": cfgStateLog, "CFG_FRAG_TTL": cfgFragTTL,
		"CFG_STATESIZE": cfgStateSize, "CFG_WMHIGH": cfgWMHigh, "CFG_WMLOW": cfgWMLow, "CFG_WMFREQ": cfgWMFreq,
		"CFG_DCA": cfgDCA, "CFG_GEN0": cfgGen0, "CFG_ANYL3": cfgAnyL3, "CFG_FRAG_SIZE": cfgFragSize,
		"FRAG_CAP": fragCap, "FRAG_SIZE_DEF": fragSizeDef,
		"CFG_N":  cfgN,
		"IDX_ON": idxOn, "IDX_SRC": idxSrc, "IDX_SPORT": idxSport, "IFACE_SLOTS": ifaceSlots,
		"FEAT_ACCT_IN": featAcctIn, "FEAT_ACCT_OUT": featAcctOut, "FEAT_CLOCK": featClock, "FEAT_ROUTE": featRoute, "FEAT_IDLE": featIdle, "FEAT_LIMITS": featLimits, "FEAT_LOG": featLog, "FEAT_RET": featRet, "FEAT_POOL": featPool, "FEAT_EXPR": featExpr, "FEAT_FRAGS": featFrags, "FEAT_HOT_IN": featHotIn, "FEAT_HOT_OUT": featHotOut, "KM_CONFIG": kmConfig, "KM_OFF": kmOff, "KM_IDLE": kmIdle, "SF_SWAP": sfSwap, "SF_TWIN": sfTwin,
		"HOT_MAX": hotMax, "HOT_COMPACT": hotCompact, "HOT_NOIDX": hotNoIdx, "CM_OUT": cmOut, "CM_NEVER": cmNever, "CM_PROTO": cmProto, "CM_TCPUDP": cmTCPUDP,
		"CM_SRC": cmSrc, "CM_NOTSRC": cmNotSrc, "CM_DST": cmDst, "CM_NOTDST": cmNotDst, "CM_PORTS": cmPorts,
		"CM_SPORT": cmSport, "CM_DPORT": cmDport, "CM_FLAGS": cmFlags, "CM_FULL": cmFull, "CM_RUN": cmRun, "CM_RUN4": cmRun4, "CM_RUNSRC": cmRunSrc,
		"RUN_FLAT": runFlatBit, "RUN_FLAT_LOG": runFlatLog, "RUN_BIG": runBigBit, "RUN_BIG_LOG": runBigLog,
		"ST_DIR": stDir, "ST_PASS": stPass, "ST_BLOCK": stBlock, "ST_NOMATCH": stNomatch, "ST_ACCT": stAcct,
		"ST_SHORT": stShort, "ST_BAD": stBad, "ST_LOGPASS": stLogPass, "ST_LOGBLOCK": stLogBlock, "ST_LOGGED": stLogged,
		"ST_LOGFAIL": stLogFail, "ST_STKEPT": stStKept, "ST_STLOST": stStLost, "ST_IPV6": stIPv6, "ST_PKTS": stPkts,
		"ST_FRAG": stFrag, "ST_NOTIP": stNotIP, "ST_CLEAN": stClean, "ST_CLEAN_NOMATCH": stCleanNomatch, "ST_CLEAN_IPV6": stCleanIPv6, "ST_MISS": stMiss, "ST_RST": stRST, "ST_ICMPREP": stICMPRep, "ST_ADD_TCP": stAddTCP,
		"ST_ADD_UDP": stAddUDP, "ST_ADD_ICMP": stAddICMP, "ST_ADD_OTHER": stAddOther,
		"ST_MAXREF": stMaxRef, "ST_EXPIRED": stExpired, "ST_CLOSED": stClosed, "ST_DCA": stDCA,
		"ST_PPS": stPPS, "ST_RETFAIL": stRetFail, "ST_OOW": stOOW, "ST_ROUTED": stRouted, "ST_DUPPED": stDupped,
		"ST_ROUTEFAIL": stRouteErr, "ST_SCANCUT": stScanCut,
		"ST_DCAFULL": stDCAFull, "ST_SRCFULL": stSrcFull, "NSTATS": numStats, "NREASONS": numReasons,
		"RSN_NONE": RSNNone, "RSN_FILTER": RSNFilter, "RSN_LOGFAIL": RSNLogFail, "RSN_PPS": RSNPPS,
		"RSN_JUMBO": RSNJumbo, "RSN_STATEADD": RSNStateAdd, "RSN_PULLUP": RSNPullup, "RSN_BADFRAG": RSNBadFrag,
		"RSN_BAD": RSNBad, "RSN_DCA": RSNDCA, "RSN_SCANCUT": RSNScanCut,
		"STATE_CAP": stateCap, "STATE_STRIPES": stateStripes, "ST_DM_SLOTS": stDMSlots, "DCA_CAP": dcaCap, "SRC_CAP": srcCap, "SWEEP_NS": sweepNS,
		"CTL_ARM": ctlArm, "CTL_KILL": ctlKill, "CTL_SWEEP": ctlSweep, "CTL_KEYS": ctlKeys,
		"CTL_MAGIC": ctlMagic, "CTL_DONE": ctlDone, "CTL_MSG_SIZE": ctlMsgSize,
		"CALL_SRCGRPMAP": callSrcGrpmap, "CALL_DSTGRPMAP": callDstGrpmap,
		"RT_TO": rtTo, "RT_DUP": rtDup, "RT_FAST": rtFast, "RT_REPLY": rtReply,
		"LOG_PACKET": logPacket, "LOG_STATE": logState,
	}
	if n := binary.Size(ctlMsg{}); n != ctlMsgSize {
		t.Errorf("ctlMsg: %d bytes, struct ctl_msg %d", n, ctlMsgSize)
	}
	for name, w := range want {
		got, ok := defs[name]
		if !ok {
			t.Errorf("%s: not #defined in c/include", name)
			continue
		}
		if got != w {
			t.Errorf("%s: C %#x, Go %#x", name, got, w)
		}
	}
	// every FR_ and FF_ value the headers define has its Go constant
	for name := range defs {
		if _, ok := want[name]; !ok && (strings.HasPrefix(name, "FR_") || strings.HasPrefix(name, "FF_")) {
			t.Errorf("%s: no Go constant compared with it", name)
		}
	}
	// ipflog's copy of the flags (log records carry them) is the same set
	for _, c := range []struct {
		name string
		a, b int64
	}{
		{"FRCmdMask", ipflog.FRCmdMask, int64(ruleset.FRCmdMask)}, {"FRBlock", ipflog.FRBlock, int64(ruleset.FRBlock)},
		{"FRPass", ipflog.FRPass, int64(ruleset.FRPass)}, {"FRAuth", ipflog.FRAuth, int64(ruleset.FRAuth)},
		{"FRPreAuth", ipflog.FRPreAuth, int64(ruleset.FRPreauth)}, {"FRAccount", ipflog.FRAccount, int64(ruleset.FRAccount)},
		{"FRLog", ipflog.FRLog, int64(ruleset.FRLog)}, {"FRLogMask", ipflog.FRLogMask, int64(ruleset.FRLogMask)},
		{"FRQuick", ipflog.FRQuick, int64(ruleset.FRQuick)}, {"FRKeepFrag", ipflog.FRKeepFrag, int64(ruleset.FRKeepFrag)},
		{"FRKeepState", ipflog.FRKeepState, int64(ruleset.FRKeepState)}, {"FRLogBody", ipflog.FRLogBody, int64(ruleset.FRLogBody)},
		{"FRLogFirst", ipflog.FRLogFirst, int64(ruleset.FRLogFirst)},
		{"FRLogOrBlock", ipflog.FRLogOrBlock, int64(ruleset.FRLogOrBlock)},
		{"FRNoMatch", ipflog.FRNoMatch, int64(ruleset.FRNoMatch)},
	} {
		if c.a != c.b {
			t.Errorf("ipflog.%s = %#x, ruleset's = %#x", c.name, c.a, c.b)
		}
	}
}
