// SPDX-License-Identifier: GPL-2.0-only
/*
 * bgtraffic: mptlab's background-traffic replayer (mptlab/workloads/background.py).
 * Built on the host (mptlab.workloads.helpers.bgtraffic), run in the guest's
 * network namespaces:
 *
 *   bgtraffic send DEST SCHEDULE [io_uring|sleep]  one per background pair, in its sender
 *   bgtraffic recv SCHEDULE SIGNAL_PORT            one per background pair, in its receiver
 *
 * Why not D-ITG: mptlab draws every packet's time and size itself, so the
 * generator only has to replay a schedule.  In a UML guest every system call
 * is a ptrace round trip on the host (GETREGS, GETREGSET, SETREGS, SYSEMU,
 * wait4: ~12 us, 15-70 us with the guest's own work), and D-ITG spends ~9.4
 * of them per packet (sender ~1.7 select + ~3.7 gettimeofday + 1 send;
 * receiver 2 recv + 1 gettimeofday + wakeups): ~10.6 s of the 24.4 s of host
 * CPU of a blest-3g-wlan run.  The receiver here pays a few per 64 KiB of TCP
 * and per tick of UDP.  The sender, two ways:
 *
 *   io_uring (the default): each packet is a chain in the guest kernel's
 *     io_uring (a poll that never fires, cancelled by a linked timeout at
 *     the packet's absolute due time, hard-linked to its send), 256 packets
 *     in the ring, one io_uring_enter() per 128: the kernel fires the
 *     timers and sends, the process does not run per packet.  blest-3g-wlan
 *     (2 senders, ~21,000 packets each in a run): ~330 system calls instead
 *     of ~84,000; host CPU per run 6.7 -> 5.1 s (median of 20 runs), the
 *     background alone -0.5 s per 60 s (docs/benchmarks.md, "Background
 *     replayer through io_uring").
 *   sleep (if io_uring_setup() fails, e.g. ENOSYS or a seccomp filter, or
 *     the kernel lacks what the chain needs, or asked for): one absolute
 *     clock_nanosleep and one send per packet; packets due at the same
 *     microsecond share the sleep.
 *
 * Both send each packet at its due time: under virtual time 0.26-0.76 us
 * after it (clock reads move guest time by 256 ns each; the test is
 * tests/test_traffic_kernel.py), with the same per-flow bytes.
 *
 * Schedule (text, written by background.py; times already merged and sorted):
 *
 *   flows N
 *   KIND PORT [WINDOW]   N lines, KIND tcp | udp | greedy; flow i is line i;
 *                        WINDOW (greedy only): cap of its window in bytes
 *   packets M
 *   US FLOW SIZE         M lines: due time (us after t0), flow index, payload
 *
 * Sender: connects every TCP flow (Nagle on and SO_REUSEADDR only, as D-ITG),
 * connect()s a UDP socket per UDP flow, forks a writer per greedy flow, then
 * sets up io_uring, takes t0 (CLOCK_MONOTONIC, printed as "t0 SEC.NSEC" so
 * that background.py can line its counters up with the schedule), prints
 * which path it takes ("sender: ...") and replays the timeline.  The clock
 * is read once: under UML virtual time a clock read advances guest time
 * by only 256 ns, so any loop on the clock would freeze the guest.  A TCP
 * flow whose send buffer is full delays its own later packets (none is
 * dropped), not the other flows'; late packets go out at once (absolute
 * deadlines), where D-ITG's relative waits lose the time.  No randomness, no
 * wall clock: under virtual time a run repeats exactly.  At the end it
 * prints "done: ..." (and, on the io_uring path, its io_uring_enter() calls).
 *
 * Receiver: listens on every TCP flow's port, binds every UDP flow's port,
 * then listens on SIGNAL_PORT (last: the agent's readiness signal, as
 * ITGRecv's control port).  TCP data wakes it only per RCV_LOWAT bytes (the
 * kernel still wakes it early when the window would close); UDP sockets are
 * drained every TICK_MS with recvmmsg().  SIGINT/SIGTERM: prints what it got
 * per flow and exits.
 *
 * A greedy flow with a WINDOW is window-limited by its receiver, as a
 * saturated sender limited by socket buffers (BLEST's background, D-ITG on
 * Linux 3.14): at most WINDOW bytes in flight, so a path with BDP B keeps
 * about WINDOW - B queued instead of its whole queue.  Why the receiver:
 * TCP_WINDOW_CLAMP bounds the advertised window itself, in bytes (rounded
 * up to the window scale's unit: 8 B at 256 KiB), so the sender's bytes in
 * flight can never exceed it whatever its congestion control does; a
 * sender-side SO_SNDBUF counts skb memory (truesize: more than the
 * payload, by an amount that varies with segmentation), not bytes, and
 * TCP_NOTSENT_LOWAT bounds only unsent data.  Measured on the host's 6.18
 * (namespaces, a 5 Mbit/s tbf router, no delay, Reno): 64 KiB, 256 KiB and
 * 1 MiB caps kept 65536, 262144 and 1048576 B in flight (the sender's
 * snd_wnd; 46, 182 and 725 segments unacked) and a ping through the queue
 * at 105-110, 435-439 and 1751-1755 ms, the windows' wire bytes at the
 * rate; uncapped, 3.5 s after 6 s and growing (docs/workloads.md).
 * How (setup_window(), drain_tcp()):
 *   - the listener gets SO_RCVBUF(FORCE) = 4 x WINDOW, which locks the
 *     buffer (no autotuning, which would raise the clamp with it) and
 *     leaves room for unread data without shrinking the window, and
 *     TCP_WINDOW_CLAMP = WINDOW, which the kernel copies into each
 *     connection request: the SYN-ACK's window and window scale obey it;
 *   - Linux 6.12 overwrites the clamp with the buffer's window
 *     (tcp_measure_rcv_mss(), when the first full-size segment changes
 *     its payload/truesize ratio): the receiver reads the clamp back at
 *     each wake-up and sets it again if it moved ("reclamped" in its
 *     report; on the host's 6.18, loopback and namespaces, once per
 *     connection, at its start);
 *   - it wakes per min(RCV_LOWAT, WINDOW / 2) bytes, so unread data never
 *     holds more than half the window.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

enum kind { K_TCP, K_UDP, K_GREEDY };

/* greedy writes: big enough that a 25 Mbit/s flow costs ~25 writes/s */
#define GREEDY_CHUNK (128 * 1024)
/* TCP receive wake-up threshold: a 157 pps x 1000 B flow wakes ~2.4 times/s */
#define RCV_LOWAT (64 * 1024)
#define READ_BUF (256 * 1024)
/*
 * UDP: drained every TICK_MS.  4 MiB of receive buffer holds ~1800
 * datagrams (~2.3 KB of memory each): 9000 datagrams/s per flow between
 * ticks, 9x the largest preset rate (fec: 995 pps).
 */
#define TICK_MS 200
#define UDP_RCVBUF (4 << 20)
#define UDP_SNDBUF (4 << 20)
#define BATCH 64
#define DGRAM_MAX 4096 /* payloads are at most 1960 B (1400 B x 1.4) */
#define PKT_MAX 65507 /* the largest UDP payload */
#define CONNECT_WAIT_MS 30000 /* a handshake over the slowest link takes < 1 s */

struct flow {
	enum kind kind;
	int port;
	int fd;
	uint64_t bytes; /* receiver: payload read */
	uint64_t dgrams; /* receiver: UDP datagrams read */
	uint64_t pend; /* sender, TCP: bytes due that the socket has not taken yet */
	int dead; /* sender: a TCP send failed, the flow's packets are skipped */
	int resting; /* sender, io_uring: a send of ->pend is in the ring */
	int window; /* greedy: cap of the advertised window (bytes); 0: none */
	int conn; /* receiver, capped greedy: the accepted connection, or -1 */
	long reclamps; /* receiver: times the kernel had moved the clamp */
	int clamp_end; /* receiver: the clamp its connection ended with (-1: none) */
};

struct pkt {
	uint64_t us;
	uint32_t flow;
	uint32_t size;
};

static struct flow *flows;
static int nflows;
static struct pkt *pkts;
static long npkts;
static char buf[READ_BUF]; /* payload (zeros) and read buffer */

static void die(const char *what)
{
	fprintf(stderr, "bgtraffic: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void bad(const char *path, const char *what)
{
	fprintf(stderr, "bgtraffic: %s: %s\n", path, what);
	exit(2);
}

/* Reads the flows and, if @with_packets, the packets of a schedule file. */
static void load(const char *path, int with_packets)
{
	char kind[16], line[128];
	FILE *f = fopen(path, "r");
	long i;

	if (!f)
		die(path);
	if (fscanf(f, " flows %d", &nflows) != 1 || nflows < 1)
		bad(path, "expected 'flows N'");
	flows = calloc(nflows, sizeof(*flows));
	if (!flows)
		die("calloc");
	for (i = 0; i < nflows; i++) {
		struct flow *fl = &flows[i];
		int n;

		/* a line each (WINDOW is optional); the first read ends the 'flows' line */
		do {
			if (!fgets(line, sizeof(line), f))
				bad(path, "expected 'KIND PORT [WINDOW]'");
		} while (line[strspn(line, " \t\n")] == '\0');
		n = sscanf(line, "%15s %d %d", kind, &fl->port, &fl->window);
		if (n < 2 || fl->port < 1 || fl->port > 65535)
			bad(path, "expected 'KIND PORT [WINDOW]'");
		if (n == 3 && (strcmp(kind, "greedy") || fl->window < 1))
			bad(path, "a WINDOW is a positive byte count, for greedy flows only");
		if (!strcmp(kind, "tcp"))
			fl->kind = K_TCP;
		else if (!strcmp(kind, "udp"))
			fl->kind = K_UDP;
		else if (!strcmp(kind, "greedy"))
			fl->kind = K_GREEDY;
		else
			bad(path, "flow kind must be tcp, udp or greedy");
		fl->fd = -1;
		fl->conn = -1;
		fl->clamp_end = -1;
	}
	if (!with_packets)
		goto out;
	if (fscanf(f, " packets %ld", &npkts) != 1 || npkts < 0)
		bad(path, "expected 'packets M'");
	pkts = calloc(npkts ? npkts : 1, sizeof(*pkts));
	if (!pkts)
		die("calloc");
	for (i = 0; i < npkts; i++) {
		struct pkt *p = &pkts[i];

		if (fscanf(f, " %" SCNu64 " %" SCNu32 " %" SCNu32, &p->us, &p->flow, &p->size) != 3)
			bad(path, "expected 'US FLOW SIZE'");
		if (p->flow >= (uint32_t)nflows || flows[p->flow].kind == K_GREEDY)
			bad(path, "packet of an unknown or greedy flow");
		if (p->size < 1 || p->size > PKT_MAX)
			bad(path, "payload size out of range");
		if (i && p->us < pkts[i - 1].us)
			bad(path, "packets not in time order");
	}
out:
	fclose(f);
}

/* ------------------------------------------------------------------ sender */

/*
 * Opens every TCP connection at once (one handshake time in all, not one
 * per flow), then makes the sockets blocking again.
 */
static void connect_tcp(const struct sockaddr_in *dest)
{
	struct pollfd *conn = calloc(nflows, sizeof(*conn));
	int i, one = 1, pending = 0;

	if (!conn)
		die("calloc");
	for (i = 0; i < nflows; i++) {
		struct flow *fl = &flows[i];
		struct sockaddr_in to = *dest;

		conn[i].fd = -1;
		if (fl->kind == K_UDP)
			continue;
		fl->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fl->fd < 0)
			die("socket");
		if (setsockopt(fl->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
			die("SO_REUSEADDR");
		to.sin_port = htons(fl->port);
		if (connect(fl->fd, (struct sockaddr *)&to, sizeof(to)) && errno != EINPROGRESS) {
			fprintf(stderr, "bgtraffic: connect to port %d: %s\n", fl->port,
				strerror(errno));
			exit(1);
		}
		conn[i].fd = fl->fd;
		conn[i].events = POLLOUT;
		pending++;
	}
	while (pending) {
		int n = poll(conn, nflows, CONNECT_WAIT_MS);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("poll");
		if (n == 0) {
			fprintf(stderr, "bgtraffic: TCP connections not up after %d ms\n",
				CONNECT_WAIT_MS);
			exit(1);
		}
		for (i = 0; i < nflows; i++) {
			int err = 0;
			socklen_t len = sizeof(err);

			if (conn[i].fd < 0 || !conn[i].revents)
				continue;
			if (getsockopt(conn[i].fd, SOL_SOCKET, SO_ERROR, &err, &len))
				die("SO_ERROR");
			if (err) {
				fprintf(stderr, "bgtraffic: connect to port %d: %s\n",
					flows[i].port, strerror(err));
				exit(1);
			}
			if (fcntl(conn[i].fd, F_SETFL, 0))
				die("fcntl");
			conn[i].fd = -1;
			pending--;
		}
	}
	free(conn);
}

/*
 * UDP datagrams stay charged to their socket while the per-flow RTT's netem
 * delay holds them on the access link: 995 pps (fec) x 90 ms x ~2.3 KB is
 * ~206 KB, the default 208 KiB send buffer, and a full one would block the
 * whole pair.  UDP_SNDBUF holds ~20x that.
 */
static void connect_udp(const struct sockaddr_in *dest)
{
	int i, size = UDP_SNDBUF;

	for (i = 0; i < nflows; i++) {
		struct flow *fl = &flows[i];
		struct sockaddr_in to = *dest;

		if (fl->kind != K_UDP)
			continue;
		fl->fd = socket(AF_INET, SOCK_DGRAM, 0);
		if (fl->fd < 0)
			die("socket");
		if (setsockopt(fl->fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)))
			setsockopt(fl->fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
		to.sin_port = htons(fl->port);
		if (connect(fl->fd, (struct sockaddr *)&to, sizeof(to)))
			die("connect udp");
	}
}

/*
 * A greedy flow always has data: a child blocks in large writes for as long
 * as it lives.  It dies with the sender (which the agent ends with SIGKILL).
 */
static int start_greedy(void)
{
	pid_t parent = getpid();
	int i, n = 0;

	for (i = 0; i < nflows; i++) {
		pid_t pid;

		if (flows[i].kind != K_GREEDY)
			continue;
		pid = fork();
		if (pid < 0)
			die("fork");
		n++;
		if (pid)
			continue;
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
			_exit(0);
		for (;;) {
			if (send(flows[i].fd, buf, GREEDY_CHUNK, MSG_NOSIGNAL) < 0 &&
			    errno != EINTR) {
				fprintf(stderr, "bgtraffic: greedy flow to port %d: %s\n",
					flows[i].port, strerror(errno));
				_exit(1);
			}
		}
	}
	return n;
}

/*
 * A TCP flow whose send buffer is full keeps its due bytes in ->pend and
 * writes them as its socket takes them, while the other flows keep their
 * times (as D-ITG's thread per flow would; one blocking send() here would
 * hold up the whole pair).  Its later packets queue behind (no drop, same
 * order), so it catches up once the socket drains.  Rare: the send buffer
 * grows with cwnd (autotuning) and a paced flow sends ~157 KB/s.
 */
static struct pollfd *pfd; /* [0]: the timer, then the blocked flows */
static int *pfd_flow; /* pfd[k] is flow pfd_flow[k] */
static int timer_fd = -1, nblocked;
static long nblock_events, errors;

static void send_error(struct flow *fl)
{
	if (++errors <= 10)
		fprintf(stderr, "bgtraffic: send to port %d: %s\n", fl->port, strerror(errno));
	if (fl->kind == K_TCP) {
		fl->dead = 1;
		fl->pend = 0;
	}
}

/* Writes what the socket takes now of a TCP flow's pending bytes. */
static void tcp_flush(struct flow *fl)
{
	while (fl->pend && !fl->dead) {
		size_t len = fl->pend < sizeof(buf) ? fl->pend : sizeof(buf);
		ssize_t n = send(fl->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0)
			fl->pend -= n;
		else if (n < 0 && errno == EAGAIN)
			return;
		else if (n < 0 && errno != EINTR)
			send_error(fl);
	}
}

/* One paced packet: one send(); a UDP send that fails loses that datagram. */
static void send_pkt(struct flow *fl, uint32_t len)
{
	if (fl->kind == K_UDP) {
		while (send(fl->fd, buf, len, MSG_NOSIGNAL) < 0) {
			/* ENOBUFS, or ECONNREFUSED from an earlier ICMP error */
			if (errno != EINTR) {
				send_error(fl);
				return;
			}
		}
		return;
	}
	if (fl->pend) { /* behind earlier bytes that still wait */
		fl->pend += len;
		return;
	}
	fl->pend = len;
	tcp_flush(fl);
	if (!fl->pend)
		return;
	nblocked++;
	if (++nblock_events <= 10)
		fprintf(stderr, "bgtraffic: port %d: send buffer full, its packets wait\n",
			fl->port);
}

/*
 * Until @due (absolute CLOCK_MONOTONIC; NULL: until no flow is blocked).
 * Usually one clock_nanosleep(); with blocked flows a poll() on their
 * sockets and an absolute timerfd, so the clock is never read here either.
 */
static void wait_until(const struct timespec *due)
{
	struct itimerspec at = { 0 };
	int i, n;

	if (!nblocked) {
		while (due && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, due, NULL) == EINTR)
			;
		return;
	}
	if (due) {
		at.it_value = *due;
		if (timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &at, NULL))
			die("timerfd_settime");
	}
	for (;;) {
		n = 1;
		pfd[0].fd = due ? timer_fd : -1;
		pfd[0].events = POLLIN;
		for (i = 0; i < nflows; i++) {
			if (!flows[i].pend)
				continue;
			pfd_flow[n] = i;
			pfd[n].fd = flows[i].fd;
			pfd[n++].events = POLLOUT;
		}
		if (n == 1 && !due)
			return;
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		for (i = 1; i < n; i++) {
			struct flow *fl = &flows[pfd_flow[i]];

			if (!pfd[i].revents)
				continue;
			tcp_flush(fl);
			if (!fl->pend)
				nblocked--;
		}
		if (due && pfd[0].revents) {
			uint64_t expired;

			if (read(timer_fd, &expired, sizeof(expired)) < 0 && errno != EAGAIN)
				die("timerfd read");
			return;
		}
	}
}

/* The absolute deadline of a packet due @us after @t0. */
static struct timespec due_at(const struct timespec *t0, uint64_t us)
{
	uint64_t ns = (uint64_t)t0->tv_nsec + us % 1000000 * 1000;
	struct timespec due = {
		.tv_sec = t0->tv_sec + us / 1000000 + ns / 1000000000,
		.tv_nsec = ns % 1000000000,
	};

	return due;
}

/*
 * The timeline by a sleep and a send per packet (when io_uring is not
 * there).  Timer slack 1 ns: with the default 50 us a sleep ends up to 50 us
 * after its deadline (the kernel fires the timer at its latest allowed time
 * when no other timer is due sooner), and under virtual time packets left
 * 19.7-50.5 us late (tests/test_traffic_kernel.py); io_uring's timeouts
 * have no slack, and both paths now send at the same times.
 */
static void replay_sleep(const struct timespec *t0)
{
	struct timespec due;
	uint64_t last_us = 0;
	long i;

	if (prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL))
		die("PR_SET_TIMERSLACK");
	for (i = 0; i < npkts; i++) {
		struct pkt *p = &pkts[i];
		struct flow *fl = &flows[p->flow];

		if (fl->dead)
			continue;
		/* one wait per distinct due time; a due time already past returns at once */
		if (p->us != last_us || i == 0) {
			due = due_at(t0, p->us);
			wait_until(&due);
			last_us = p->us;
		}
		send_pkt(fl, p->size);
	}
	wait_until(NULL);
}

/* ------------------------------------------------------- sender: io_uring */

/*
 * Each packet is a chain of three in the ring: a poll of a pipe that never
 * becomes readable, a linked timeout at the packet's absolute due time
 * (CLOCK_MONOTONIC, no timer slack) that cancels the poll, and the send,
 * hard-linked so that the cancelled poll lets it go.  The guest kernel fires
 * the timer and sends; the process only refills the ring, one
 * io_uring_enter() per WINDOW / 2 packets, in which it sleeps meanwhile.
 *
 * Why not IORING_OP_TIMEOUT linked to the send: every expiry of one wakes
 * the io_uring_enter() that waits for completions (the kernel counts them in
 * cq_timeouts, io_should_wake()), so the process went back to user space
 * once per due time: 3093 io_uring_enter() for 6000 packets on the host.  A
 * linked timeout does not, and the task work it starts (cancel, send) runs
 * inside that io_uring_enter().
 *
 * Each packet has a chain of its own, so a send that waits (a UDP socket
 * whose buffer is full) holds up no other packet.  TCP sends go with
 * MSG_DONTWAIT: what the socket does not take now is added to the flow's
 * ->pend and written by one send of the flow's own (MSG_WAITALL, no
 * timeout; the kernel waits for room), so a full send buffer delays only
 * that flow's bytes, as in the sleep path.  (The flow's later packets may
 * write into room that frees before that send completes: the stream is
 * zeros, and no byte leaves before it is due.)
 */
#define WINDOW 256 /* packets in the ring at once */
#define RING_SQ (4 * WINDOW) /* three entries per packet, and the pending sends */
#define RING_CQ (4 * RING_SQ) /* completions: two per packet, one per pending send */

/* user_data: what (top byte), flow, and the send's length or the packet's index */
enum ucode { U_WAIT = 1, U_TIMEOUT, U_SEND, U_PEND, U_PROBE };

static struct {
	int fd, pipe[2];
	unsigned *sq_head, *sq_tail, *sq_mask, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
	unsigned sq_entries, tail;
	/* a timeout's time; the kernel copies it when it takes the entry */
	struct __kernel_timespec ts[RING_SQ];
	long enters; /* io_uring_enter() calls: the path's system calls */
} ring = { .fd = -1 };

static uint64_t ud(enum ucode what, int flow, uint32_t low)
{
	return (uint64_t)what << 56 | (uint64_t)(flow & 0xffffff) << 32 | low;
}

static struct io_uring_sqe *sqe_get(void)
{
	struct io_uring_sqe *sqe = &ring.sqes[ring.tail++ & *ring.sq_mask];

	memset(sqe, 0, sizeof(*sqe));
	return sqe;
}

static unsigned sq_free(void)
{
	return ring.sq_entries - (ring.tail - __atomic_load_n(ring.sq_head, __ATOMIC_ACQUIRE));
}

/* Submits what is queued and waits until @wait_nr completions are there. */
static void ring_enter(unsigned wait_nr)
{
	unsigned queued = ring.tail - __atomic_load_n(ring.sq_head, __ATOMIC_ACQUIRE);

	__atomic_store_n(ring.sq_tail, ring.tail, __ATOMIC_RELEASE);
	ring.enters++;
	/* EINTR: the caller reaps what is there and comes back */
	if (syscall(__NR_io_uring_enter, ring.fd, queued, wait_nr,
		    wait_nr ? IORING_ENTER_GETEVENTS : 0, NULL, 0) < 0 &&
	    errno != EINTR)
		die("io_uring_enter");
}

static void prep_send(struct io_uring_sqe *sqe, int fd, uint32_t len, int flags)
{
	sqe->opcode = IORING_OP_SEND;
	sqe->fd = fd;
	sqe->addr = (uintptr_t)buf;
	sqe->len = len;
	sqe->msg_flags = flags | MSG_NOSIGNAL;
}

/*
 * The poll and the linked timeout that hold the next entry (the caller's)
 * until @due.  @id: unique among the chains in the ring (the timeout
 * cancels its poll by this user_data).
 */
static struct io_uring_sqe *prep_timed(const struct timespec *due, int flow, uint32_t id)
{
	struct __kernel_timespec *ts;
	struct io_uring_sqe *sqe = sqe_get();

	sqe->opcode = IORING_OP_POLL_ADD;
	sqe->fd = ring.pipe[0];
	sqe->poll32_events = POLLIN;
	sqe->flags = IOSQE_IO_HARDLINK; /* cancelled, it still starts the send */
	sqe->user_data = ud(U_WAIT, flow, id);
	ts = &ring.ts[ring.tail & *ring.sq_mask];
	ts->tv_sec = due->tv_sec;
	ts->tv_nsec = due->tv_nsec;
	sqe = sqe_get();
	sqe->opcode = IORING_OP_LINK_TIMEOUT;
	sqe->fd = -1;
	sqe->addr = (uintptr_t)ts;
	sqe->len = 1;
	sqe->timeout_flags = IORING_TIMEOUT_ABS;
	sqe->flags = IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
	sqe->user_data = ud(U_TIMEOUT, flow, id);
	return sqe_get();
}

/*
 * The chain this path needs, tried once with a due time already past: it
 * must give exactly two completions, the poll's (cancelled) and the
 * no-op's (0).  Kernels before 5.17 (no CQE skip) fail it.
 */
static const char *ring_probe(void)
{
	struct timespec past = { 0, 0 };
	struct io_uring_sqe *sqe = prep_timed(&past, 0, 0);
	int i, ok = 0;

	sqe->opcode = IORING_OP_NOP;
	sqe->user_data = ud(U_PROBE, 0, 0);
	ring_enter(2);
	for (i = 0; i < 2 && *ring.cq_head != __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE); i++) {
		struct io_uring_cqe *c = &ring.cqes[*ring.cq_head & *ring.cq_mask];

		ok += (c->user_data == ud(U_WAIT, 0, 0) && c->res == -ECANCELED) ||
		      (c->user_data == ud(U_PROBE, 0, 0) && c->res == 0);
		__atomic_store_n(ring.cq_head, *ring.cq_head + 1, __ATOMIC_RELEASE);
	}
	if (ok != 2)
		return "a poll, a linked timeout and a hard link do not work as needed "
		       "(kernel before 5.17?)";
	return NULL;
}

/* Sets the ring up; NULL, or why this path cannot be used. */
static const char *ring_open(void)
{
	struct io_uring_params p = { .flags = IORING_SETUP_CQSIZE, .cq_entries = RING_CQ };
	size_t sq_len, cq_len;
	unsigned *array, i;
	char *m;

	/* both ends stay open: a closed writer would make the read end ready */
	if (pipe2(ring.pipe, O_CLOEXEC))
		return strerror(errno);
	ring.fd = syscall(__NR_io_uring_setup, RING_SQ, &p);
	if (ring.fd < 0)
		return strerror(errno);
	if (!(p.features & IORING_FEAT_SINGLE_MMAP) || !(p.features & IORING_FEAT_NODROP) ||
	    !(p.features & IORING_FEAT_CQE_SKIP) || p.sq_entries != RING_SQ)
		return "the kernel's io_uring is before 5.17";
	sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	m = mmap(NULL, sq_len > cq_len ? sq_len : cq_len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_POPULATE, ring.fd, IORING_OFF_SQ_RING);
	if (m == MAP_FAILED)
		return strerror(errno);
	ring.sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_POPULATE, ring.fd, IORING_OFF_SQES);
	if (ring.sqes == MAP_FAILED)
		return strerror(errno);
	ring.sq_head = (unsigned *)(m + p.sq_off.head);
	ring.sq_tail = (unsigned *)(m + p.sq_off.tail);
	ring.sq_mask = (unsigned *)(m + p.sq_off.ring_mask);
	ring.cq_head = (unsigned *)(m + p.cq_off.head);
	ring.cq_tail = (unsigned *)(m + p.cq_off.tail);
	ring.cq_mask = (unsigned *)(m + p.cq_off.ring_mask);
	ring.cqes = (struct io_uring_cqe *)(m + p.cq_off.cqes);
	ring.sq_entries = p.sq_entries;
	ring.tail = *ring.sq_tail;
	array = (unsigned *)(m + p.sq_off.array);
	for (i = 0; i < p.sq_entries; i++)
		array[i] = i;
	return ring_probe();
}

/* A packet's send completed with @res (bytes, or -errno). */
static void sent(struct flow *fl, uint32_t len, int res)
{
	if (fl->dead)
		return;
	if (fl->kind == K_TCP && res == -EAGAIN)
		res = 0;
	if (res < 0) {
		errno = -res;
		send_error(fl);
		return;
	}
	if ((uint32_t)res >= len)
		return;
	if (!fl->pend && ++nblock_events <= 10)
		fprintf(stderr, "bgtraffic: port %d: send buffer full, its packets wait\n",
			fl->port);
	fl->pend += len - res;
}

struct replay {
	long next; /* the next packet to queue */
	int inflight; /* packets in the ring */
	int expect; /* completions still to come */
	int resting; /* pending sends in the ring */
};

/* Reads every completion; queues a send of ->pend for each flow that needs one. */
static void reap(struct replay *r)
{
	unsigned head = *ring.cq_head, tail = __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE);
	int i;

	for (; head != tail; head++) {
		struct io_uring_cqe *c = &ring.cqes[head & *ring.cq_mask];
		struct flow *fl = &flows[c->user_data >> 32 & 0xffffff];
		uint32_t low = (uint32_t)c->user_data;

		r->expect--;
		switch ((enum ucode)(c->user_data >> 56)) {
		case U_WAIT: /* the timeout cancelled it: the packet is due */
			if (c->res != -ECANCELED) {
				errno = c->res < 0 ? -c->res : EINVAL;
				die("io_uring poll (the pipe became readable?)");
			}
			break;
		case U_SEND:
			r->inflight--;
			sent(fl, low, c->res);
			break;
		case U_PEND:
			r->resting--;
			fl->resting = 0;
			if (c->res < 0 && !fl->dead) {
				errno = -c->res;
				send_error(fl);
			} else if (c->res > 0) {
				fl->pend -= c->res;
			}
			break;
		default: /* a timeout posts only when it failed */
			errno = -c->res;
			die("io_uring linked timeout");
		}
	}
	__atomic_store_n(ring.cq_head, head, __ATOMIC_RELEASE);
	for (i = 0; i < nflows; i++) {
		struct flow *fl = &flows[i];
		uint32_t len = fl->pend < sizeof(buf) ? fl->pend : sizeof(buf);
		struct io_uring_sqe *sqe;

		if (!fl->pend || fl->dead || fl->resting)
			continue;
		if (!sq_free())
			ring_enter(0);
		sqe = sqe_get();
		prep_send(sqe, fl->fd, len, MSG_WAITALL);
		sqe->user_data = ud(U_PEND, i, len);
		fl->resting = 1;
		r->resting++;
		r->expect++;
	}
}

/*
 * The timeline through the ring: WINDOW packets in it, refilled once half
 * of them have gone (their completions come in due order), so the packets
 * a refill adds are not due yet.
 */
static void replay_uring(const struct timespec *t0)
{
	struct replay r = { 0 };

	for (;;) {
		while (r.next < npkts && r.inflight < WINDOW && sq_free() >= 3) {
			const struct pkt *p = &pkts[r.next];
			struct flow *fl = &flows[p->flow];
			struct timespec due = due_at(t0, p->us);
			struct io_uring_sqe *sqe;

			if (!fl->dead) {
				sqe = prep_timed(&due, p->flow, (uint32_t)r.next);
				prep_send(sqe, fl->fd, p->size, fl->kind == K_TCP ? MSG_DONTWAIT : 0);
				sqe->user_data = ud(U_SEND, p->flow, p->size);
				r.inflight++;
				r.expect += 2;
			}
			r.next++;
		}
		if (r.next >= npkts && !r.expect)
			return;
		/* the first half of the window: two completions per packet */
		ring_enter(r.next < npkts && r.expect > WINDOW ? r.expect - WINDOW
			   : r.next < npkts			 ? 1
								 : r.expect);
		reap(&r);
	}
}

/*
 * @mode: "io_uring" (the default; the sleep path if the kernel cannot) or
 * "sleep" (a clock_nanosleep and a send per packet).
 */
static int do_send(const char *dest_addr, const char *path, const char *mode)
{
	struct sockaddr_in dest = { .sin_family = AF_INET };
	const char *why = "not asked for";
	struct timespec t0;
	int greedy;

	if (strcmp(mode, "io_uring") && strcmp(mode, "sleep"))
		bad(mode, "the sender's mode must be io_uring or sleep");
	load(path, 1);
	if (inet_pton(AF_INET, dest_addr, &dest.sin_addr) != 1)
		bad(dest_addr, "not an IPv4 address");
	pfd = calloc(nflows + 1, sizeof(*pfd));
	pfd_flow = calloc(nflows + 1, sizeof(*pfd_flow));
	timer_fd = timerfd_create(CLOCK_MONOTONIC, 0);
	if (!pfd || !pfd_flow || timer_fd < 0)
		die("setup");
	connect_tcp(&dest);
	connect_udp(&dest);
	greedy = start_greedy();
	if (!strcmp(mode, "io_uring"))
		why = ring_open();
	if (why && ring.fd >= 0)
		close(ring.fd);
	if (clock_gettime(CLOCK_MONOTONIC, &t0))
		die("clock_gettime");
	printf("t0 %lld.%09ld\nflows %d packets %ld greedy %d\n",
	       (long long)t0.tv_sec, t0.tv_nsec, nflows, npkts, greedy);
	if (why)
		printf("sender: sleep and send per packet (io_uring: %s)\n", why);
	else
		printf("sender: io_uring, %d packets in the ring\n", WINDOW);
	fflush(stdout);
	if (why)
		replay_sleep(&t0);
	else
		replay_uring(&t0);
	printf("done: %ld packets, %ld send errors, %ld times a send buffer was full\n",
	       npkts, errors, nblock_events);
	if (!why)
		printf("io_uring_enter calls: %ld\n", ring.enters);
	fflush(stdout);
	/* greedy flows go on until the agent kills the sender (and with it them) */
	while (greedy)
		pause();
	return 0;
}

/* ---------------------------------------------------------------- receiver */

/* epoll tags: what the event is about, the flow index, the fd */
enum tag { T_LISTEN, T_DATA, T_SIGNAL_LISTEN, T_TICK, T_SIG };

static uint64_t tag(enum tag t, int flow, int fd)
{
	return (uint64_t)t << 56 | (uint64_t)(flow & 0xffffff) << 32 | (uint32_t)fd;
}

static void watch(int ep, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event ev = { .events = events, .data.u64 = data };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		die("epoll_ctl");
}

/*
 * A capped greedy flow's listener (see the top of the file): its receive
 * buffer locked at 4 x @window, its window clamped to @window, both
 * inherited by the connection it accepts.
 */
static void setup_window(int fd, int window)
{
	int half = 2 * window; /* the kernel doubles it: sk_rcvbuf = 4 x window */

	/* FORCE: above net.core.rmem_max (we are root in the guest) */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &half, sizeof(half)) &&
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &half, sizeof(half)))
		die("SO_RCVBUF");
	if (setsockopt(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, &window, sizeof(window)))
		die("TCP_WINDOW_CLAMP");
}

/* @fl's connection's clamp now, into ->clamp_end (the report's "clamp"). */
static int read_clamp(struct flow *fl)
{
	socklen_t len = sizeof(fl->clamp_end);

	if (getsockopt(fl->conn, IPPROTO_TCP, TCP_WINDOW_CLAMP, &fl->clamp_end, &len))
		die("TCP_WINDOW_CLAMP");
	return fl->clamp_end;
}

/* Sets @fl's clamp again if the kernel moved it (Linux 6.12 does, once). */
static void keep_clamp(struct flow *fl)
{
	if (read_clamp(fl) == fl->window)
		return;
	if (setsockopt(fl->conn, IPPROTO_TCP, TCP_WINDOW_CLAMP, &fl->window, sizeof(fl->window)))
		die("TCP_WINDOW_CLAMP");
	fl->reclamps++;
	read_clamp(fl);
}

static int listen_on(int port, int window)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (fd < 0)
		die("socket");
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		die("SO_REUSEADDR");
	if (window)
		setup_window(fd, window);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		fprintf(stderr, "bgtraffic: bind TCP port %d: %s\n", port, strerror(errno));
		exit(1);
	}
	if (listen(fd, 64))
		die("listen");
	return fd;
}

static int bind_udp(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int size = UDP_RCVBUF;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		die("socket");
	/* FORCE: above net.core.rmem_max (we are root in the guest); else what it allows */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		fprintf(stderr, "bgtraffic: bind UDP port %d: %s\n", port, strerror(errno));
		exit(1);
	}
	return fd;
}

static long nwakes, nreads, nrecvmmsg; /* receiver: its system calls, reported at the end */

/* Reads a TCP connection until it would block; closes it at its end. */
static void drain_tcp(int ep, struct flow *fl, int fd)
{
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		nreads++;
		if (n > 0) {
			fl->bytes += n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (fl->conn == fd)
				keep_clamp(fl);
			return;
		}
		epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
		if (fl->conn == fd) { /* the sender ended it (the agent kills senders first) */
			read_clamp(fl);
			fl->conn = -1;
		}
		close(fd);
		return;
	}
}

/* Reads every queued datagram of every UDP flow, BATCH per call. */
static void drain_udp(void)
{
	static struct mmsghdr msgs[BATCH];
	static struct iovec iov[BATCH];
	int i, k, n;

	for (k = 0; k < BATCH; k++) {
		iov[k].iov_base = buf + k * DGRAM_MAX;
		iov[k].iov_len = DGRAM_MAX;
		msgs[k].msg_hdr.msg_iov = &iov[k];
		msgs[k].msg_hdr.msg_iovlen = 1;
	}
	for (i = 0; i < nflows; i++) {
		struct flow *fl = &flows[i];

		if (fl->kind != K_UDP)
			continue;
		do {
			n = recvmmsg(fl->fd, msgs, BATCH, MSG_DONTWAIT, NULL);
			nrecvmmsg++;
			for (k = 0; k < n; k++)
				fl->bytes += msgs[k].msg_len;
			if (n > 0)
				fl->dgrams += n;
		} while (n == BATCH || (n < 0 && errno == EINTR));
	}
}

static int do_recv(const char *path, const char *signal_port)
{
	static const char *const names[] = { "tcp", "udp", "greedy" };
	struct epoll_event evs[64];
	struct itimerspec tick = {
		.it_interval = { TICK_MS / 1000, TICK_MS % 1000 * 1000000L },
		.it_value = { TICK_MS / 1000, TICK_MS % 1000 * 1000000L },
	};
	int ep, sfd, tfd, i, udp = 0, stop = 0;
	sigset_t sigs;

	load(path, 0);
	ep = epoll_create1(0);
	if (ep < 0)
		die("epoll_create1");
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL))
		die("sigprocmask");
	sfd = signalfd(-1, &sigs, 0);
	if (sfd < 0)
		die("signalfd");
	watch(ep, sfd, EPOLLIN, tag(T_SIG, 0, sfd));
	for (i = 0; i < nflows; i++) {
		struct flow *fl = &flows[i];

		if (fl->kind == K_UDP) {
			fl->fd = bind_udp(fl->port);
			udp++;
		} else {
			fl->fd = listen_on(fl->port, fl->window);
			watch(ep, fl->fd, EPOLLIN, tag(T_LISTEN, i, fl->fd));
		}
	}
	if (udp) {
		tfd = timerfd_create(CLOCK_MONOTONIC, 0);
		if (tfd < 0 || timerfd_settime(tfd, 0, &tick, NULL))
			die("timerfd");
		watch(ep, tfd, EPOLLIN, tag(T_TICK, 0, tfd));
	}
	/* last: once this port listens, every flow's port is ready */
	i = listen_on(atoi(signal_port), 0);
	watch(ep, i, EPOLLIN, tag(T_SIGNAL_LISTEN, 0, i));

	while (!stop) {
		int n = epoll_wait(ep, evs, 64, -1);

		nwakes++;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		for (i = 0; i < n; i++) {
			uint64_t d = evs[i].data.u64;
			int fd = (int)(uint32_t)d, flow = (int)(d >> 32 & 0xffffff);
			int lowat = RCV_LOWAT;
			uint64_t ticks;

			switch ((enum tag)(d >> 56)) {
			case T_LISTEN:
			case T_SIGNAL_LISTEN:
				fd = accept4(fd, NULL, NULL, SOCK_NONBLOCK);
				if (fd < 0)
					break;
				if ((enum tag)(d >> 56) == T_SIGNAL_LISTEN) {
					close(fd);
					break;
				}
				if (flows[flow].window) {
					/* unread data never holds more than half the window */
					if (lowat > flows[flow].window / 2)
						lowat = flows[flow].window / 2;
					flows[flow].conn = fd;
				}
				setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
				watch(ep, fd, EPOLLIN, tag(T_DATA, flow, fd));
				drain_tcp(ep, &flows[flow], fd);
				break;
			case T_DATA:
				drain_tcp(ep, &flows[flow], fd);
				break;
			case T_TICK:
				if (read(fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
					die("timerfd read");
				drain_udp();
				break;
			case T_SIG:
				stop = 1;
				break;
			}
		}
	}
	drain_udp();
	for (i = 0; i < nflows; i++) {
		struct flow *fl = &flows[i];

		printf("flow %d %s port %d bytes %" PRIu64 " datagrams %" PRIu64, i,
		       names[fl->kind], fl->port, fl->bytes, fl->dgrams);
		/* the clamp at the end (-1: never connected) */
		if (fl->window && fl->conn >= 0)
			read_clamp(fl);
		if (fl->window)
			printf(" window %d clamp %d reclamped %ld", fl->window, fl->clamp_end,
			       fl->reclamps);
		printf("\n");
	}
	printf("wakeups %ld tcp_reads %ld recvmmsg %ld\n", nwakes, nreads, nrecvmmsg);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "send"))
		return do_send(argv[2], argv[3], argc == 5 ? argv[4] : "io_uring");
	if (argc == 4 && !strcmp(argv[1], "recv"))
		return do_recv(argv[2], argv[3]);
	fprintf(stderr, "usage: bgtraffic send DEST SCHEDULE [io_uring|sleep] | bgtraffic recv SCHEDULE SIGNAL_PORT\n");
	return 2;
}
