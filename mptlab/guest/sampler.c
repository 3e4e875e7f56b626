// SPDX-License-Identifier: GPL-2.0-only
/*
 * sampler: mptlab's sock_diag sampler as a program (mptlab/guest/sampler.py
 * is the reference, the plan's author and the fallback).  Every interval it
 * dumps, in each network namespace given, the TCP sockets (subflows) and the
 * MPTCP connections through inet_diag and writes one CSV row per socket, the
 * columns sampler.py names.
 *
 *   sampler PLAN [uring|sync]
 *
 * Why a program: in a headline run (blest-3g-wlan, ~1300 ticks of two
 * namespaces and two kinds) the Python sampler cost the guest's agent
 * ~0.6 s of host CPU parsing netlink replies in Python (a TSC-timed
 * profile of the agent: attribute parsing alone 35,000 calls) beside its
 * ~10,000 system calls, each a ptrace round trip on the host
 * (docs/benchmarks.md).  Here a tick's parsing is a few microseconds, and
 * on the io_uring path (the default; "sync" asks for the other, which is
 * also taken where io_uring_setup() fails) a tick is one system call and
 * a clock read instead of ten.  It prints "path uring" or "path sync" first.
 *
 * PLAN (text, written by sampler.py; one directive per line):
 *
 *   interval subflows|mptcp US      0: that kind is off
 *   target NETNS_PATH SUBFLOWS_CSV MPTCP_CSV   sampled in this order
 *   lateness PATH                   one line per tick: how late it woke (s)
 *   tcp OFFSET SIZE                 struct tcp_info fields, column order
 *   mptcp OFFSET SIZE               struct mptcp_info fields, column order
 *   sched OFFSET SIZE               mptcp_info's scheduler name
 *   attr KIND SIZE WHERE            an MPTCP subflow attribute; WHERE: pre
 *                                   (before the tcp_info columns) | post
 *   header subflows|mptcp LINE      the CSV header, as it is
 *
 * Rows: subflows "t,saddr,sport,daddr,dport,state,<pre attrs>,<tcp>,<post
 * attrs>,rmem_alloc,rcvbuf"; mptcp "t,saddr,sport,daddr,dport,<mptcp>,
 * scheduler,rmem_alloc,rcvbuf".  A field the kernel's payload is too short
 * for, or an attribute it did not send, is an empty cell (unknown, not 0).
 * IPv4 sockets first, then IPv6 (v4-mapped addresses shown as IPv4), each
 * in the kernel's order.  t: CLOCK_MONOTONIC plus the offset to
 * CLOCK_REALTIME taken at the start, as the kernel trace's times.
 *
 * Ticks are absolute (an io_uring timeout or clock_nanosleep, both
 * TIMER_ABSTIME); a kind that fell behind skips rather than bursts.  The
 * time of a tick's rows and its lateness are read when its dumps are back.  SIGTERM or SIGINT: ends after the
 * current tick, files flushed, exit 0.  A netlink error: exit 1, saying so.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/io_uring.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#define TCPDIAG_GETSOCK 18
#define INET_DIAG_ULP_INFO_ 19
#define INET_ULP_INFO_MPTCP_ 3
#define TCP_LISTEN_ 10
#define TCP_TIME_WAIT_ 6
#define TCP_NEW_SYN_RECV_ 12

#define MAX_TARGETS 8
#define MAX_FIELDS 64
#define MAX_ATTRS 16
#define MAX_ATTR_KIND 64
#define SLOTS 4
#define BUFSZ (64 * 1024)	/* netlink_dump() sends at most 32 KiB a message */

enum { SUBFLOWS, MPTCP, KINDS };

struct field { unsigned int off, size; };
struct attr { unsigned int kind, size; int post; };

struct target {
	int sock;
	FILE *out[KINDS];
};

struct buf { char *p; size_t len, cap; };

static struct target targets[MAX_TARGETS];
static int n_targets;
static long interval_us[KINDS];
static struct field tcp_fields[MAX_FIELDS], mptcp_fields[MAX_FIELDS];
static int n_tcp, n_mptcp;
static struct field sched_field;
static struct attr attrs[MAX_ATTRS];
static int n_attrs;
static char *header[KINDS];
static FILE *lateness_out;
static volatile sig_atomic_t stopping;
static uint32_t seq;
static char bufs[SLOTS][BUFSZ];

static void die(const char *what)
{
	fprintf(stderr, "sampler: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void bad(const char *what, const char *line)
{
	fprintf(stderr, "sampler: plan: %s: %s\n", what, line);
	exit(2);
}

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			die("realloc");
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static void putu(struct buf *b, unsigned long long v)
{
	char s[24];

	put(b, s, snprintf(s, sizeof(s), "%llu", v));
}

/* a little-endian unsigned field of 1, 2, 4 or 8 bytes, or an empty cell */
static void putfield(struct buf *b, const unsigned char *p, size_t len, struct field f)
{
	unsigned long long v = 0;

	put(b, ",", 1);
	if (!p || f.off + f.size > len)
		return;
	memcpy(&v, p + f.off, f.size);	/* x86-64 and the guest: little-endian */
	putu(b, v);
}

static void putaddr(struct buf *b, int family, const unsigned char *raw)
{
	static const unsigned char mapped[12] = { [10] = 0xff, [11] = 0xff };
	char s[INET6_ADDRSTRLEN];

	if (family == AF_INET)
		inet_ntop(AF_INET, raw, s, sizeof(s));
	else if (!memcmp(raw, mapped, sizeof(mapped)))
		inet_ntop(AF_INET, raw + 12, s, sizeof(s));
	else
		inet_ntop(AF_INET6, raw, s, sizeof(s));
	puts_(b, s);
}

/* attributes of a block: the last of each kind wins, as in sampler.py */
static void attrs_of(const unsigned char *p, size_t len,
		     const unsigned char **at, size_t *at_len)
{
	size_t off = 0;

	memset(at, 0, sizeof(*at) * MAX_ATTR_KIND);
	while (off + 4 <= len) {
		uint16_t alen, kind;

		memcpy(&alen, p + off, 2);
		memcpy(&kind, p + off + 2, 2);
		if (alen < 4 || off + alen > len)
			break;
		kind &= 0x3fff;
		if (kind < MAX_ATTR_KIND) {
			at[kind] = p + off + 4;
			at_len[kind] = alen - 4;
		}
		off += (alen + 3u) & ~3u;
	}
}

static void row(struct buf *b, int kind, const char *t, const struct inet_diag_msg *m,
		const unsigned char *rest, size_t rest_len)
{
	const unsigned char *at[MAX_ATTR_KIND], *sub[MAX_ATTR_KIND];
	size_t at_len[MAX_ATTR_KIND], sub_len[MAX_ATTR_KIND];
	const unsigned char *info, *mem;
	int i, where;

	attrs_of(rest, rest_len, at, at_len);
	info = at[INET_DIAG_INFO];
	if (!info)
		return;
	if (kind == SUBFLOWS ? (m->idiag_state == TCP_LISTEN_ || m->idiag_state == TCP_TIME_WAIT_)
			     : m->idiag_state == TCP_LISTEN_)
		return;
	puts_(b, t);
	put(b, ",", 1);
	putaddr(b, m->idiag_family, (const unsigned char *)m->id.idiag_src);
	put(b, ",", 1);
	putu(b, ntohs(m->id.idiag_sport));
	put(b, ",", 1);
	putaddr(b, m->idiag_family, (const unsigned char *)m->id.idiag_dst);
	put(b, ",", 1);
	putu(b, ntohs(m->id.idiag_dport));
	if (kind == SUBFLOWS) {
		put(b, ",", 1);
		putu(b, m->idiag_state);
		memset(sub, 0, sizeof(sub));
		if (at[INET_DIAG_ULP_INFO_]) {
			attrs_of(at[INET_DIAG_ULP_INFO_], at_len[INET_DIAG_ULP_INFO_], sub, sub_len);
			if (sub[INET_ULP_INFO_MPTCP_])
				attrs_of(sub[INET_ULP_INFO_MPTCP_], sub_len[INET_ULP_INFO_MPTCP_],
					 sub, sub_len);
			else
				memset(sub, 0, sizeof(sub));
		}
		for (where = 0; where < 2; where++) {
			if (where == 1)
				for (i = 0; i < n_tcp; i++)
					putfield(b, info, at_len[INET_DIAG_INFO], tcp_fields[i]);
			for (i = 0; i < n_attrs; i++) {
				struct field f = { 0, attrs[i].size };

				if (attrs[i].post != where)
					continue;
				putfield(b, sub[attrs[i].kind], sub_len[attrs[i].kind], f);
			}
		}
	} else {
		size_t len = at_len[INET_DIAG_INFO];

		for (i = 0; i < n_mptcp; i++)
			putfield(b, info, len, mptcp_fields[i]);
		put(b, ",", 1);
		if (sched_field.off + sched_field.size <= len)
			put(b, (const char *)info + sched_field.off,
			    strnlen((const char *)info + sched_field.off, sched_field.size));
	}
	mem = at[INET_DIAG_SKMEMINFO];
	for (i = 0; i < 2; i++) {	/* SK_MEMINFO_RMEM_ALLOC, SK_MEMINFO_RCVBUF */
		struct field f = { 4 * i, 4 };

		putfield(b, mem, mem ? at_len[INET_DIAG_SKMEMINFO] : 0, f);
	}
	put(b, "\r\n", 2);	/* Python's csv module ends rows so */
}

struct request {
	struct nlmsghdr nh;
	struct inet_diag_req r;
	struct nlattr proto_attr;
	uint32_t proto;
};

/* the dump request of one kind: both families at once (sampler.py says why) */
static size_t request(struct request *req, int kind)
{
	size_t len = sizeof(req->nh) + sizeof(req->r);

	memset(req, 0, sizeof(*req));
	req->r.idiag_family = AF_UNSPEC;
	req->r.idiag_ext = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_SKMEMINFO - 1));
	memset(&req->r.id.idiag_cookie, 0xff, sizeof(req->r.id.idiag_cookie));
	req->r.idiag_states = kind == SUBFLOWS
		? ~(1u << TCP_LISTEN_ | 1u << TCP_TIME_WAIT_ | 1u << TCP_NEW_SYN_RECV_)
		: ~(1u << TCP_LISTEN_);
	if (kind == MPTCP) {
		req->proto_attr.nla_len = 8;
		req->proto_attr.nla_type = INET_DIAG_REQ_PROTOCOL;
		req->proto = IPPROTO_MPTCP;
		len += 8;
	}
	req->nh.nlmsg_len = len;
	req->nh.nlmsg_type = TCPDIAG_GETSOCK;
	req->nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req->nh.nlmsg_seq = ++seq;
	return len;
}

/* one datagram of a dump: its rows appended to v4, v6; 1 at the dump's end */
static int parse(const char *data, size_t dlen, int kind, const char *t,
		 struct buf *v4, struct buf *v6)
{
	size_t off = 0;

	if (dlen > BUFSZ) {
		fprintf(stderr, "sampler: sock_diag reply longer than %d bytes\n", BUFSZ);
		exit(1);
	}
	while (off + sizeof(struct nlmsghdr) <= dlen) {
		const struct nlmsghdr *nh = (const void *)(data + off);
		const struct inet_diag_msg *m;
		size_t body = NLMSG_LENGTH(sizeof(*m));

		if (nh->nlmsg_type == NLMSG_DONE)
			return 1;
		if (nh->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(nh);

			errno = -e->error;
			die("sock_diag dump");
		}
		if (nh->nlmsg_len < body || off + nh->nlmsg_len > dlen)
			break;
		m = NLMSG_DATA(nh);
		row(m->idiag_family == AF_INET ? v4 : v6, kind, t, m,
		    (const unsigned char *)nh + NLMSG_ALIGN(body),
		    nh->nlmsg_len - NLMSG_ALIGN(body));
		off += NLMSG_ALIGN(nh->nlmsg_len);
	}
	return 0;
}

/*
 * The rest of a dump, by recvmmsg() waiting for the first datagram only:
 * a dump that found sockets ends in a second datagram, the NLMSG_DONE
 * alone, which the kernel queues while it hands over the first, so one
 * system call takes both (sampler.py, Receiver).
 */
static void rest(int sock, int kind, const char *t, struct buf *v4, struct buf *v6)
{
	struct mmsghdr msgs[SLOTS];
	struct iovec iov[SLOTS];
	int i;

	for (i = 0; i < SLOTS; i++) {
		iov[i].iov_base = bufs[i];
		iov[i].iov_len = BUFSZ;
		memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	for (;;) {
		int n = recvmmsg(sock, msgs, SLOTS, MSG_WAITFORONE, NULL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("recvmmsg from sock_diag");
		}
		for (i = 0; i < n; i++) {
			size_t len = msgs[i].msg_len;

			if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
				len = BUFSZ + 1;
			if (parse(bufs[i], len, kind, t, v4, v6))
				return;
		}
	}
}

/* one dump of one kind in one namespace by plain system calls */
static void dump(int sock, int kind, const char *t, struct buf *v4, struct buf *v6)
{
	struct request req;
	size_t len = request(&req, kind);

	if (send(sock, &req, len, 0) < 0)
		die("send to sock_diag");
	rest(sock, kind, t, v4, v6);
}

/*
 * io_uring: a tick as one chain in the guest kernel's ring, one
 * io_uring_enter() per tick instead of ~10 system calls: a timeout at the
 * tick's due time (absolute, CLOCK_MONOTONIC), then for each namespace and
 * kind due the request (send) and two receives, the second not waiting
 * (MSG_DONTWAIT: the NLMSG_DONE the first one's read queued, or nothing
 * when the dump was empty and ended in the first).  Hard links: a failed
 * step (the empty second receive) does not cancel the rest.  A dump longer
 * than two datagrams is finished by rest().  Needs Linux >= 5.6 (send and
 * recv ops); where io_uring_setup() fails, the plain path.
 */
#define RING 64
#define STEPS 3	/* send, receive, receive-if-there */

static struct {
	int fd;
	unsigned *sq_head, *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
	unsigned tail;
} ring = { .fd = -1 };
static struct request reqs[MAX_TARGETS][KINDS];
static char ubufs[MAX_TARGETS][KINDS][2][BUFSZ];
static int32_t results[1 + MAX_TARGETS * KINDS * STEPS];

static int uring_setup(void)
{
	struct io_uring_params p;
	size_t sq_len, cq_len;
	char *sq, *cq;
	unsigned i;

	memset(&p, 0, sizeof(p));
	ring.fd = syscall(__NR_io_uring_setup, RING, &p);
	if (ring.fd < 0)
		return -1;
	sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP)
		sq_len = cq_len = sq_len > cq_len ? sq_len : cq_len;
	sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		  ring.fd, IORING_OFF_SQ_RING);
	cq = p.features & IORING_FEAT_SINGLE_MMAP ? sq :
		mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		     ring.fd, IORING_OFF_CQ_RING);
	ring.sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe),
			 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring.fd,
			 IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || ring.sqes == MAP_FAILED) {
		close(ring.fd);
		ring.fd = -1;
		return -1;
	}
	ring.sq_head = (unsigned *)(sq + p.sq_off.head);
	ring.sq_tail = (unsigned *)(sq + p.sq_off.tail);
	ring.sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	ring.sq_array = (unsigned *)(sq + p.sq_off.array);
	ring.cq_head = (unsigned *)(cq + p.cq_off.head);
	ring.cq_tail = (unsigned *)(cq + p.cq_off.tail);
	ring.cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	ring.cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	for (i = 0; i < p.sq_entries; i++)
		ring.sq_array[i] = i;
	ring.tail = *ring.sq_tail;
	return 0;
}

static struct io_uring_sqe *step(int op, int fd, void *addr, unsigned len, int slot)
{
	struct io_uring_sqe *sqe = &ring.sqes[ring.tail++ & *ring.sq_mask];

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = op;
	sqe->fd = fd;
	sqe->addr = (unsigned long)addr;
	sqe->len = len;
	sqe->flags = IOSQE_IO_HARDLINK;
	sqe->user_data = slot;
	return sqe;
}

/*
 * One tick through the ring: wait until `due`, dump every kind `ready` in
 * every namespace; each step's result in results[] (slot: 1 + (target x
 * kinds + kind) x STEPS + step).  0 if a stop signal came first.
 * io_uring_enter() returns once it has submitted even when a signal cut
 * its wait short, so completions are counted, not assumed.
 */
static int uring_tick(double due, const int *ready)
{
	struct __kernel_timespec ts = { (long long)due, (long long)((due - (long long)due) * 1e9) };
	struct io_uring_sqe *last;
	unsigned head, n = 1;
	int i, k, slot;

	last = step(IORING_OP_TIMEOUT, -1, &ts, 1, 0);
	last->timeout_flags = IORING_TIMEOUT_ABS;
	for (i = 0; i < n_targets; i++)
		for (k = 0; k < KINDS; k++) {
			if (!ready[k])
				continue;
			slot = 1 + (i * KINDS + k) * STEPS;
			step(IORING_OP_SEND, targets[i].sock, &reqs[i][k],
			     request(&reqs[i][k], k), slot);
			step(IORING_OP_RECV, targets[i].sock, ubufs[i][k][0], BUFSZ, slot + 1)
				->msg_flags = MSG_TRUNC;	/* the datagram's length, to see it was cut */
			last = step(IORING_OP_RECV, targets[i].sock, ubufs[i][k][1], BUFSZ, slot + 2);
			last->msg_flags = MSG_TRUNC | MSG_DONTWAIT;
			n += STEPS;
		}
	last->flags = 0;	/* the chain ends */
	__atomic_store_n(ring.sq_tail, ring.tail, __ATOMIC_RELEASE);
	for (;;) {
		unsigned done = __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE) - *ring.cq_head;
		unsigned submit = ring.tail - __atomic_load_n(ring.sq_head, __ATOMIC_ACQUIRE);

		if (done >= n)
			break;
		if (stopping)
			return 0;
		if (syscall(__NR_io_uring_enter, ring.fd, submit, n - done,
			    IORING_ENTER_GETEVENTS, NULL, 0) < 0 && errno != EINTR)
			die("io_uring_enter");
	}
	head = *ring.cq_head;
	for (i = 0; i < (int)n; i++, head++) {
		struct io_uring_cqe *c = &ring.cqes[head & *ring.cq_mask];

		if (c->user_data < sizeof(results) / sizeof(results[0]))
			results[c->user_data] = c->res;
	}
	__atomic_store_n(ring.cq_head, head, __ATOMIC_RELEASE);
	return 1;
}

/* a namespace's dump of one kind from the ring's results: rows into v4, v6 */
static void uring_rows(int i, int k, const char *t, struct buf *v4, struct buf *v6)
{
	int slot = 1 + (i * KINDS + k) * STEPS;

	if (results[slot] < 0) {
		errno = -results[slot];
		die("send to sock_diag");
	}
	if (results[slot + 1] < 0) {
		errno = -results[slot + 1];
		die("recv from sock_diag");
	}
	if (parse(ubufs[i][k][0], results[slot + 1], k, t, v4, v6))
		return;
	if (results[slot + 2] >= 0) {
		if (parse(ubufs[i][k][1], results[slot + 2], k, t, v4, v6))
			return;
	} else if (results[slot + 2] != -EAGAIN) {
		errno = -results[slot + 2];
		die("recv from sock_diag");
	}
	rest(targets[i].sock, k, t, v4, v6);	/* a dump of more than two datagrams */
}

static int netns_socket(const char *path)
{
	int own = open("/proc/self/ns/net", O_RDONLY), fd = open(path, O_RDONLY), s;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	if (own < 0 || fd < 0)
		die(path);
	if (setns(fd, CLONE_NEWNET))
		die("setns");
	s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)))
		die("sock_diag socket");
	if (setns(own, CLONE_NEWNET))
		die("setns back");
	close(fd);
	close(own);
	return s;
}

static FILE *create(const char *path, int kind)
{
	FILE *f = fopen(path, "w");

	if (!f)
		die(path);
	setvbuf(f, NULL, _IOFBF, 1 << 16);
	fputs(header[kind], f);
	fputs("\r\n", f);
	return f;
}

static void read_plan(const char *path)
{
	char line[4096], a[1024], b[1024], c[1024];
	FILE *f = fopen(path, "r");
	int i;

	if (!f)
		die(path);
	/* headers first: a target's files are created with them */
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "header subflows ", 16))
			header[SUBFLOWS] = strdup(line + 16);
		else if (!strncmp(line, "header mptcp ", 13))
			header[MPTCP] = strdup(line + 13);
	}
	if (!header[SUBFLOWS] || !header[MPTCP])
		bad("no header lines", path);
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned int x, y;

		line[strcspn(line, "\n")] = 0;
		if (!*line || !strncmp(line, "header ", 7))
			continue;
		if (sscanf(line, "interval subflows %ld", &interval_us[SUBFLOWS]) == 1 ||
		    sscanf(line, "interval mptcp %ld", &interval_us[MPTCP]) == 1)
			continue;
		if (sscanf(line, "target %1023s %1023s %1023s", a, b, c) == 3) {
			struct target *t = &targets[n_targets];

			if (n_targets == MAX_TARGETS)
				bad("too many targets", line);
			t->sock = netns_socket(a);
			if (interval_us[SUBFLOWS])
				t->out[SUBFLOWS] = create(b, SUBFLOWS);
			if (interval_us[MPTCP])
				t->out[MPTCP] = create(c, MPTCP);
			n_targets++;
		} else if (sscanf(line, "lateness %1023s", a) == 1) {
			lateness_out = fopen(a, "w");
			if (!lateness_out)
				die(a);
		} else if (sscanf(line, "tcp %u %u", &x, &y) == 2 && n_tcp < MAX_FIELDS) {
			tcp_fields[n_tcp++] = (struct field){ x, y };
		} else if (sscanf(line, "mptcp %u %u", &x, &y) == 2 && n_mptcp < MAX_FIELDS) {
			mptcp_fields[n_mptcp++] = (struct field){ x, y };
		} else if (sscanf(line, "sched %u %u", &x, &y) == 2) {
			sched_field = (struct field){ x, y };
		} else if (sscanf(line, "attr %u %u %1023s", &x, &y, a) == 3 &&
			   n_attrs < MAX_ATTRS && x < MAX_ATTR_KIND) {
			attrs[n_attrs++] = (struct attr){ x, y, !strcmp(a, "post") };
		} else {
			bad("unknown line", line);
		}
	}
	fclose(f);
	for (i = 0; i < n_tcp; i++)
		if (tcp_fields[i].size != 1 && tcp_fields[i].size != 2 &&
		    tcp_fields[i].size != 4 && tcp_fields[i].size != 8)
			bad("a field's size is not 1, 2, 4 or 8", "tcp");
	if (interval_us[SUBFLOWS] < 0 || interval_us[MPTCP] < 0 || !n_targets)
		bad("no target, or a negative interval", path);
}

static double now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_until(double deadline)
{
	struct timespec ts = { (time_t)deadline, (long)((deadline - (time_t)deadline) * 1e9) };

	/* EINTR: a stop signal; the loop looks at `stopping` */
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

int main(int argc, char **argv)
{
	struct buf v4 = { 0 }, v6 = { 0 };
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	struct timespec rt;
	double offset, now, due[KINDS], next;
	int k, i, uring = 0;
	char t[32];

	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "sync") && strcmp(argv[2], "uring"))) {
		fprintf(stderr, "usage: sampler PLAN [uring|sync]\n");
		return 2;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	read_plan(argv[1]);
	if (argc == 2 || !strcmp(argv[2], "uring")) {
		uring = !uring_setup();
		if (!uring && argc == 3)
			die("io_uring_setup");
	}
	/* which path, for the agent (sampler.py reads it back) */
	printf("path %s\n", uring ? "uring" : "sync");
	fflush(stdout);
	clock_gettime(CLOCK_REALTIME, &rt);
	now = now_mono();
	offset = rt.tv_sec + rt.tv_nsec / 1e9 - now;
	for (k = 0; k < KINDS; k++)
		due[k] = now;
	while (!stopping) {
		int ready[KINDS];

		/* the next tick: the kinds due soonest (1 us of slack for sums of
		 * different intervals); a kind due soon after waits one round */
		next = 0;
		for (k = 0; k < KINDS; k++)
			if (interval_us[k] && (!next || due[k] < next))
				next = due[k];
		if (!next)
			break;
		for (k = 0; k < KINDS; k++)
			ready[k] = interval_us[k] && due[k] <= next + 1e-6;
		if (uring) {
			if (!uring_tick(next, ready))
				break;
		} else {
			sleep_until(next);
			if (stopping)
				break;
		}
		now = now_mono();
		if (lateness_out)
			fprintf(lateness_out, "%.9f\n", now - next);
		snprintf(t, sizeof(t), "%.6f", now + offset);
		for (i = 0; i < n_targets; i++)
			for (k = 0; k < KINDS; k++) {
				if (!ready[k])
					continue;
				v4.len = v6.len = 0;
				if (uring)
					uring_rows(i, k, t, &v4, &v6);
				else
					dump(targets[i].sock, k, t, &v4, &v6);
				fwrite(v4.p, 1, v4.len, targets[i].out[k]);
				fwrite(v6.p, 1, v6.len, targets[i].out[k]);
			}
		for (k = 0; k < KINDS; k++) {
			if (!ready[k])
				continue;
			due[k] += interval_us[k] / 1e6;
			if (due[k] < now)	/* fell behind: skip, do not burst */
				due[k] = now + interval_us[k] / 1e6;
		}
	}
	for (i = 0; i < n_targets; i++)
		for (k = 0; k < KINDS; k++)
			if (targets[i].out[k] && fclose(targets[i].out[k]))
				die("closing a trace");
	if (lateness_out && fclose(lateness_out))
		die("closing the lateness file");
	return 0;
}
