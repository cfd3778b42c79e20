package bpf

import "fmt"

// FragCache counts the fragment cache's live entries (those whose expiry,
// on the datapath's clock, is not past) and returns its size (frag_size). The
// entries are read as the generated struct frag_entry, so a change of
// its layout changes this code with it.
func (d *Datapath) FragCache() (live, capacity int, err error) {
	now, err := d.now()
	if err != nil {
		return 0, 0, err
	}
	var (
		k filterFragKey
		v filterFragEntry
	)
	it := d.objs.Frags.Iterate()
	for it.Next(&k, &v) {
		if v.Expire >= now {
			live++
		}
	}
	if err := it.Err(); err != nil {
		return live, 0, fmt.Errorf("reading the fragment cache: %w", err)
	}
	// the table's size is frag_size (the count refuses new datagrams
	// there), not the map's, which only bounds frag_size
	size := d.cfg(cfgFragSize)
	if size == 0 {
		size = fragSizeDef
	}
	return live, int(size), nil
}
