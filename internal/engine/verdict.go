package engine

// Verdict is the outcome of Check, named as ipftest prints it
// (ipf-reference §2.3, kit README §7.1).
type Verdict uint8

// The verdicts.
const (
	VerdictPass Verdict = iota
	VerdictBlock
	VerdictNoMatch
	// VerdictBadPacket is a no-match for a packet that was dropped as
	// malformed before filtering.
	VerdictBadPacket
	VerdictBlockReturnRST
	VerdictBlockReturnICMP
	VerdictBlockReturnICMPAsDest
	VerdictAuth
	VerdictAccount
	VerdictPreauth
)

var verdictNames = [...]string{
	"pass", "block", "nomatch", "bad-packet", "block return-rst", "block return-icmp",
	"block return-icmp-as-dest", "auth", "account", "preauth",
}

// String returns the word ipftest prints.
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "unknown"
}

// Passed reports whether the packet goes on.
func (v Verdict) Passed() bool { return v == VerdictPass || v == VerdictNoMatch }

// Reason is why a packet was blocked (IPFilter's fr_breasons_e, used by
// ipftest -N -b and by log records).
type Reason uint8

// Block reasons, numbered as IPFilter's FRB_*.
const (
	ReasonRule         Reason = 0  // filter-rule
	ReasonLogFail      Reason = 1  // log-or-block_1
	ReasonPPSRate      Reason = 2  // pps-rate
	ReasonJumbo        Reason = 3  // jumbogram
	ReasonMakeFrip     Reason = 4  // makefrip-fail
	ReasonStateAdd     Reason = 5  // state_add-fail
	ReasonUpdateIPID   Reason = 6  // updateipid-fail
	ReasonLogFail2     Reason = 7  // log-or-block_2
	ReasonDecap        Reason = 8  // decap-fail
	ReasonAuthNew      Reason = 9  // auth_new-fail
	ReasonAuthCaptured Reason = 10 // auth_captured
	ReasonCoalesce     Reason = 11 // coalesce-fail
	ReasonPullup       Reason = 12 // pullup-fail
	ReasonAuthFeedback Reason = 13 // auth-feedback
	ReasonBadFrag      Reason = 14 // bad-frag
	ReasonNATv4        Reason = 15 // natv4_out-fail / natv4_in-fail
	ReasonNATv6        Reason = 16 // natv6_out-fail / natv6_in-fail
)
