package pool

import "net/netip"

// trie is a binary prefix tree over address bits. Lookup walks at most
// 32 (IPv4) or 128 (IPv6) nodes and never allocates.
type trie struct {
	root *trieNode
}

type trieNode struct {
	child [2]*trieNode
	set   bool
	not   bool
	value int // index of the entry that set this node
}

func bit(a *[16]byte, i int) int { return int(a[i>>3]>>(7-uint(i&7))) & 1 }

// insert records prefix a/bits; a later insert of the same prefix wins.
func (t *trie) insert(a [16]byte, bits int, not bool, value int) {
	if t.root == nil {
		t.root = &trieNode{}
	}
	n := t.root
	for i := 0; i < bits; i++ {
		b := bit(&a, i)
		if n.child[b] == nil {
			n.child[b] = &trieNode{}
		}
		n = n.child[b]
	}
	n.set, n.not, n.value = true, not, value
}

// lookup returns the longest prefix containing a (maxBits significant
// bits) and whether it exists.
func (t *trie) lookup(a *[16]byte, maxBits int) (*trieNode, bool) {
	n := t.root
	var best *trieNode
	for i := 0; n != nil; i++ {
		if n.set {
			best = n
		}
		if i == maxBits {
			break
		}
		n = n.child[bit(a, i)]
	}
	return best, best != nil
}

// addrBytes puts an address into the 16-byte layout used by the trie
// (IPv4 in the first four bytes) and returns its bit length.
func addrBytes(a netip.Addr) ([16]byte, int) {
	if a.Is4() {
		var b [16]byte
		v := a.As4()
		copy(b[:4], v[:])
		return b, 32
	}
	if a.Is4In6() {
		return addrBytes(a.Unmap())
	}
	return a.As16(), 128
}
