/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The ftp proxy (IPFilter's ip_ftp_pxy.c as internal/nat/ftp.go has it),
 * included by nat.c. Each side of the control connection has a line
 * buffer; whole lines are acted upon: PORT/EPRT from the client, the 227
 * (PASV) and 229 (EPSV) replies from the server. A rewritten line changes
 * the payload's length, so the segment is resized and later sequence and
 * acknowledgement numbers are shifted by what each side gained. Every
 * data connection announced gets a wildcard session that the first
 * packet of the connection completes.
 *
 * The segment's payload is worked on in the scratch area (w->pay, its
 * original kept in w->orig for the checksum difference) and written back
 * once. The side's line buffer and the login state are copied from their
 * map entries into the scratch area too (w->side, w->fc) and back at the
 * end. Loops over bytes run as bpf_loop callbacks, so the verifier checks
 * each loop body once rather than every turn of it.
 */

/* Line verdicts (FTPXY_JUNK_*). */
#define JUNK_OK 0
#define JUNK_BAD 1
#define JUNK_EOL 2
#define JUNK_CONT 3

/* Login states (FTPXY_*). */
#define FTP_INIT 0
#define FTP_USER1 1
#define FTP_USOK1 2
#define FTP_PASS1 3
#define FTP_PAOK1 4
#define FTP_ACCT1 7
#define FTP_GO 12

#define FTP_C_PASV 1
#define FTP_C_EPSV 2

/* ftpProcess phases (the engine's loop, one step per bpf_loop turn). */
#define PH_COPY 0
#define PH_AGAIN 1
#define PH_LINES 2
#define PH_TAIL 3
#define PH_AFTER 4 /* back from acting on a line */

#define PAYMASK (FTP_MAXPAY - 1)

/* scan kinds (scan()) */
#define SC_CRLF_BUF 1   /* buf[i-1] == '\r' && buf[i] == '\n' */
#define SC_NL_BUF 2     /* buf[i] == '\n' */
#define SC_NL_PAY 3     /* pay[i] == '\n' */
#define SC_DIGIT_PAY 4  /* pay[i] is a digit */
#define SC_CHAR_PAY 5   /* pay[i] == ch */
#define SC_NDIGIT_PAY 6 /* pay[i] is not a digit */

/* byte moves (mv()) */
#define MV_TMP_PAY 1  /* tmp[dst+i] = pay[src+i] */
#define MV_PAY_LINE 2 /* pay[dst+i] = line[src+i] */
#define MV_PAY_TMP 3  /* pay[dst+i] = tmp[src+i] */
#define MV_BUF_PAY 4  /* buf[dst+i] = pay[src+i] */
#define MV_BUF_BUF 5  /* buf[dst+i] = buf[src+i], dst < src */

static __always_inline struct nat_ftp *ftp_part(struct work *w, __u32 side)
{
	__u64 k = w->fc.seq * 2 + (side & 1);

	return bpf_map_lookup_elem(&ftps, &k);
}

static __always_inline int is_alpha(__u8 c)
{
	c |= 0x20;
	return c >= 'a' && c <= 'z';
}

static __always_inline int is_digit(__u8 c)
{
	return c >= '0' && c <= '9';
}

/* The side's line buffer (FTP_BUFSZ bytes used, 256 for masking). */
static __always_inline __u8 sbuf(struct work *w, __s32 i)
{
	if (i < 0 || i >= FTP_BUFSZ)
		return 0;
	return w->side.buf[BOUND(i, 0xff)];
}

static __always_inline void sbuf_set(struct work *w, __s32 i, __u8 c)
{
	if (i >= 0 && i < FTP_BUFSZ)
		w->side.buf[BOUND(i, 0xff)] = c;
}

static __always_inline __u8 pay(struct work *w, __u32 i)
{
	return w->pay[BOUND(i, PAYMASK)];
}

static long scan_step(__u32 k, void *unused)
{
	struct work *w = get_work();
	__u32 i;
	__u8 c;

	if (!w)
		return 1;
	i = w->sc2.from + k;
	if (i >= w->sc2.to)
		return 1;
	switch (w->sc2.kind) {
	case SC_CRLF_BUF:
		if (i > 0 && sbuf(w, i - 1) == '\r' && sbuf(w, i) == '\n')
			goto found;
		return 0;
	case SC_NL_BUF:
		if (sbuf(w, i) == '\n')
			goto found;
		return 0;
	}
	c = pay(w, i);
	switch (w->sc2.kind) {
	case SC_NL_PAY:
		if (c == '\n')
			goto found;
		return 0;
	case SC_DIGIT_PAY:
		if (is_digit(c))
			goto found;
		return 0;
	case SC_NDIGIT_PAY:
		if (!is_digit(c))
			goto found;
		return 0;
	case SC_CHAR_PAY:
		if (c == w->sc2.ch)
			goto found;
		return 0;
	}
	return 1;
found:
	w->sc2.res = i;
	return 1;
}

/* scan returns the first i in [from, to) that the kind's test holds for,
 * or to when there is none. */
static __always_inline __u32 scan(struct work *w, __u8 kind, __u32 from, __u32 to, __u8 ch)
{
	w->sc2.kind = kind;
	w->sc2.from = from;
	w->sc2.to = to;
	w->sc2.res = to;
	w->sc2.ch = ch;
	if (from < to)
		bpf_loop(FTP_MAXPAY, scan_step, NULL, 0);
	return w->sc2.res;
}

static long mv_step(__u32 i, void *unused)
{
	struct work *w = get_work();
	__u32 d, s;

	if (!w || i >= w->mv.n)
		return 1;
	d = w->mv.dst + i;
	s = w->mv.src + i;
	switch (w->mv.kind) {
	case MV_TMP_PAY:
		w->tmp[BOUND(d, PAYMASK)] = w->pay[BOUND(s, PAYMASK)];
		break;
	case MV_PAY_LINE:
		w->pay[BOUND(d, PAYMASK)] = w->line[BOUND(s, sizeof(w->line) - 1)];
		break;
	case MV_PAY_TMP:
		w->pay[BOUND(d, PAYMASK)] = w->tmp[BOUND(s, PAYMASK)];
		break;
	case MV_BUF_PAY:
		sbuf_set(w, d, pay(w, s));
		break;
	case MV_BUF_BUF:
		sbuf_set(w, d, sbuf(w, s));
		break;
	}
	return 0;
}

static __always_inline void mv(struct work *w, __u8 kind, __u32 dst, __u32 src, __u32 n)
{
	w->mv.kind = kind;
	w->mv.dst = dst;
	w->mv.src = src;
	w->mv.n = n;
	if (n)
		bpf_loop(FTP_MAXPAY, mv_step, NULL, 0);
}

/* ftp_valid is ipf_p_ftp_client_valid (side 0) or ipf_p_ftp_server_valid
 * (side 1) over the buffered bytes [r, wr). */
static __always_inline int ftp_valid(struct work *w, __u32 side, __s32 r, __s32 wr)
{
	__s32 len = wr - r;
	__u8 c, c3;

	if (!w || r < 0 || wr > FTP_BUFSZ)
		return JUNK_EOL;
	if (side == 0) {
		__u8 cmd[4] = {};
		__s32 i;

		if (w->side.junk == JUNK_BAD)
			return JUNK_BAD;
		if (len < 5)
			return JUNK_EOL;
		for (i = 0; i < 4; i++) {
			c = sbuf(w, r + i);
			if (!is_alpha(c))
				break;
			cmd[i] = c & ~0x20;
		}
		c = sbuf(w, r + i);
		if (i < 3 || (c != ' ' && c != '\r'))
			return JUNK_BAD;
		if (scan(w, SC_CRLF_BUF, r + i + 1, wr, 0) >= (__u32)wr)
			return JUNK_EOL;
		if (cmd[0] == 'P' && cmd[1] == 'A' && cmd[2] == 'S' && cmd[3] == 'V')
			w->side.cmd = FTP_C_PASV;
		else if (cmd[0] == 'E' && cmd[1] == 'P' && cmd[2] == 'S' && cmd[3] == 'V')
			w->side.cmd = FTP_C_EPSV;
		else
			w->side.cmd = 0;
		return JUNK_OK;
	}
	if (len < 5)
		return JUNK_EOL;
	c3 = sbuf(w, r + 3);
	if (!is_digit(sbuf(w, r)) || !is_digit(sbuf(w, r + 1)) || !is_digit(sbuf(w, r + 2)) || (c3 != '-' && c3 != ' '))
		return JUNK_BAD;
	if (c3 == '-')
		return JUNK_CONT;
	if (scan(w, SC_CRLF_BUF, r + 4, wr, 0) >= (__u32)wr)
		return JUNK_EOL;
	return JUNK_OK;
}

/* String constants are packed into integers at compile time (PK8), so
 * the programs read no .rodata. */
#define CH(s, i) ((__u64)(__u8)((i) < sizeof(s) - 1 ? (s)[(i) < sizeof(s) - 1 ? (i) : 0] : 0))
#define PK8(s, o)                                                                                       \
	(CH(s, (o)) | CH(s, (o) + 1) << 8 | CH(s, (o) + 2) << 16 | CH(s, (o) + 3) << 24 | CH(s, (o) + 4) << 32 | \
	 CH(s, (o) + 5) << 40 | CH(s, (o) + 6) << 48 | CH(s, (o) + 7) << 56)

/* prefix8 compares up to 8 bytes of the payload at at with the packed k
 * (n bytes), letters folded to upper case when fold is set (the engine's
 * hasPrefixFold), exactly otherwise. */
static __always_inline int prefix8(struct work *w, __u32 at, __u64 k, __u32 n, int fold)
{
	for (__u32 i = 0; i < 8; i++) {
		__u8 c;

		if (i >= n)
			break;
		c = pay(w, at + i);
		if (fold && is_alpha(c))
			c &= ~0x20;
		if (c != (__u8)(k >> (8 * i)))
			return 0;
	}
	return 1;
}

#define PREFIX(w, at, llen, s, fold)                                                                        \
	((llen) >= sizeof(s) - 1 && prefix8(w, at, PK8(s, 0), sizeof(s) - 1, fold) &&                         \
	 (sizeof(s) - 1 <= 8 || prefix8(w, (at) + 8, PK8(s, 8), sizeof(s) - 1 - 8, fold)) &&                  \
	 (sizeof(s) - 1 <= 16 || prefix8(w, (at) + 16, PK8(s, 16), sizeof(s) - 1 - 16, fold)) &&               \
	 (sizeof(s) - 1 <= 24 || prefix8(w, (at) + 24, PK8(s, 24), sizeof(s) - 1 - 24, fold)) &&               \
	 (sizeof(s) - 1 <= 32 || prefix8(w, (at) + 32, PK8(s, 32), sizeof(s) - 1 - 32, fold)))

/* ftp_numbers parses "a,b,c,d,e,f" at pos (the engine's ftpNumbers) into
 * w->fc.nums; returns the position after it, or -1. */
GLOBAL int ftp_numbers(__u32 pos, __u32 end)
{
	struct work *w = get_work();

	if (!w)
		return -1;
	for (int i = 0; i < 6; i++) {
		__u32 v = 0, j;

		for (j = 0; j < 3; j++) {
			__u8 c;

			if (pos + j >= end)
				break;
			c = pay(w, pos + j);
			if (!is_digit(c))
				break;
			v = v * 10 + (c - '0');
		}
		if (j == 0 || v > 255)
			return -1;
		w->fc.nums[i] = v;
		pos += j;
		if (i < 5) {
			if (pos >= end || pay(w, pos) != ',')
				return -1;
			pos++;
		}
	}
	return pos;
}

/* line_end checks for "\r\n" at pos (after an optional ")"). */
static __always_inline int line_end(struct work *w, __u32 pos, __u32 end, int paren)
{
	if (paren && pos < end && pay(w, pos) == ')')
		pos++;
	return pos + 1 < end && pay(w, pos) == '\r' && pay(w, pos + 1) == '\n';
}

/* Building a replacement line in w->line, w->fc.ln bytes long so far.
 * The pieces with loops are global functions, checked once. */
static __always_inline void put_c(struct work *w, __u8 c)
{
	__u32 n = w->fc.ln;

	/* no branch: past the end it wraps, and replace_payload refuses a
	 * line longer than the buffer */
	w->line[BOUND(n, sizeof(w->line) - 1)] = c;
	w->fc.ln = n + 1;
}

static __always_inline void put8(struct work *w, __u64 k, __u32 len)
{
	for (__u32 i = 0; i < 8; i++) {
		if (i >= len)
			break;
		put_c(w, (__u8)(k >> (8 * i)));
	}
}

#define PUT_STR(w, s)                                                                                       \
	do {                                                                                                \
		put8(w, PK8(s, 0), sizeof(s) - 1);                                                              \
		if (sizeof(s) - 1 > 8)                                                                          \
			put8(w, PK8(s, 8), sizeof(s) - 1 - 8);                                                   \
		if (sizeof(s) - 1 > 16)                                                                         \
			put8(w, PK8(s, 16), sizeof(s) - 1 - 16);                                                 \
		if (sizeof(s) - 1 > 24)                                                                         \
			put8(w, PK8(s, 24), sizeof(s) - 1 - 24);                                                 \
	} while (0)

/* line_dec appends v (below 100000) in decimal. */
GLOBAL int line_dec(__u32 v)
{
	struct work *w = get_work();
	__u32 div = 10000;
	int started = 0;

	if (!w)
		return 0;
	for (int i = 0; i < 4; i++) {
		__u32 d = v / div % 10;

		if (d || started) {
			put_c(w, '0' + d);
			started = 1;
		}
		div /= 10;
	}
	put_c(w, '0' + v % 10);
	return 0;
}

/* line_quad appends the IPv4 address of the session's new source (which
 * 0) or original destination (which 1) with sep between the bytes. */
static __always_inline void line_quad(struct work *w, __u32 which, __u8 sep)
{
	const __u8 *a = (const __u8 *)(which ? w->fc.t.odst : w->fc.t.nsrc);
	__u8 b[4];

	__builtin_memcpy(b, a, 4);
	for (int i = 0; i < 4; i++) {
		if (i)
			put_c(w, sep);
		line_dec(b[i]);
	}
}

/* line_addr6 appends the session's new source, IPv6, as Go's
 * netip.Addr.String does: RFC 5952 (the longest run of two or more zero
 * groups compressed, the first one on a tie), IPv4-mapped as
 * ::ffff:a.b.c.d. The groups are written one per bpf_loop turn. */
static long group_step(__u32 i, void *unused)
{
	struct work *w = get_work();
	const __u8 *b;
	__u16 g;
	int started = 0;

	if (!w || i >= 8)
		return 1;
	if (w->fc.zs < 8 && i >= w->fc.zs && i < w->fc.zs + w->fc.zl) {
		if (i == w->fc.zs) {
			put_c(w, ':');
			put_c(w, ':');
		}
		return 0;
	}
	if (i > 0 && !(w->fc.zs < 8 && i == w->fc.zs + w->fc.zl))
		put_c(w, ':');
	b = (const __u8 *)w->fc.t.nsrc;
	g = (__u16)b[BOUND(2 * i, 15)] << 8 | b[BOUND(2 * i + 1, 15)];
	for (int s = 12; s >= 0; s -= 4) {
		__u8 d = (g >> s) & 15;

		if (d || started || s == 0) {
			put_c(w, d < 10 ? '0' + d : 'a' + d - 10);
			started = 1;
		}
	}
	return 0;
}

GLOBAL int line_addr6(void)
{
	struct work *w = get_work();
	const __u32 *a;
	const __u8 *b;
	__u32 zs = 8, zl = 0, cs = 8, cl = 0;

	if (!w)
		return 0;
	a = w->fc.t.nsrc;
	b = (const __u8 *)a;
	if (a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0xffff)) {
		PUT_STR(w, "::ffff:");
		/* the dotted quad of the last four bytes */
		w->fc.t.nsrc[0] = a[3];
		line_quad(w, 0, '.');
		w->fc.t.nsrc[0] = 0;
		return 0;
	}
	for (__u32 i = 0; i < 8; i++) {
		if (b[2 * i] == 0 && b[2 * i + 1] == 0) {
			if (cs == 8)
				cs = i;
			cl++;
			if (cl > zl) {
				zl = cl;
				zs = cs;
			}
		} else {
			cs = 8;
			cl = 0;
		}
	}
	if (zl < 2)
		zs = 8;
	w->fc.zs = zs;
	w->fc.zl = zl;
	bpf_loop(8, group_step, NULL, 0);
	return 0;
}

/* replace_payload replaces payload bytes [from, to) with the n bytes of
 * w->line (the engine's replacePayload). Returns the change in length, or
 * a value below -FTP_MAXPAY when the payload cannot take it. */
static __always_inline __s32 replace_payload(struct work *w, __u32 from, __u32 to, __u32 n)
{
	__u32 len = w->fc.len;
	__s32 inc = (__s32)n - (__s32)(to - from);

	if (to > len || from > to || n > sizeof(w->line) || len + inc > FTP_MAXPAY || len + inc < 1 ||
	    w->fc.iptot + inc > 65535)
		return -FTP_MAXPAY - 1;
	/* the tail goes aside, the new line in, the tail after it */
	mv(w, MV_TMP_PAY, 0, to, len - to);
	mv(w, MV_PAY_LINE, from, 0, n);
	mv(w, MV_PAY_TMP, from + n, 0, len - to);
	w->fc.len = len + inc;
	w->fc.iptot += inc;
	w->fc.changed = 1;
	return inc;
}

/* ftp_conn sets up the wildcard session for a data connection to port
 * (the engine's reverseConn when reverse, forwardConn otherwise). */
GLOBAL int ftp_conn(__u32 reverse, __u32 port)
{
	struct work *w = get_work();
	struct nat_sess *parent;
	struct nat_tuple *t;
	__u64 deadline;

	if (!w)
		return 0;
	parent = bpf_map_lookup_elem(&sessions, &w->fc.fk);
	t = &w->fc.t;
	if (!parent)
		return 0;
	deadline = sess_expiry(&w->fc.fk, parent);
	if (!reverse)
		return wild_add(w, parent, w->fc.sdir, IPPROTO_TCP, t->osrc, t->odst, t->nsrc, t->ndst, port, deadline);
	if (w->fc.sdir == DIR_OUT)
		/* the client is inside: the server connects to the mapped
		 * address, which goes back to the client */
		return wild_add(w, parent, DIR_IN, IPPROTO_TCP, t->odst, t->nsrc, t->odst, t->osrc, port, deadline);
	/* the client is outside: the server's connection leaves from the
	 * redirection target and gets the public address */
	return wild_add(w, parent, DIR_OUT, IPPROTO_TCP, t->ndst, t->osrc, t->odst, t->osrc, port, deadline);
}

/* ftp_port is ipf_p_ftp_port: "PORT a,b,c,d,p1,p2". */
GLOBAL int ftp_port(__u32 at, __u32 end)
{
	struct work *w = get_work();
	__s32 pos, inc = 0;
	__u32 port;

	if (!w || w->fc.family == 6)
		return 0;
	pos = ftp_numbers(at + 5, end);
	if (pos < 0 || !line_end(w, pos, end, 0))
		return 0;
	port = w->fc.nums[4] << 8 | w->fc.nums[5];
	if (port < 1024)
		return 0;
	if (w->fc.sdir == DIR_OUT) {
		w->fc.ln = 0;
		PUT_STR(w, "PORT ");
		line_quad(w, 0, ',');
		put_c(w, ',');
		line_dec(w->fc.nums[4]);
		put_c(w, ',');
		line_dec(w->fc.nums[5]);
		PUT_STR(w, "\r\n");
		inc = replace_payload(w, at, end, w->fc.ln);
		if (inc < -FTP_MAXPAY)
			return inc;
	}
	ftp_conn(1, port);
	return inc;
}

/* Address text, checked one character per bpf_loop turn the way
 * netip.ParseAddr reads it (w->ap). */
static long v4_step(__u32 k, void *unused)
{
	struct work *w = get_work();
	struct addrparse *a;
	__u8 c;

	if (!w)
		return 1;
	a = &w->ap;
	if (a->pos + k >= a->end)
		return 1;
	c = pay(w, a->pos + k);
	if (is_digit(c)) {
		if (a->digits == 0)
			a->first = c;
		else if (a->first == '0')
			goto bad; /* a leading zero */
		a->v = a->v * 10 + (c - '0');
		a->digits++;
		if (a->v > 255)
			goto bad;
		return 0;
	}
	if (c == '.') {
		if (a->digits == 0 || a->fields >= 3)
			goto bad;
		a->fields++;
		a->digits = 0;
		a->v = 0;
		return 0;
	}
bad:
	a->bad = 1;
	return 1;
}

/* parse_v4 checks a dotted quad over [pos, end). */
static __always_inline int parse_v4(struct work *w, __u32 pos, __u32 end)
{
	__builtin_memset(&w->ap, 0, sizeof(w->ap));
	if (end <= pos || end - pos > 15)
		return 0;
	w->ap.pos = pos;
	w->ap.end = end;
	bpf_loop(16, v4_step, NULL, 0);
	return !w->ap.bad && w->ap.fields == 3 && w->ap.digits > 0;
}

static long v6_step(__u32 k, void *unused)
{
	struct work *w = get_work();
	struct addrparse *a;
	__u32 at;
	__u8 c;

	if (!w)
		return 1;
	a = &w->ap;
	at = a->pos + k;
	if (at >= a->end)
		return 1;
	c = pay(w, at);
	if (is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')) {
		if (a->digits == 4)
			goto bad;
		a->digits++;
		a->colons = 0;
		return 0;
	}
	if (c == ':') {
		if (a->digits) {
			a->groups++;
			a->digits = 0;
		}
		a->colons++;
		if (a->colons == 2) {
			if (a->ellipsis)
				goto bad;
			a->ellipsis = 1;
		} else if (a->colons > 2) {
			goto bad;
		}
		return 0;
	}
	if (c == '.') {
		/* a dotted quad ends the address: it starts at the last
		 * group, and counts as two */
		a->quad = at - a->digits;
		return 1;
	}
bad:
	a->bad = 1;
	return 1;
}

/* parse_v6 checks IPv6 text the way netip.ParseAddr does: hex groups of
 * 1-4 digits, at most one "::", an optional trailing dotted quad, an
 * optional non-empty %zone. */
static __always_inline int parse_v6(struct work *w, __u32 pos, __u32 end)
{
	__u32 stop, quad;
	__u8 groups, ellipsis;

	stop = scan(w, SC_CHAR_PAY, pos, end, '%');
	if (stop < end && (stop == pos || stop + 1 >= end))
		return 0; /* an empty address or an empty zone */
	if (stop <= pos || stop - pos > 45)
		return 0;
	if (pay(w, pos) == ':' && (stop - pos < 2 || pay(w, pos + 1) != ':'))
		return 0;
	__builtin_memset(&w->ap, 0, sizeof(w->ap));
	w->ap.pos = pos;
	w->ap.end = stop;
	w->ap.quad = 0xffffffff;
	bpf_loop(64, v6_step, NULL, 0);
	if (w->ap.bad)
		return 0;
	groups = w->ap.groups;
	ellipsis = w->ap.ellipsis;
	quad = w->ap.quad;
	if (quad != 0xffffffff) {
		if (!parse_v4(w, quad, stop))
			return 0;
		groups += 2;
		if (groups > 8 || (!ellipsis && groups != 8))
			return 0;
		return 1;
	}
	if (w->ap.digits)
		groups++;
	else if (w->ap.colons == 1)
		return 0; /* a trailing single colon */
	if (ellipsis)
		return groups < 8;
	return groups == 8;
}

/* ftp_eprt is ipf_p_ftp_eprt: "EPRT |af|addr|port|". */
GLOBAL int ftp_eprt(__u32 at, __u32 end)
{
	struct work *w = get_work();
	__u32 b = at + 5, p1, p2, p3, port = 0, i, nd = 0;
	__u8 d;
	int af1, sign = 0;
	__s32 inc = 0;

	if (!w || b + 2 > end)
		return 0;
	d = pay(w, b);
	/* the fields: af [b+1, p1-1), addr [p1, p2-1), port [p2, p3-1) */
	p1 = scan(w, SC_CHAR_PAY, b + 1, end, d) + 1;
	if (p1 > end)
		return 0;
	p2 = scan(w, SC_CHAR_PAY, p1, end, d) + 1;
	if (p2 > end)
		return 0;
	p3 = scan(w, SC_CHAR_PAY, p2, end, d) + 1;
	if (p3 > end || !line_end(w, p3, end, 0))
		return 0;
	af1 = p1 - 1 - (b + 1) == 1 && pay(w, b + 1) == '1';
	if (af1) {
		if (!parse_v4(w, p1, p2 - 1))
			return 0;
	} else if (!parse_v6(w, p1, p2 - 1)) {
		return 0;
	}
	if (af1 == (w->fc.family == 6))
		return 0;
	/* strconv.Atoi: an optional sign, then digits */
	i = p2;
	if (i < p3 - 1 && (pay(w, i) == '+' || pay(w, i) == '-')) {
		sign = pay(w, i) == '-';
		i++;
	}
	for (__u32 j = 0; j < 20; j++) {
		__u8 c;

		if (i + j >= p3 - 1)
			break;
		c = pay(w, i + j);
		if (!is_digit(c))
			return 0;
		if (port < 1000000)
			port = port * 10 + (c - '0');
		nd++;
	}
	if (!nd || sign || port < 1024 || port > 65535)
		return 0;
	if (w->fc.sdir == DIR_OUT) {
		w->fc.ln = 0;
		PUT_STR(w, "EPRT ");
		put_c(w, d);
		for (__u32 j = 0; j < 8; j++) {
			if (b + 1 + j >= p1 - 1)
				break;
			put_c(w, pay(w, b + 1 + j));
		}
		put_c(w, d);
		if (w->fc.family == 6)
			line_addr6();
		else
			line_quad(w, 0, '.');
		put_c(w, d);
		line_dec(port);
		put_c(w, d);
		PUT_STR(w, "\r\n");
		inc = replace_payload(w, at, end, w->fc.ln);
		if (inc < -FTP_MAXPAY)
			return inc;
	}
	ftp_conn(1, port);
	return inc;
}

/* ftp_pasv is ipf_p_ftp_pasv: "227 Entering Passive Mode (a,b,c,d,p1,p2)". */
GLOBAL int ftp_pasv(__u32 at, __u32 end)
{
	struct work *w = get_work();
	const __u32 *server;
	__u32 pos, got, port;
	__s32 q;
	int paren;

	if (!w || w->fc.family == 6)
		return 0;
	pos = scan(w, SC_DIGIT_PAY, at + 4, end, 0);
	paren = pos > at + 4 && pay(w, pos - 1) == '(';
	q = ftp_numbers(pos, end);
	if (q < 0 || !line_end(w, q, end, paren))
		return 0;
	got = bpf_htonl(w->fc.nums[0] << 24 | w->fc.nums[1] << 16 | w->fc.nums[2] << 8 | w->fc.nums[3]);
	server = w->fc.sdir == DIR_IN ? w->fc.t.ndst : w->fc.t.odst;
	if (got != server[0])
		return 0;
	port = w->fc.nums[4] << 8 | w->fc.nums[5];
	w->fc.ln = 0;
	PUT_STR(w, "227 Entering Passive Mode ");
	if (paren)
		put_c(w, '(');
	line_quad(w, 1, ',');
	put_c(w, ',');
	line_dec(w->fc.nums[4]);
	put_c(w, ',');
	line_dec(w->fc.nums[5]);
	if (paren)
		put_c(w, ')');
	PUT_STR(w, "\r\n");
	q = replace_payload(w, at, end, w->fc.ln);
	if (q < -FTP_MAXPAY)
		return q;
	ftp_conn(0, port);
	return q;
}

/* ftp_epsv is ipf_p_ftp_epsv: "229 ... (|||port|)", only a port. */
GLOBAL int ftp_epsv(__u32 at, __u32 end)
{
	struct work *w = get_work();
	__u32 b, port = 0, nd = 0, e;
	__u8 d;

	if (!w)
		return 0;
	b = scan(w, SC_CHAR_PAY, at + 4, end, '(');
	if (b + 5 > end)
		return 0;
	d = pay(w, b + 1);
	if (pay(w, b + 2) != d || pay(w, b + 3) != d)
		return 0;
	b += 4;
	e = scan(w, SC_NDIGIT_PAY, b, end, 0);
	for (__u32 i = 0; i < 8; i++) {
		if (b + i >= e)
			break;
		port = port * 10 + (pay(w, b + i) - '0');
		nd++;
	}
	if (nd == 0 || e != b + nd || e >= end || pay(w, e) != d || port < 1024 || port > 65535)
		return 0;
	ftp_conn(0, port);
	return 0;
}

/* ftp_line acts on the valid line at payload offset sat of side (the
 * engine's ftpLine with ftpClient/ftpServer); returns the length change. */
GLOBAL int ftp_line(__u32 side, __s32 sat)
{
	struct work *w = get_work();
	struct ftpctx *c;
	__u32 end, llen, at;
	__s32 inc = 0;
	int go1;
	__u8 c0;

	if (!w || sat < 0)
		return 0;
	c = &w->fc;
	at = BOUND(sat, 0xffff);
	if (at >= c->len || at >= FTP_MAXPAY)
		return 0;
	end = scan(w, SC_NL_PAY, at, c->len, 0);
	if (end < c->len)
		end++;
	if (end > c->len || end <= at)
		return 0;
	llen = end - at;
	if (side == 0) {
		int ok = c->passok == FTP_GO || c->insecure;

		if (PREFIX(w, at, llen, "USER ", 1) && (c->passok == FTP_INIT || c->passok == FTP_USOK1)) {
			c->passok = FTP_USER1;
			c->incok = 1;
		} else if (PREFIX(w, at, llen, "PASS ", 1) && c->passok == FTP_USOK1) {
			c->passok = FTP_PASS1;
			c->incok = 1;
		} else if (PREFIX(w, at, llen, "ACCT ", 1) && c->passok == FTP_PAOK1) {
			c->passok = FTP_ACCT1;
			c->incok = 1;
		} else if (PREFIX(w, at, llen, "PORT ", 1) && ok && !c->pasvonly) {
			return ftp_port(at, end);
		} else if (PREFIX(w, at, llen, "EPRT ", 1) && ok && !c->pasvonly) {
			return ftp_eprt(at, end);
		}
		return 0;
	}
	go1 = c->passok == FTP_GO || c->insecure;
	c0 = pay(w, at);
	if (go1 && PREFIX(w, at, llen, "227 ", 1)) {
		if (!(c->forcepasv && c->cmd0 != FTP_C_PASV) && PREFIX(w, at, llen, "227 Entering Passive Mod", 0))
			inc = ftp_pasv(at, end);
	} else if (go1 && PREFIX(w, at, llen, "229 ", 1)) {
		if (!(c->forcepasv && c->cmd0 != FTP_C_EPSV) && PREFIX(w, at, llen, "229 Entering Extended Passive Mod", 0))
			ftp_epsv(at, end);
	} else if (c->passok == FTP_GO) {
	} else if (c0 == '4' || c0 == '5') {
		c->passok = FTP_INIT;
	} else if (c->incok && c0 == '3') {
		if (c->passok == FTP_ACCT1)
			c->passok = FTP_GO;
		else
			c->passok++;
	} else if (c->incok && c0 == '2') {
		switch (c->passok) {
		case FTP_USER1:
		case FTP_PASS1:
		case FTP_ACCT1:
			c->passok = FTP_GO;
			break;
		default:
			c->passok += 3;
		}
	}
	c->incok = 0;
	return inc;
}

/* The phases of the engine's ftpProcess loop over w->side (the
 * engine's sd) and the payload. Each returns 1 to stop the loop. */
static __always_inline int ftp_phase(struct work *w)
{
	struct ftp_side *sd;
	struct ftpctx *c;

	if (!w)
		return 1;
	c = &w->fc;
	sd = &w->side;
	if (sd->r < 0 || sd->r > FTP_BUFSZ || sd->w < 0 || sd->w > FTP_BUFSZ || sd->r > sd->w) {
		sd->r = sd->w = 0;
	}
	switch (c->phase) {
	case PH_COPY: {
		__s32 l;

		if (c->off >= (__s32)c->len)
			return 1;
		l = (__s32)c->len - c->off;
		if (l > FTP_BUFSZ - sd->w)
			l = FTP_BUFSZ - sd->w;
		if (l <= 0) {
			sd->r = sd->w = 0;
			return 0;
		}
		c->base = sd->w - c->off;
		mv(w, MV_BUF_PAY, sd->w, c->off, l);
		c->off += l;
		sd->w += l;
		c->phase = PH_AGAIN;
		return 0;
	}
	case PH_AGAIN:
		if (sd->junk != JUNK_OK) {
			sd->junk = ftp_valid(w, c->side, sd->r, sd->w);
			if (sd->junk == JUNK_BAD && sd->w - sd->r == FTP_BUFSZ) {
				sd->r = sd->w = 0;
				c->phase = PH_COPY;
				return 0;
			}
		}
		c->phase = PH_LINES;
		return 0;
	case PH_LINES:
		if (!(sd->junk == JUNK_OK && sd->w > sd->r)) {
			c->phase = PH_TAIL;
			return 0;
		}
		sd->junk = ftp_valid(w, c->side, sd->r, sd->w);
		if (sd->junk != JUNK_OK) {
			c->phase = PH_TAIL;
			return 0;
		}
		sd->lines++;
		/* the line is acted upon between two loops */
		c->need = 1;
		c->at = sd->r - c->base;
		c->phase = PH_AFTER;
		return 1;
	case PH_AFTER: {
		__u32 nl;

		if (c->d) {
			c->inc += c->d;
			c->base -= c->d;
			c->off += c->d;
		}
		/* skip the line: rptr after its newline */
		nl = scan(w, SC_NL_BUF, sd->r, sd->w, 0);
		sd->r = nl < (__u32)sd->w ? nl + 1 : sd->w;
		c->phase = PH_LINES;
		return 0;
	}
	case PH_TAIL: {
		int retry = 0;

		if (sd->lines == 0 && sd->junk == JUNK_BAD) {
			c->gaveup = 1;
			return 1;
		}
		if (sd->junk != JUNK_OK && sd->r < sd->w) {
			__u32 at = scan(w, SC_CRLF_BUF, sd->r + 1, sd->w, 0);

			if (at < (__u32)sd->w) {
				sd->r = at + 1;
				retry = 1;
				if (sd->junk != JUNK_CONT)
					sd->junk = JUNK_OK;
			}
		}
		if (sd->r > 0) {
			__s32 r = sd->r;

			mv(w, MV_BUF_BUF, 0, r, sd->w - r);
			sd->w -= r;
			c->base -= r;
			sd->r = 0;
		}
		c->phase = retry ? PH_AGAIN : PH_COPY;
		return 0;
	}
	}
	return 1;
}

static long ftp_step(__u32 n, void *unused)
{
	struct work *w = get_work();

	return ftp_phase(w) ? 1 : 0;
}

/* ftp_round runs the ftpProcess loop up to the next whole line and acts
 * on it. Returns 1 when there may be more, 0 when the payload is done,
 * -1 on failure. */
GLOBAL int ftp_round(void)
{
	struct work *w = get_work();
	__s32 d;

	if (!w)
		return -1;
	w->fc.need = 0;
	bpf_loop(8192, ftp_step, NULL, 0);
	if (!w->fc.need)
		return 0;
	d = ftp_line(w->fc.side, w->fc.at);
	if (d < -FTP_MAXPAY) {
		w->fc.fail = 1;
		return -1;
	}
	w->fc.d = d;
	return 1;
}

/* seq_adj helpers (the engine's seqAdj). */
static __always_inline __s32 adj_off(struct seq_adj *a, __u32 seq)
{
	if (!a->set || (__s32)(seq - a->min) >= 0)
		return a->off;
	return a->prev;
}

static __always_inline __s32 adj_ackoff(struct seq_adj *a, __u32 ack)
{
	if (!a->set || (__s32)(ack - a->ackmin) >= 0)
		return a->off;
	return a->prev;
}

/* Sums of the payload as raw 16-bit words (its start is even), of
 * w->orig (which 0) or w->pay, into w->fc.sum. */
static long sum_step(__u32 i, void *unused)
{
	struct work *w = get_work();
	struct ftpctx *c;
	__u32 at = i * 2;
	__u8 *b;
	__u16 v;

	if (!w)
		return 1;
	c = &w->fc;
	if (at >= c->sumlen)
		return 1;
	b = c->which ? w->pay : w->orig;
	if (at + 1 < c->sumlen)
		v = (__u16)b[BOUND(at, PAYMASK)] | (__u16)b[BOUND(at + 1, PAYMASK)] << 8;
	else
		v = b[BOUND(at, PAYMASK)];
	c->sum = csum_add32(c->sum, v);
	return 0;
}

static __always_inline __u32 payload_sum(struct work *w, int which, __u32 len)
{
	w->fc.which = which;
	w->fc.sumlen = len;
	w->fc.sum = 0;
	bpf_loop(FTP_MAXPAY / 2 + 1, sum_step, NULL, 0);
	return w->fc.sum;
}

/* ftp_process runs the proxy over the payload in w->pay (the engine's
 * ftpProcess): the side's buffer and the login state are taken from
 * their map entries and put back. */
static __always_inline int ftp_process(struct work *w)
{
	struct nat_ftp *f, *f0;
	struct ftpctx *c;

	if (!w)
		return -1;
	c = &w->fc;
	f = ftp_part(w, c->side);
	f0 = ftp_part(w, 0);
	if (!f || !f0)
		return -1;
	w->side = f->s;
	c->passok = f0->passok;
	c->incok = f0->incok;
	c->gaveup = f0->gaveup;
	c->cmd0 = f0->s.cmd;
	c->phase = PH_COPY;
	for (int k = 0; k < FTP_MAXLINES; k++) {
		if (ftp_round() <= 0)
			break;
		if (k == FTP_MAXLINES - 1)
			/* more lines than one segment is followed for */
			c->fail = 1;
	}
	f = ftp_part(w, c->side);
	f0 = ftp_part(w, 0);
	if (!f || !f0)
		return -1;
	f->s = w->side;
	f0->passok = c->passok;
	f0->incok = c->incok;
	f0->gaveup = c->gaveup;
	return c->fail ? -1 : 0;
}

/* nat_proxy runs the ftp proxy over a packet of a control session that has
 * just been translated (w->p; the session's forward key in w->k). fwd is
 * set for packets from the client that opened the connection. */
GLOBAL int nat_proxy(struct __sk_buff *skb, __u32 fwd)
{
	struct work *w = get_work();
	struct nat_sess *v;
	struct nat_ftp *f;
	struct ftpctx *c;
	struct pkt *p;
	__u8 *th;
	__u32 seq, ack, nseq, nack, hl, payoff, plen, side, l4len;
	int grown = 0, gaveup;

	if (!w || !skb)
		return 0;
	p = &w->p;
	c = &w->fc;
	if (p->proto != IPPROTO_TCP || !p->l4off || p->l4len < 20)
		return 0;
	v = bpf_map_lookup_elem(&sessions, &w->k);
	if (!v)
		return 0;
	__builtin_memset(c, 0, sizeof(*c));
	c->seq = v->seq;
	c->fk = w->k;
	c->t = v->t;
	c->sdir = v->sdir;
	c->family = v->family;
	c->insecure = cfg(NCFG_FTP_INSECURE) != 0;
	c->pasvonly = cfg(NCFG_FTP_PASVONLY) != 0;
	c->forcepasv = cfg(NCFG_FTP_FORCEPASV) != 0;
	f = ftp_part(w, 0);
	if (!f)
		return 0;
	gaveup = f->gaveup;
	th = c->th;
	if (bpf_skb_load_bytes(skb, p->l4off, th, 20) < 0)
		return 0;
	seq = bpf_ntohl(*(__u32 *)(th + 4));
	ack = bpf_ntohl(*(__u32 *)(th + 8));
	hl = (th[12] >> 4) * 4;
	if (hl < 20 || hl > p->l4len)
		return 0;
	side = fwd ? 0 : 1;
	c->side = side;
	plen = p->l4len - hl;
	payoff = (__u32)p->l4off + hl;
	l4len = p->l4len;
	/* IPv4 total length, IPv6 payload length (extension headers too) */
	c->iptot = p->family == 4 ? (p->l4off - p->l3off) + p->l4len : (p->l4off - p->l3off - 40) + p->l4len;
	if (!gaveup && plen > 0) {
		if (plen > FTP_MAXPAY) {
			stat_inc(p->dir * NS_SIDE + NS_PROXYFAIL);
			goto shift;
		}
		if (bpf_skb_load_bytes(skb, payoff, w->orig, plen & PAYMASK ? plen & PAYMASK : FTP_MAXPAY) < 0 ||
		    bpf_skb_load_bytes(skb, payoff, w->pay, plen & PAYMASK ? plen & PAYMASK : FTP_MAXPAY) < 0)
			goto shift;
		c->len = plen;
		if (ftp_process(w) < 0) {
			stat_inc(p->dir * NS_SIDE + NS_PROXYFAIL);
			goto shift;
		}
		/* a rewrite that kept the length changed bytes all the same */
		if (c->changed) {
			__u32 nlen = c->len, ol4 = l4len, nl4 = l4len + c->inc, diff;

			/* the segment must end the buffer to be resized */
			if (c->inc && (__u32)p->l4off + l4len != skb->len) {
				stat_inc(p->dir * NS_SIDE + NS_PROXYFAIL);
				goto shift;
			}
			if (c->inc && bpf_skb_change_tail(skb, skb->len + c->inc, 0) < 0) {
				stat_inc(p->dir * NS_SIDE + NS_PROXYFAIL);
				goto shift;
			}
			if (bpf_skb_store_bytes(skb, payoff, w->pay, nlen & PAYMASK ? nlen & PAYMASK : FTP_MAXPAY, 0) < 0)
				return 0;
			diff = csum_fold32(payload_sum(w, 0, plen));
			diff = csum_add32((__u16)~diff, csum_fold32(payload_sum(w, 1, nlen)));
			if (c->inc && p->family == 4) {
				__u16 ot = bpf_htons(c->iptot - c->inc), nt = bpf_htons(c->iptot), ck;

				if (bpf_skb_load_bytes(skb, p->l3off + 10, &ck, 2) < 0)
					return 0;
				ck = ~csum_fold32(csum_word((__u16)~ck, ot, nt));
				bpf_skb_store_bytes(skb, p->l3off + 2, &nt, 2, 0);
				bpf_skb_store_bytes(skb, p->l3off + 10, &ck, 2, 0);
			} else if (c->inc) {
				__u16 pl = bpf_htons(c->iptot);

				bpf_skb_store_bytes(skb, p->l3off + 4, &pl, 2, 0);
			}
			bpf_l4_csum_replace(skb, p->l4off + 16, 0, diff, 0);
			if (c->inc)
				bpf_l4_csum_replace(skb, p->l4off + 16, bpf_htons(ol4), bpf_htons(nl4), BPF_F_PSEUDO_HDR | 2);
			if (c->inc) {
				/* the segment grew by inc (seqAdj.record) */
				struct seq_adj *a;
				__s32 cur;

				f = ftp_part(w, side);
				if (!f)
					return 0;
				a = &f->adj;
				cur = adj_off(a, seq);
				a->ackmin = seq + (__u32)cur + (__u32)(plen + c->inc);
				a->prev = cur;
				a->off = cur + c->inc;
				a->min = seq + plen;
				a->set = 1;
				grown = 1;
			}
		}
	}
shift:
	f = ftp_part(w, side);
	if (!f)
		return 0;
	{
		struct nat_ftp *fo = ftp_part(w, side ^ 1);
		struct seq_adj *mine = &f->adj, *other;

		if (!fo)
			return 0;
		other = &fo->adj;
		nseq = seq + (__u32)(grown ? mine->prev : adj_off(mine, seq));
		nack = ack;
		if (th[13] & 0x10)
			nack = ack - (__u32)adj_ackoff(other, ack);
	}
	if (nseq != seq || nack != ack) {
		__u32 ns = bpf_htonl(nseq), na = bpf_htonl(nack);

		bpf_skb_store_bytes(skb, p->l4off + 4, &ns, 4, 0);
		bpf_skb_store_bytes(skb, p->l4off + 8, &na, 4, 0);
		bpf_l4_csum_replace(skb, p->l4off + 16, bpf_htonl(seq), ns, 4);
		bpf_l4_csum_replace(skb, p->l4off + 16, bpf_htonl(ack), na, 4);
	}
	return 0;
}
