/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Internet checksum over small buffers on the BPF stack (RFC 1071):
 * add 16-bit words, fold. Shared by the programs that build packets.
 */
#ifndef SLUICE_CSUM_H
#define SLUICE_CSUM_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

static __always_inline __u16 csum_fold(__u64 s)
{
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~s;
}

static __always_inline __u64 csum_add(__u64 s, const void *b, __u32 n)
{
	const __u16 *w = b;

#pragma unroll
	for (__u32 i = 0; i < 40; i++) {
		if (i * 2 >= n)
			break;
		s += w[i];
	}
	return s;
}

#endif
