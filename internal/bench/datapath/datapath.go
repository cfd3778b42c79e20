// Package datapath plugs Sluice's eBPF datapaths into `sluice bench`: the
// IPFilter filter of internal/bpf and the IPQoS marker of internal/bpf/qosmark,
// behind config.Datapaths.
//
// Every Apply mounts a private bpffs in a temporary directory and pins the
// datapath under a directory named after the test bed's namespace, so a
// bench never touches the pins of ipf(8) or ipqosadmin(1M) under
// /sys/fs/bpf, nor those of another bench or test running at the same
// time. Remove detaches the programs inside the SUT's namespace, deletes
// the pins, unmounts the bpffs and removes its directory. Mounts left by a
// process that died (SIGKILL) are swept by the next run.
package datapath

import (
	"fmt"

	"sluice/internal/qos"
	"sluice/internal/rules/ipf"
	"sluice/internal/rules/ipqos"
)

// parseIPF parses an ipf.conf rule set; the positioned errors name the
// configuration's rules as "ipf.conf".
func parseIPF(rules string) ([]*ipf.Rule, error) {
	rs, err := ipf.Parse("ipf.conf", []byte(rules), ipf.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("parsing the rule set: %w", err)
	}
	return rs, nil
}

// parseQoS parses and compiles an ipqos.conf configuration.
func parseQoS(conf string) (*qos.Ruleset, error) {
	cfg, err := ipqos.Parse("ipqos.conf", []byte(conf))
	if err != nil {
		return nil, fmt.Errorf("parsing the IPQoS configuration: %w", err)
	}
	rs, err := qos.Compile(cfg)
	if err != nil {
		return nil, fmt.Errorf("compiling the IPQoS configuration: %w", err)
	}
	return rs, nil
}
