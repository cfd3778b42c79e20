//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestLayoutConstants checks the constants of layout.go against the
// #defines of c/nat.h (and c/natfast.h) they mirror, so that renumbering one side alone
// fails here rather than in the kernel.
func TestLayoutConstants(t *testing.T) {
	defs := map[string]int64{}
	// natfast.h holds the fast path's part, shared with the filter's object
	for _, name := range []string{"c/nat.h", "c/natfast.h"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 3 || fs[0] != "#define" {
				continue
			}
			if v, err := strconv.ParseInt(fs[2], 0, 64); err == nil {
				defs[fs[1]] = v
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, got := range map[string]int64{
		"NAT_MAX_RULES": MaxRules, "NAT_NSLOTS": nslots, "NAT_SESS_ENTRIES": sessEntries, "NAT_DM_SLOTS": dmSlots,
		"DIR_IN": dirIn, "DIR_OUT": dirOut, "DIR_WILD": dirWild,
		"RF_NO": rfNo, "RF_V6": rfV6, "RF_FILTER": rfFilter, "RF_NOTSRC": rfNotSrc, "RF_NOTDST": rfNotDst,
		"RF_TCP": rfTCP, "RF_UDP": rfUDP, "RF_ICMPQ": rfICMPQ, "RF_PORTMAP": rfPortmap, "RF_AUTO": rfAuto,
		"RF_SEQ": rfSeq, "RF_ICMPIDMAP": rfICMPIDMap, "RF_IDMAPQ": rfIDMapQ, "RF_FIXEDDP": rfFixedDP, "RF_RR": rfRR, "RF_STICKY": rfSticky,
		"RF_FTP": rfFTP, "RF_PROXY": rfProxy,
		"PF_TCPUDP": pfTCPUDP, "PF_ICMPQ": pfICMPQ,
		"SF_PROXY": sfProxy, "SF_SLAVE": sfSlave, "SF_WILD": sfWild, "SF_HM": sfHM,
		"NCFG_ACTIVE": cfgActive, "NCFG_COUNT": cfgCount, "NCFG_WILDS": cfgWilds, "NCFG_SEQ": cfgSeq,
		"NCFG_MAX": cfgMax, "NCFG_RANDMODE": cfgRandMode, "NCFG_RANDCALLS": cfgRandCalls, "NCFG_RANDLAST": cfgRandLast,
		"NCFG_L3DEV": cfgL3Dev, "NCFG_COOKIE": cfgCookie, "NCFG_NSPERJIFFY": cfgNsPerJif, "NCFG_CLOCK": cfgClock,
		"NCFG_FTP_INSECURE": cfgFTPInsec, "NCFG_FTP_PASVONLY": cfgFTPPasv, "NCFG_FTP_FORCEPASV": cfgFTPForce,
		"NCFG_FTP_SINGLE": cfgFTPSingle, "NCFG_NEXTID": cfgNextID, "NCFG_FLUSHMODE": cfgFlushMode,
		"NCFG_FLUSHARG": cfgFlushArg, "NCFG_FLUSHED": cfgFlushed, "NCFG_HMSEQ": cfgHMSeq, "NCFG_NRULES": cfgNRules,
		"NCFG_FTPRULES": cfgFTPRules, "NCFG_NOEXPIRE": cfgNoExpire, "NCFG_DEFAGE": cfgDefAge, "NCFG_DEFIPAGE": cfgDefIPAge,
		"NCFG_DEFICMPAGE": cfgDefICMP, "NCFG_NOTWIN": cfgNoTwin, "NCFG_SHADOWS": cfgShadows, "NCFG_PLAIN": cfgPlain, "NCFG_WILDSEEN": cfgWildSeen, "NCFG_FSEQ": cfgFSeq, "NCFG_N": cfgN,
		"FL_ALL": flAll, "FL_RULE": flRule, "FL_EXPIRED": flExpired, "FL_CLOCKS": flClocks, "FL_ARM": flArm, "FL_SWEEP": flSweep,
		"SWF_PACKETS": swfPackets, "SWF_ALL": swfAll,
		"NS_SIDE": nsSide, "NS_TRANSLATED": nsTranslated, "NS_IGNORED": nsIgnored, "NS_BADNAT": nsBadNAT,
		"NS_ADDED": nsAdded, "NS_MISS": nsMiss, "NS_TABLEMAX": nsTableMax, "NS_EXISTS": nsExists, "NS_ICMP": nsICMP,
		"NS_FRAG": nsFrag, "NS_PROXYFAIL": nsProxyFail, "NS_INSERTFAIL": nsInsertFail, "NS_WRAP": nsWrap,
		"NS_IFADDR": nsIfAddr, "NS_FASTGONE": nsFastGone, "NS_RACED": nsRaced, "NS_EXPIRED": nsExpired, "NS_FLUSHED": nsFlushed,
		"NS_HMNEW": nsHMNew, "NS_HMADD": nsHMAdd, "NS_WILDUSED": nsWildUsed, "NS_CLONES": nsClones, "NS_NOSLOW": nsNoSlow, "NS_NOTIMER": nsNoTimer, "NS_N": nsN,
		"SLOW_IN": slowIn, "SLOW_OUT": slowOut, "SLOW_PRE": slowPre, "SLOW_N": slowN,
	} {
		want, ok := defs[name]
		if !ok {
			t.Errorf("%s: not defined in c/nat.h", name)
			continue
		}
		if got != want {
			t.Errorf("%s: layout.go has %d, c/nat.h %d", name, got, want)
		}
	}
	// the stages and the marker are in c/nat.c
	src, err := os.ReadFile("c/nat.c")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{
		"#define STAGE_MAGIC 0x" + strconv.FormatInt(stageMagic, 16),
		"#define ST_ENTRY " + strconv.Itoa(stEntry), "#define ST_PARSE " + strconv.Itoa(stParse),
		"#define ST_LOOKUP " + strconv.Itoa(stLookup), "#define ST_REWRITE " + strconv.Itoa(stRewrite),
		"#define ST_OFF " + strconv.Itoa(stOff), "#define ST_NOINSERT " + strconv.Itoa(stNoInsert),
		"#define ST_NOTWIN " + strconv.Itoa(stNoTwin), "#define ST_NOARM " + strconv.Itoa(stNoArm),
	} {
		if !strings.Contains(string(src), d) {
			t.Errorf("c/nat.c lacks %q", d)
		}
	}
}

// TestCheckTunable: the NAT tunables' ranges (IPFilter's, and the
// kernel's where smaller), and IPFilter's NAT tunables the kernel refuses.
func TestCheckTunable(t *testing.T) {
	for _, c := range []struct {
		name string
		v    uint64
		want string // "" = accepted
	}{
		{"nat_table_max", 1, ""},
		{"nat_table_max", sessEntries / 2, ""},
		{"nat_table_max", sessEntries/2 + 1, "the kernel NAT takes at most 65536"},
		{"nat_table_max", 0, "outside 1..2147483647"},
		{"ftp_insecure", 1, ""},
		{"ftp_insecure", 2, "outside 0..1"},
		{"fr_defnatage", 0x7fffffff, ""},
		{"fr_defnaticmpage", 0, "outside 1..2147483647"},
		{"nat_lock", 0, "not supported"},
		{"ftp_pasvrdr", 1, "no ftp proxy here implements it"},
		{"udp_timeout", 10, "unknown NAT tunable"},
	} {
		err := CheckTunable(c.name, c.v)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s=%d: %v, want accepted", c.name, c.v, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s=%d: %v, want an error saying %q", c.name, c.v, err, c.want)
		}
	}
	if err := UnsupportedTunable("nat_logging"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("nat_logging: %v, want errors.ErrUnsupported", err)
	}
	if err := UnsupportedTunable("nat_table_max"); err != nil {
		t.Errorf("nat_table_max: %v, want nil (it is supported)", err)
	}
}
