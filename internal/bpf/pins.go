package bpf

import "time"

// DefaultPinDir is where the datapath pins its maps, programs and links so
// that ipf, ipfstat and ipmon work on it without a daemon. The commands
// reach it through internal/ipfctl, which is the one place that resolves
// $SLUICE_BPF_DIR against it.
const DefaultPinDir = "/sys/fs/bpf/sluice"

// Tick is IPFilter's clock unit: timeouts, TTLs and ipfstat's "IPF Ticks"
// count in half seconds.
const Tick = 500 * time.Millisecond

// MaxPoolEntries is the size of the pool map (pools in c/filter.c): the
// entries of the pool tables of all three rule slots share it.
const MaxPoolEntries = 65536

// MaxGroupDepth is how deep the scan follows `head` groups (MAX_DEPTH in
// c/include/filter.h): the head rule of a group nested deeper is not
// followed.
const MaxGroupDepth = maxDepth
