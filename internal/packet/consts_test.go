package packet_test

import (
	"testing"

	"sluice/internal/packet"
	"sluice/internal/rules/ipf"
)

// TestConstantsMatchRuleAST keeps the packet flag, option and extension
// header bits equal to the ones the ipf rule parser compiles into rules.
func TestConstantsMatchRuleAST(t *testing.T) {
	pairs := []struct {
		name      string
		got, want uint64
	}{
		{"FI_TCPUDP", uint64(packet.FlagTCPUDP), ipf.FI_TCPUDP},
		{"FI_OPTIONS", uint64(packet.FlagOptions), ipf.FI_OPTIONS},
		{"FI_FRAG", uint64(packet.FlagFrag), ipf.FI_FRAG},
		{"FI_SHORT", uint64(packet.FlagShort), ipf.FI_SHORT},
		{"FI_NATED", uint64(packet.FlagNATed), ipf.FI_NATED},
		{"FI_MULTICAST", uint64(packet.FlagMulticast), ipf.FI_MULTICAST},
		{"FI_BROADCAST", uint64(packet.FlagBroadcast), ipf.FI_BROADCAST},
		{"FI_MBCAST", uint64(packet.FlagMBCast), ipf.FI_MBCAST},
		{"FI_STATE", uint64(packet.FlagState), ipf.FI_STATE},
		{"FI_BADNAT", uint64(packet.FlagBadNAT), ipf.FI_BADNAT},
		{"FI_BAD", uint64(packet.FlagBad), ipf.FI_BAD},
		{"FI_OOW", uint64(packet.FlagOOW), ipf.FI_OOW},
		{"FI_ICMPERR", uint64(packet.FlagICMPErr), ipf.FI_ICMPERR},
		{"FI_FRAGBODY", uint64(packet.FlagFragBody), ipf.FI_FRAGBODY},
		{"FI_BADSRC", uint64(packet.FlagBadSrc), ipf.FI_BADSRC},
		{"FI_LOWTTL", uint64(packet.FlagLowTTL), ipf.FI_LOWTTL},
		{"FI_V6EXTHDR", uint64(packet.FlagV6ExtHdr), ipf.FI_V6EXTHDR},
		{"FI_ICMPQUERY", uint64(packet.FlagICMPQuery), ipf.FI_ICMPQUERY},
		{"FI_AH", uint64(packet.FlagAH), ipf.FI_AH},
		{"FI_WITH", uint64(packet.FlagWithMask), ipf.FI_WITH},
		{"FI_CMP", uint64(packet.FlagCmpMask), ipf.FI_CMP},
		{"OptNOP", uint64(packet.OptNOP), ipf.OptNOP},
		{"OptRR", uint64(packet.OptRR), ipf.OptRR},
		{"OptTS", uint64(packet.OptTS), ipf.OptTS},
		{"OptSecurity", uint64(packet.OptSecurity), ipf.OptSEC},
		{"OptLSRR", uint64(packet.OptLSRR), ipf.OptLSRR},
		{"OptCIPSO", uint64(packet.OptCIPSO), ipf.OptCIPSO},
		{"OptSATID", uint64(packet.OptSATID), ipf.OptSATID},
		{"OptSSRR", uint64(packet.OptSSRR), ipf.OptSSRR},
		{"OptFINN", uint64(packet.OptFINN), ipf.OptFINN},
		{"SecTopSecret", uint64(packet.SecTopSecret), ipf.SecTopSecret},
		{"SecSecret", uint64(packet.SecSecret), ipf.SecSecret},
		{"SecConfidential", uint64(packet.SecConfidential), ipf.SecConfid},
		{"SecUnclass", uint64(packet.SecUnclass), ipf.SecUnclass},
		{"SecReserv1", uint64(packet.SecReserv1), ipf.SecReserv1},
		{"SecReserv4", uint64(packet.SecReserv4), ipf.SecReserv4},
		{"ExtHopOpts", uint64(packet.ExtHopOpts), ipf.V6HdrHopOpts},
		{"ExtRouting", uint64(packet.ExtRouting), ipf.V6HdrRouting},
		{"ExtFragment", uint64(packet.ExtFragment), ipf.V6HdrFrag},
		{"ExtESP", uint64(packet.ExtESP), ipf.V6HdrESP},
		{"ExtAH", uint64(packet.ExtAH), ipf.V6HdrAH},
		{"ExtNone", uint64(packet.ExtNone), ipf.V6HdrNone},
		{"ExtDstOpts", uint64(packet.ExtDstOpts), ipf.V6HdrDstOpts},
		{"ExtMobility", uint64(packet.ExtMobility), ipf.V6HdrMobility},
	}
	for _, p := range pairs {
		if p.got != p.want {
			t.Errorf("%s: packet has %#x, rules/ipf has %#x", p.name, p.got, p.want)
		}
	}
}
