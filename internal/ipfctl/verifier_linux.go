package ipfctl

import (
	"errors"

	"github.com/cilium/ebpf"
)

// verifierRejected reports whether err is the verifier refusing a
// program: the kernel says EACCES for that too, and "needs root" would
// send an administrator who is root looking for the wrong cause.
func verifierRejected(err error) bool {
	var ve *ebpf.VerifierError
	return errors.As(err, &ve)
}
