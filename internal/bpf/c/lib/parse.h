/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Packet parse (ipf-reference 2.1): IPv4 with options and AH, IPv6 with
 * its extension headers, then TCP/UDP/ICMP, into struct pktinfo with
 * IPFilter's FI_* flags.
 */
#ifndef SLUICE_PARSE_H
#define SLUICE_PARSE_H

#include <linux/in.h>
#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include "common.h"

/* Option bits by option type (IPFilter's ionames; addext and visa are never
 * recorded because of its table quirk), and IPSO classes by classification
 * byte. Tables instead of switches: no branches for the verifier to walk. */
static const __u32 optbit_tab[256] = {
	[0x07] = 0x2, [0x0a] = 0x4, [0x0b] = 0x8, [0x0c] = 0x10, [0x0f] = 0x20,
	[0x44] = 0x40, [0x52] = 0x80, [0x82] = 0x100, [0x83] = 0x200,
	[0x85] = 0x400, [0x86] = 0x800, [0x88] = 0x1000, [0x89] = 0x2000,
	[0x90] = 0x10000, [0x91] = 0x20000, [0xcd] = 0x40000,
};

static const __u8 ipso_tab[256] = {
	[0x01] = 0x01, [0x3d] = 0x02, [0x5a] = 0x04, [0x66] = 0x08,
	[0x96] = 0x10, [0xab] = 0x20, [0xcc] = 0x40, [0xf1] = 0x80,
};

/* The option walks are bpf_loop callbacks, one option an iteration: the
 * verifier checks a callback's body once or twice with the offset unknown,
 * where it walked the 40 (IP) and 20 (TCP) unrolled copies of the loop
 * with every offset the branches before could leave: ~330 000 of the
 * ~430 000 instructions it processed for each filter program, ~0.3 s of a
 * program's ~0.4 s verification (docs/datapath-cost.md, "Big sets,
 * session 8"). Only packets with IP options and SYNs with TCP options
 * walk them. */
struct optwalk {
	__u32 i;    /* offset of the option at hand in w->obuf */
	__u32 olen; /* bytes of options (at most 40) */
	int nsec;   /* IPSO options seen */
};

static long ipv4_opt_step(__u32 n, void *ctx)
{
	struct optwalk *c = ctx;
	struct work *w = get_work();
	struct pktinfo *p;
	__u8 *opt, type, len;
	__u32 i = c->i, olen = c->olen;

	if (!w)
		return 1;
	p = &w->p;
	opt = w->obuf;
	if (i >= olen || i >= 40)
		return 1;
	type = opt[BOUND(i, 63)];
	if (type == 0) /* EOL */
		return 1;
	if (type == 1) { /* NOP */
		c->i = i + 1;
		return 0;
	}
	if (i + 1 >= olen || i + 1 >= 40)
		return 1;
	len = opt[BOUND(i + 1, 63)];
	if (len < 2 || i + len > olen)
		return 1;
	if (len > 4)
		p->optbits |= optbit_tab[BOUND(type, 255)];
	/* the class and its authority as ipf_pr_ipv4hdr reads them: from
	 * an option of more than 4 bytes (the engine's walkIPv4Options),
	 * the authority only with a known class, its second byte only when
	 * the first has the continuation bit */
	if (type == 0x82) {
		if (++c->nsec > 1)
			p->flags |= PF_BAD;
		else if (len > 4 && i + 4 < 40) {
			__u16 a;

			p->secclass = ipso_tab[BOUND(opt[BOUND(i + 2, 63)], 255)];
			a = (__u16)opt[BOUND(i + 3, 63)] << 8 | opt[BOUND(i + 4, 63)];
			if (!(a & 0x0100))
				a &= 0xff00;
			p->auth = p->secclass ? a : 0;
		}
	}
	if (type == 0x86 && (len < 6 || len > 40))
		p->flags |= PF_BAD;
	c->i = i + len;
	return 0;
}

GLOBAL int sl_ipv4_options(struct __sk_buff *skb, __u32 off, __u32 olen)
{
	struct work *w = get_work();
	struct optwalk c = {};
	__u8 *opt;

	if (!w)
		return 0;
	opt = w->obuf;
	__builtin_memset(opt, 0, 64);

	if (olen > 40)
		olen = 40;
	if (olen < 4)
		olen = 4;
	{
		__u32 n = BOUND(olen, 63);

		if (n == 0 || n > 40 || bpf_skb_load_bytes(skb, off, opt, n) < 0)
			return 0;
	}
	/* each iteration takes at least a byte of the 40 */
	c.olen = olen;
	bpf_loop(40, ipv4_opt_step, &c, 0);
	return 0;
}

static long tcp_opt_step(__u32 n, void *ctx)
{
	struct optwalk *c = ctx;
	struct work *w = get_work();
	struct pktinfo *p;
	__u8 *o, t, l;
	__u32 i = c->i;

	if (!w)
		return 1;
	p = &w->p;
	o = w->obuf;
	if (i >= c->olen || i >= 39)
		return 1;
	t = o[BOUND(i, 63)];
	if (t == 0)
		return 1;
	if (t == 1) {
		c->i = i + 1;
		return 0;
	}
	l = o[BOUND(i + 1, 63)];
	/* an option running past the options ends the walk unread, as
	 * ipf_tcpoptions's (ol > ilen) and the engine's parseTCPOptions */
	if (l < 2 || i + l > c->olen)
		return 1;
	if (t == 3) {
		if (l != 3)
			p->flags |= PF_OPTBAD;
		else
			p->wscale = o[BOUND(i + 2, 63)] > 14 ? 14 : o[BOUND(i + 2, 63)];
	}
	if (t == 4) {
		if (l != 2)
			p->flags |= PF_OPTBAD;
		else
			p->sackok = 1;
	}
	if (t == 2 && l != 4)
		p->flags |= PF_OPTBAD;
	c->i = i + l;
	return 0;
}

GLOBAL int sl_tcp_options(struct __sk_buff *skb, __u32 off, __u32 olen)
{
	struct work *w = get_work();
	struct optwalk c = {};
	__u8 *o;

	if (!w)
		return 0;
	o = w->obuf;
	__builtin_memset(o, 0, 64);
	if (olen > 40)
		olen = 40;
	{
		__u32 n = BOUND(olen, 63);

		if (n == 0 || n > 40 || bpf_skb_load_bytes(skb, off, o, n) < 0)
			return 0;
	}
	/* each step takes a byte at least: 40 steps read every option
	 * (the walk once stopped after 20, and a window scale after 20
	 * NOPs went unread, where the engine reads it) */
	c.olen = olen;
	bpf_loop(40, tcp_opt_step, &c, 0);
	return 0;
}

/* hdr returns the len bytes at off: in place when the packet's linear data
 * holds them (direct packet access: no helper call), else copied into buf;
 * NULL when the packet is shorter. len must be a constant. */
static __always_inline const __u8 *hdr(struct __sk_buff *skb, __u32 off, __u32 len, __u8 *buf)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;

	if (off < 0x3fff && data + off + len <= end)
		return data + off;
	if (bpf_skb_load_bytes(skb, off, buf, len) < 0)
		return NULL;
	return buf;
}

/* icmp4_err_bad: the engine's checks of an ICMPv4 error (IPFilter's
 * ipf_pr_icmp): "fragmentation needed" with a next-hop MTU below
 * icmp_minfragmtu (68), a quoted header that is not a first fragment or
 * was not sent by the host the error goes to, and an error too short to
 * quote a header up to its source address are bad. buf is the caller's
 * 20-byte scratch. */
static __always_inline void icmp4_err_bad(struct __sk_buff *skb, struct pktinfo *p, __u32 off, __u32 dlen,
					  __u8 t, __u8 *buf)
{
	const __u8 *h;
	__u32 src;

	if (t == 3 && dlen >= 8 && (h = hdr(skb, off, 8, buf)) && h[1] == 4 && ((h[6] << 8) | h[7]) < 68)
		p->flags |= PF_BAD;
	/* IPFilter reads the quote up to its source address only: a quote
	 * cut after it is as good as a whole header */
	if (dlen < 24 || !(h = hdr(skb, off + 8, 16, buf))) {
		p->flags |= PF_BAD;
		return;
	}
	if (((h[6] << 8) | h[7]) & 0x1fff)
		p->flags |= PF_BAD;
	__builtin_memcpy(&src, &h[12], 4);
	if (src != p->dst[0])
		p->flags |= PF_BAD;
}

/* icmp6_err_bad: the engine's check of an ICMPv6 error (IPFilter's
 * ipf_pr_icmp6): one whose packet is long enough to quote a whole header
 * (ICMP6ERR_IPICMPHLEN, 88 bytes) must quote one sent by the host the
 * error goes to, or it is bad. Returns 1 when the quote is not in the
 * buffer (the pull-up's failure: dropped before the rules, not short).
 * buf is the caller's 20-byte scratch. */
static __always_inline int icmp6_err_bad(struct __sk_buff *skb, struct pktinfo *p, __u32 off, __u8 *buf)
{
	const __u8 *h;
	__u32 src[4];

	if (p->plen < 88)
		return 0;
	if (off + 48 > skb->len || !(h = hdr(skb, off + 16, 16, buf))) {
		p->flags |= PF_BAD | PF_PULLUP;
		return 1;
	}
	__builtin_memcpy(src, h, 16);
	if (src[0] != p->dst[0] || src[1] != p->dst[1] || src[2] != p->dst[2] || src[3] != p->dst[3])
		p->flags |= PF_BAD;
	return 0;
}

static __always_inline void parse_l4(struct __sk_buff *skb, struct pktinfo *p, __u32 off, __u32 fragoff)
{
	__u32 dlen = p->dlen;
	__u8 buf[20] = {};
	const __u8 *h;

	if (p->l4proto == IPPROTO_TCP || p->l4proto == IPPROTO_UDP)
		p->flags |= PF_TCPUDP;

	if (fragoff != 0) {
		__u32 min = 0;

		if (p->l4proto == IPPROTO_TCP)
			min = 20;
		else if (p->l4proto == IPPROTO_UDP)
			min = 8;
		else if (p->l4proto == IPPROTO_ICMP || p->l4proto == IPPROTO_ICMPV6)
			min = 8;
		if (fragoff < min)
			p->flags |= PF_SHORT;
		return;
	}

	{
		/* IPFilter pulls the L4 header up; when the buffer does not hold
		 * it the packet is dropped before the rules (pullup-fail) */
		__u32 need = 0;

		if (p->l4proto == IPPROTO_TCP && dlen >= 20)
			need = 20;
		else if (p->l4proto == IPPROTO_UDP && dlen > 3)
			need = 8;
		else if (p->l4proto == IPPROTO_ICMP || p->l4proto == IPPROTO_ICMPV6)
			need = 8;
		else if (p->l4proto == 47 || p->l4proto == 50)
			need = 8; /* a whole grehdr_t; the ESP SPI and sequence */
		if (need && off + need > skb->len) {
			p->flags |= PF_BAD | PF_PULLUP;
			return;
		}
	}
	switch (p->l4proto) {
	case IPPROTO_TCP: {
		__u8 f;

		h = dlen >= 20 ? hdr(skb, off, 20, buf) : NULL;
		if (!h && p->family == 6 && dlen >= 4 && dlen < 20) {
			/* IPFilter's IPv6 path calls a TCP header under 20
			 * bytes bad, not short, when the packet is whole, and
			 * nothing when it is a first fragment; either way it
			 * reads the header, the missing bytes as zero (the
			 * engine's shortTCP6): state made by such a first
			 * fragment tracks its sequence and window */
			/* no field is read past byte 16 (the urgent pointer is
			 * never there): 16 bytes, or what there is */
			__u32 n = dlen >= 16 ? 16 : dlen & 0xf;

			__builtin_memset(buf, 0, 20);
			if (n >= 4 && bpf_skb_load_bytes(skb, off, buf, n) == 0) {
				if (!(p->flags & PF_FRAG))
					p->flags |= PF_BAD;
				h = buf;
			}
		}
		if (!h) {
			p->flags |= PF_SHORT;
			if (dlen >= 4 && bpf_skb_load_bytes(skb, off, buf, 4) == 0) {
				p->sport = (buf[0] << 8) | buf[1];
				p->dport = (buf[2] << 8) | buf[3];
				p->flags |= PF_PORTS;
			}
			return;
		}
		p->sport = (h[0] << 8) | h[1];
		p->dport = (h[2] << 8) | h[3];
		p->seq = ((__u32)h[4] << 24) | ((__u32)h[5] << 16) | ((__u32)h[6] << 8) | h[7];
		p->ack = ((__u32)h[8] << 24) | ((__u32)h[9] << 16) | ((__u32)h[10] << 8) | h[11];
		p->doff = h[12] >> 4;
		p->tcpflags = f = h[13];
		p->win = (h[14] << 8) | h[15];
		p->flags |= PF_PORTS;
		{
			int bad = p->doff < 5;

			if ((f & 0x20) && h[18] == 0 && h[19] == 0)
				bad = 1; /* URG with urp 0 */
			if ((f & (0x02 | 0x01)) && (f & 0x04) && !(f & 0x10))
				bad = 1;
			if ((f & 0x02) && (f & (0x20 | 0x08)))
				bad = 1;
			if (!(f & 0x10) && !(f & (0x02 | 0x04)))
				bad = 1;
			/* no ACK: SYN or RST with URG, PSH or FIN (SYN|FIN) */
			if (!(f & 0x10) && (f & (0x20 | 0x08 | 0x01)))
				bad = 1;
			if (bad) {
				p->flags |= PF_BAD;
			} else if (p->doff > 5 && off + p->doff * 4 > skb->len) {
				/* ipf_pr_tcpcommon pulls the options up too */
				p->flags |= PF_BAD | PF_PULLUP;
				return;
			}
		}
		/* window scale and SACK-permitted from a SYN's options */
		p->wscale = 0xff;
		if ((f & 0x02) && p->doff > 5)
			sl_tcp_options(skb, off + 20, (p->doff - 5) * 4);
		return;
	}
	case IPPROTO_UDP:
		h = dlen >= 8 ? hdr(skb, off, 8, buf) : NULL;
		if (!h) {
			p->flags |= PF_SHORT;
			if (dlen >= 4 && bpf_skb_load_bytes(skb, off, buf, 4) == 0) {
				p->sport = (buf[0] << 8) | buf[1];
				p->dport = (buf[2] << 8) | buf[3];
				p->flags |= PF_PORTS;
			}
			return;
		}
		p->sport = (h[0] << 8) | h[1];
		p->dport = (h[2] << 8) | h[3];
		p->flags |= PF_PORTS;
		return;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6: {
		__u8 t;
		__u32 min = 8;

		h = dlen >= 2 ? hdr(skb, off, 2, buf) : NULL;
		if (!h) {
			p->flags |= PF_SHORT;
			return;
		}
		t = h[0];
		p->icmp = (h[0] << 8) | h[1];
		p->flags |= PF_ICMPOK;
		/* state matches every ICMPv4 message but an error by its id
		 * field (bytes 4-5); ICMPv6 only echoes */
		if (((p->l4proto == IPPROTO_ICMP && t != 3 && t != 4 && t != 5 && t != 11 && t != 12) ||
		     (p->l4proto == IPPROTO_ICMPV6 && (t == 128 || t == 129))) &&
		    dlen >= 6 && (h = hdr(skb, off, 6, buf)))
			p->icmpid = (h[4] << 8) | h[5];
		if (p->l4proto == IPPROTO_ICMP) {
			switch (t) {
			case 0: case 8: case 9: case 10:
				p->flags |= PF_ICMPQUERY;
				break;
			case 13: case 14:
				min = 20;
				p->flags |= PF_ICMPQUERY;
				break;
			case 15: case 16:
				p->flags |= PF_ICMPQUERY;
				min = 28;
				break;
			case 17: case 18:
				min = 12;
				p->flags |= PF_ICMPQUERY;
				break;
			case 3: case 4: case 5: case 11: case 12:
				min = 28;
				p->flags |= PF_ICMPERR;
				icmp4_err_bad(skb, p, off, dlen, t, buf);
				break;
			default:
				min = 28;
			}
		} else {
			if (t >= 128) {
				p->flags |= PF_ICMPQUERY;
			} else if (t >= 1 && t <= 4) {
				p->flags |= PF_ICMPERR;
				/* an error is short unless it quotes the whole
				 * 40-byte header (ICMP6ERR_IPICMPHLEN) */
				min = 48;
				if (icmp6_err_bad(skb, p, off, buf))
					return;
			}
		}
		if (dlen < min)
			p->flags |= PF_SHORT;
		return;
	}
	}
}

static __always_inline int parse_ipv4(struct __sk_buff *skb, struct pktinfo *p, __u32 off)
{
	__u8 buf[20];
	const __u8 *h;
	__u32 hl, fo, fragoff;

	p->family = 4;
	h = hdr(skb, off, 20, buf);
	if (!h) {
		p->flags |= PF_SHORT | PF_BAD;
		return 0;
	}
	hl = (h[0] & 0xf) * 4;
	p->tos = h[1];
	p->plen = (h[2] << 8) | h[3];
	fo = (h[6] << 8) | h[7];
	p->ipid = (h[4] << 8) | h[5];
	p->ttl = h[8];
	p->proto = p->l4proto = h[9];
	__builtin_memcpy(&p->src[0], &h[12], 4);
	__builtin_memcpy(&p->dst[0], &h[16], 4);
	if (hl < 20 || p->plen < hl) {
		p->flags |= PF_BAD;
		return 0;
	}
	p->dlen = p->plen - hl;
	p->l4off = off + hl;
	fragoff = (fo & 0x1fff) * 8;
	p->fragoff = fragoff;
	if (fo & 0x3fff)
		p->flags |= PF_FRAG;
	if (fragoff) {
		p->flags |= PF_FRAGBODY;
		if (fragoff + p->dlen > 65535 || p->dlen == 0 || ((fo & 0x2000) && (p->dlen & 7)))
			p->flags |= PF_BAD;
	}
	if ((h[16] & 0xf0) == 0xe0)
		p->flags |= PF_MCAST | PF_MBCAST;
	if (hl > 20) {
		p->flags |= PF_IPOPTS;
		sl_ipv4_options(skb, off + 20, hl - 20);
	}
	if (p->proto == IPPROTO_AH) {
		/* ipf_pr_ah (§2.1): skip (len+2)*4 bytes and dissect what
		 * follows; proto stays AH, as fi_p does */
		__u8 ah[2];
		__u32 n;

		p->flags |= PF_AH;
		p->l4proto = 59; /* IPPROTO_NONE */
		if (fragoff ? fragoff < 12 : p->dlen < 12) {
			p->flags |= PF_SHORT;
			return 0;
		}
		if (fragoff)
			return 0;
		if (off + hl + 12 > skb->len || bpf_skb_load_bytes(skb, off + hl, ah, 2) < 0) {
			p->flags |= PF_BAD | PF_PULLUP;
			return 0;
		}
		n = ((__u32)ah[1] + 2) * 4;
		if (n > p->dlen) {
			/* IPFilter steps past the packet and the next pull-up
			 * frees it (bad-packet) */
			p->flags |= PF_BAD | PF_PULLUP;
			return 0;
		}
		p->dlen -= n;
		p->l4off += n;
		p->l4proto = ah[0];
		parse_l4(skb, p, off + hl + n, 0);
		return 0;
	}
	parse_l4(skb, p, off + hl, fragoff);
	return 0;
}

static __always_inline __u32 v6x_bit(__u8 nh)
{
	switch (nh) {
	case 0: return V6X_HOPOPTS;
	case 41: return V6X_IPV6;
	case 43: return V6X_ROUTING;
	case 44: return V6X_FRAG;
	case 50: return V6X_ESP;
	case 51: return V6X_AH;
	case 59: return V6X_NONE;
	case 60: return V6X_DSTOPTS;
	case 135: return V6X_MOBILITY;
	}
	return 0;
}

#define NH_NONE 59

/* The IPv6 header chain is walked one extension header per bpf_loop
 * iteration, so a chain of any length is walked to its end exactly as the
 * Go engine walks it (packet.Info.parseIPv6, IPFilter's ipf_pr_ipv6hdr and
 * ipf_pr_ipv6exthdr): no header is left unread and taken for the
 * transport. An IPv6 packet of 64 KB holds at most 8192 headers. */
#define V6_MAX_HDRS 8200

struct v6walk {
	struct __sk_buff *skb;
	__u32 pos;     /* offset of the header at hand */
	__u32 end;     /* end of the IP payload */
	__u32 fragoff; /* fragment offset (bytes) of a fragment header */
	__u8 nh;       /* type of the header at hand */
	__u8 walking;  /* 0: the walk reached a header it does not skip */
	__u8 h[8];     /* the last extension header read */
};

/* v6_exthdr skips the extension header at c->pos (of type proto, as the
 * bits count it) and returns the next header type, NH_NONE when it is
 * short or malformed (ipf_pr_ipv6exthdr). A type seen twice makes the
 * packet bad (IPFilter's `multiple` is false for every header walked
 * here; the engine's extHdr). */
static __always_inline __u8 v6_exthdr(struct v6walk *c, struct pktinfo *p, __u8 proto)
{
	__u32 dlen = c->end - c->pos, shift, bit;

	p->flags |= PF_V6HDRS;
	if (dlen < 8) {
		p->flags |= PF_SHORT;
		return NH_NONE;
	}
	if (c->pos + 8 > c->skb->len || bpf_skb_load_bytes(c->skb, c->pos, c->h, 8) < 0) {
		p->flags |= PF_BAD | PF_PULLUP;
		return NH_NONE;
	}
	shift = proto == 44 ? 8 : ((__u32)c->h[1] + 1) * 8;
	if (shift > dlen) {
		p->flags |= PF_BAD;
		return NH_NONE;
	}
	c->pos += shift;
	/* headers are not recorded past a fragment header */
	if (p->flags & PF_FRAG)
		return c->h[0];
	bit = v6x_bit(proto);
	if (p->optbits & bit)
		p->flags |= PF_BAD;
	else
		p->optbits |= bit;
	return c->h[0];
}

static long v6_step(__u32 i, void *ctx)
{
	struct v6walk *c = ctx;
	struct work *w = get_work();
	struct pktinfo *p;
	__u32 start = c->pos;
	__u8 nh = c->nh, next;

	if (!w)
		return 1;
	p = &w->p;
	if (p->flags & PF_SHORT)
		return 1;
	switch (nh) {
	case 0:
	case 60: /* a second destination-options header is bad too (IPFilter) */
	case 135:
		next = v6_exthdr(c, p, nh);
		break;
	case 51:
		/* IPFilter walks an IPv6 AH like any extension header (its
		 * length in 8-byte units, not AH's 4-byte ones) and records it
		 * as hop-by-hop */
		p->flags |= PF_AH;
		next = v6_exthdr(c, p, 0);
		/* then a whole AH header's worth (12 bytes) must follow, or
		 * the packet is short (the engine's walk) */
		if (next != NH_NONE && c->pos + 12 > c->end)
			p->flags |= PF_SHORT;
		break;
	case 43:
		next = v6_exthdr(c, p, nh);
		if (next != NH_NONE && c->h[2] == 0 &&
		    ((c->h[1] >> 1) < c->h[3] || (c->h[3] && (c->h[1] & 1)))) {
			/* type 0 with more segments left than addresses */
			p->flags |= PF_BAD;
			next = NH_NONE;
		}
		break;
	case 44: {
		__u32 fo;

		next = v6_exthdr(c, p, nh);
		p->flags |= PF_FRAG;
		if (next == NH_NONE && c->pos == start)
			break;
		fo = ((__u32)c->h[2] << 8) | c->h[3];
		if ((fo & 1) && (p->plen & 7))
			p->flags |= PF_BAD;
		p->ipid = ((__u32)c->h[4] << 24) | ((__u32)c->h[5] << 16) | ((__u32)c->h[6] << 8) | c->h[7];
		c->fragoff = fo & 0xfff8;
		p->fragoff = c->fragoff;
		if (c->fragoff) {
			p->flags |= PF_FRAGBODY;
			c->walking = 0;
		}
		/* IPFilter shifts the offset, already in bytes, by 3 again */
		if ((c->fragoff << 3) + (c->end - c->pos) > 65535)
			p->flags |= PF_BAD;
		break;
	}
	case 41:
		if (!(p->flags & PF_FRAG))
			p->optbits |= V6X_IPV6;
		c->walking = 0;
		return 1;
	default:
		/* a transport, ESP, no next header, or one it does not know */
		c->walking = 0;
		return 1;
	}
	c->nh = next;
	if (!c->walking)
		return 1;
	if (next != NH_NONE && c->pos > c->skb->len) {
		p->flags |= PF_BAD | PF_PULLUP;
		c->nh = NH_NONE;
		return 1;
	}
	/* NH_NONE ends the walk at the next step, as no next header */
	return 0;
}

static __always_inline int parse_ipv6(struct __sk_buff *skb, struct pktinfo *p, __u32 off)
{
	struct v6walk c = {};
	__u8 buf[40];
	const __u8 *h;

	p->family = 6;
	h = hdr(skb, off, 40, buf);
	if (!h) {
		p->flags |= PF_SHORT | PF_BAD;
		return 0;
	}
	p->tos = ((h[0] & 0xf) << 4) | (h[1] >> 4);
	p->dlen = (h[4] << 8) | h[5];
	p->ttl = h[7];
	__builtin_memcpy(p->src, &h[8], 16);
	__builtin_memcpy(p->dst, &h[24], 16);
	p->plen = p->dlen + 40;
	if (p->dlen == 0) {
		p->flags |= PF_JUMBO | PF_BAD;
		return 0;
	}
	/* an IPv6 multicast destination is no FI_MULTICAST (only the link
	 * layer's flags mark IPv6 packets), as in IPFilter */
	c.skb = skb;
	c.pos = off + 40;
	c.end = c.pos + p->dlen;
	c.nh = h[6];
	c.walking = 1;
	switch (c.nh) {
	case 0: case 41: case 43: case 44: case 51: case 60: case 135:
		bpf_loop(V6_MAX_HDRS, v6_step, &c, 0);
		break;
	default:
		/* the transport (or a header the walk stops at) comes first:
		 * nothing to walk */
		c.walking = 0;
	}
	p->proto = p->l4proto = c.nh;
	p->dlen = c.end - c.pos;
	p->l4off = c.pos;
	if (c.walking) {
		/* the walk stopped short of a transport header: a first
		 * fragment that ends there is bad */
		if ((p->flags & PF_FRAG) && !c.fragoff)
			p->flags |= PF_BAD;
		return 0;
	}
	if (c.fragoff)
		return 0;
	switch (c.nh) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_ICMPV6:
		parse_l4(skb, p, c.pos, 0);
		break;
	case 47: /* GRE */
		if (p->dlen < 4)
			p->flags |= PF_SHORT;
		break;
	case 50: /* ESP */
		if (p->dlen < 8)
			p->flags |= PF_SHORT;
		break;
	}
	return 0;
}

/* tcp_flags_ok is tcp_clean but for a SYN's options, which parse_fast
 * reads (tcp_opts_fast): a TCP header at t whose offset and flags
 * parse_l4 would not call bad. (tcp_clean keeps its own copy of the
 * checks: written through this one, est_path's frame grew 8 bytes, past
 * the verifier's limit with sluice_ingress's.) */
static __always_inline int tcp_flags_ok(const __u8 *t)
{
	__u8 f = t[13], doff = t[12] >> 4;

	if (doff < 5)
		return 0;
	if ((f & 0x20) && t[18] == 0 && t[19] == 0)
		return 0;
	if ((f & (0x02 | 0x01)) && (f & 0x04) && !(f & 0x10))
		return 0;
	if ((f & 0x02) && (f & (0x20 | 0x08)))
		return 0;
	if (!(f & 0x10) && !(f & (0x02 | 0x04)))
		return 0;
	if (!(f & 0x10) && (f & (0x20 | 0x08 | 0x01)))
		return 0;
	return 1;
}

/* tcp_clean reports whether a TCP header at t can take the fast paths
 * that read no options (clean_family, fast.h, est.h): 0 for bad flags or
 * a SYN's options. */
static __always_inline int tcp_clean(const __u8 *t)
{
	__u8 f = t[13], doff = t[12] >> 4;

	if (doff < 5 || ((f & 0x02) && doff > 5))
		return 0;
	if ((f & 0x20) && t[18] == 0 && t[19] == 0)
		return 0;
	if ((f & (0x02 | 0x01)) && (f & 0x04) && !(f & 0x10))
		return 0;
	if ((f & 0x02) && (f & (0x20 | 0x08)))
		return 0;
	if (!(f & 0x10) && !(f & (0x02 | 0x04)))
		return 0;
	if (!(f & 0x10) && (f & (0x20 | 0x08 | 0x01)))
		return 0;
	return 1;
}

/* tcp_opts_fast is sl_tcp_options for parse_fast: the olen bytes of
 * options at o, in the packet's linear data up to end, walked in place.
 * It returns 1 with p's window scale and SACK-permitted set as the full
 * walk (tcp_opt_step) sets them, or 0 for anything it leaves to that
 * walk: a window-scale, SACK-permitted or MSS option of the wrong length (the
 * full walk marks it PF_OPTBAD), more than 10 options. Each step as
 * tcp_opt_step's: an EOL ends the walk, a NOP takes a byte, a length
 * under 2 (or read past the options, where the full walk reads zero) or
 * running past the options ends it, an option starting at byte 39 or
 * later is not read; the last window scale counts. Ten steps take a SYN
 * of Linux, Windows or macOS (5 to 9 options). */
static __noinline int tcp_opts_fast(const __u8 *o, const void *end, __u32 olen, struct pktinfo *p)
{
	__u32 i = 0;

#pragma unroll
	for (int k = 0; k < 10; k++) {
		const __u8 *q;
		__u8 t, l;

		if (i >= olen || i >= 39)
			return 1;
		q = o + i;
		if ((const void *)(q + 1) > end)
			return 0;
		t = q[0];
		if (t == 0)
			return 1;
		if (t == 1) {
			i++;
			continue;
		}
		if (i + 1 >= olen)
			return 1;
		if ((const void *)(q + 2) > end)
			return 0;
		l = q[1];
		if (l < 2 || i + l > olen)
			return 1;
		if (t == 3) {
			if (l != 3 || (const void *)(q + 3) > end)
				return 0;
			p->wscale = q[2] > 14 ? 14 : q[2];
		} else if (t == 4) {
			if (l != 2)
				return 0;
			p->sackok = 1;
		} else if (t == 2 && l != 4) {
			return 0;
		}
		i += l;
	}
	return 0;
}

/* parse_tcp_fast reads a TCP header at t, the packet's linear data ending
 * at end, for parse_fast: 0 when the segment needs the full parse (bad
 * flags, a SYN whose options tcp_opts_fast leaves to it or that end past
 * the linear data). A new connection's two SYNs take it: the full parse
 * of their options cost each ~70-90 ns (docs/datapath-cost.md, crr15). */
static __always_inline int parse_tcp_fast(const __u8 *t, const void *end, struct pktinfo *p)
{
	__u8 f = t[13], doff = t[12] >> 4;

	if (!tcp_flags_ok(t))
		return 0;
	p->wscale = 0xff;
	if ((f & 0x02) && doff > 5 &&
	    ((const void *)(t + doff * 4) > end || !tcp_opts_fast(t + 20, end, (doff - 5) * 4, p)))
		return 0;
	p->sport = (t[0] << 8) | t[1];
	p->dport = (t[2] << 8) | t[3];
	p->seq = ((__u32)t[4] << 24) | ((__u32)t[5] << 16) | ((__u32)t[6] << 8) | t[7];
	p->ack = ((__u32)t[8] << 24) | ((__u32)t[9] << 16) | ((__u32)t[10] << 8) | t[11];
	p->doff = doff;
	p->tcpflags = f;
	p->win = (t[14] << 8) | t[15];
	p->flags |= PF_TCPUDP | PF_PORTS;
	return 1;
}

/* parse_fast is the parse of the common packet, straight from the
 * packet's linear data with no helper calls: Ethernet, IPv4 without
 * options and not a fragment, or IPv6 with the transport right after its
 * header, then TCP (no bad flags; a SYN's usual options) or UDP with a
 * whole header. It fills p exactly as sl_parse would and returns the
 * family, or 0 (p untouched) for anything else, which sl_parse then
 * takes. */
static __always_inline int parse_fast(struct __sk_buff *skb, struct pktinfo *p, __u32 l3off)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	const __u8 *h = data + 14, *l4;
	__u32 plen, dlen;
	__u8 proto;

	if (l3off != 14)
		return 0;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (data + 14 + 20 + 8 > end)
			return 0;
		if (h[0] != 0x45 || (((h[6] << 8) | h[7]) & 0x3fff))
			return 0;
		plen = (h[2] << 8) | h[3];
		proto = h[9];
		l4 = h + 20;
		dlen = plen - 20;
		if (plen < 20 || !((proto == IPPROTO_TCP && dlen >= 20) || (proto == IPPROTO_UDP && dlen >= 8)))
			return 0;
		if (proto == IPPROTO_TCP) {
			if (data + 14 + 20 + 20 > end || !parse_tcp_fast(l4, end, p))
				return 0;
		} else {
			p->sport = (l4[0] << 8) | l4[1];
			p->dport = (l4[2] << 8) | l4[3];
			p->flags |= PF_TCPUDP | PF_PORTS;
		}
		p->family = 4;
		p->tos = h[1];
		p->plen = plen;
		p->ipid = (h[4] << 8) | h[5];
		p->ttl = h[8];
		p->proto = p->l4proto = proto;
		__builtin_memcpy(&p->src[0], &h[12], 4);
		__builtin_memcpy(&p->dst[0], &h[16], 4);
		if ((h[16] & 0xf0) == 0xe0)
			p->flags |= PF_MCAST | PF_MBCAST;
		p->dlen = dlen;
		p->l4off = 14 + 20;
		return 4;
	}
	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		if (data + 14 + 40 + 8 > end)
			return 0;
		dlen = (h[4] << 8) | h[5];
		proto = h[6];
		l4 = h + 40;
		if (!((proto == IPPROTO_TCP && dlen >= 20) || (proto == IPPROTO_UDP && dlen >= 8)))
			return 0;
		if (proto == IPPROTO_TCP) {
			if (data + 14 + 40 + 20 > end || !parse_tcp_fast(l4, end, p))
				return 0;
		} else {
			p->sport = (l4[0] << 8) | l4[1];
			p->dport = (l4[2] << 8) | l4[3];
			p->flags |= PF_TCPUDP | PF_PORTS;
		}
		p->family = 6;
		p->tos = ((h[0] & 0xf) << 4) | (h[1] >> 4);
		p->plen = dlen + 40;
		p->ttl = h[7];
		p->proto = p->l4proto = proto;
		__builtin_memcpy(p->src, &h[8], 16);
		__builtin_memcpy(p->dst, &h[24], 16);
		p->dlen = dlen;
		p->l4off = 14 + 40;
		return 6;
	}
	return 0;
}


/* clean_family is parse_fast without its stores: the family of a packet
 * parse_fast would take (and so no short, bad, fragment or option flag
 * to count), else 0. An idle filter counts such packets and is done. */
static __always_inline int clean_family(struct __sk_buff *skb, __u32 l3off)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	const __u8 *h = data + 14;
	__u32 plen;
	__u8 proto;

	if (l3off != 14)
		return 0;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (data + 14 + 20 + 8 > end || h[0] != 0x45 || (((h[6] << 8) | h[7]) & 0x3fff))
			return 0;
		plen = (h[2] << 8) | h[3];
		proto = h[9];
		if (proto == IPPROTO_UDP)
			return plen >= 28 ? 4 : 0;
		if (proto != IPPROTO_TCP || plen < 40 || data + 14 + 20 + 20 > end)
			return 0;
		return tcp_clean(h + 20) ? 4 : 0;
	}
	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		if (data + 14 + 40 + 8 > end)
			return 0;
		plen = (h[4] << 8) | h[5];
		proto = h[6];
		if (proto == IPPROTO_UDP)
			return plen >= 8 ? 6 : 0;
		if (proto != IPPROTO_TCP || plen < 20 || data + 14 + 40 + 20 > end)
			return 0;
		return tcp_clean(h + 40) ? 6 : 0;
	}
	return 0;
}

GLOBAL int sl_parse(struct __sk_buff *skb, __u32 l3off)
{
	struct work *w = get_work();

	if (!w)
		return 0;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		parse_ipv4(skb, &w->p, l3off);
		return 4;
	}
	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		parse_ipv6(skb, &w->p, l3off);
		return 6;
	}
	return 0;
}

#endif
