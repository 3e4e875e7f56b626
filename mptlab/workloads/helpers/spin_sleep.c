/*
 * spin_sleep.so: an LD_PRELOAD library for iperf3 under virtual time
 * (mptlab, clock: virtual).  Built on the host by mptlab.workloads.bulk.prepare.
 *
 * Why: iperf3 3.12 (Debian 12) busy-loops on select() in two places, calling
 * it again and again without doing any I/O:
 *  - the sender keeps its data socket in select()'s write set after it has
 *    written every byte of a byte-limited test (-n), until the receiver says
 *    the test is over: in a download (-R) the server spins for as long as the
 *    last written bytes take to arrive (send buffer plus flight);
 *  - the receiver keeps the data socket in its read set after the sender has
 *    closed it: the socket is readable (end of file) at once, every time, until
 *    the sender's results come over the control connection, which behind a
 *    bufferbloated 3G queue (blest-3g-wlan, tcp-3g) takes seconds.
 * In real time such a spin lasts as long as it lasts and no more.  Under UML's
 * time-travel=inf-cpu, guest time advances only while the guest idles (plus
 * 256 ns per clock read), so a spin hardly lets time advance: one iteration
 * (select + 3 clock reads) moved guest time by ~4.6 us and cost 4 guest
 * system calls (~15-70 us of host CPU each).  Measured: a 4 MiB two-path MPTCP
 * download spun 72,513 times over a 0.33 s tail, 36 s of host CPU instead of
 * 2.4 s in real time; a tcp-3g run of blest-3g-wlan --quick spun for over 10
 * minutes of wall time in the receiver, guest time frozen at 19.6 s.
 *
 * What it does: a select() that came back at once (within SPIN_FAST_NS of
 * guest time) and was followed by no productive I/O (no write of any kind, no
 * read that returned data) before the next select() makes that next select()
 * sleep first: SPIN_SLEEP_NS, doubled on each further round of the same spin
 * up to SPIN_SLEEP_MAX_NS.  A sleeping guest is idle, so guest time jumps by
 * that much at no host cost.  A program that does I/O between its select()s,
 * or whose select() waited, is never delayed; a spinning one reacts to what
 * it waits for (iperf3: the control socket's messages) up to SPIN_SLEEP_MAX_NS
 * later.  iperf3 is single-threaded; so is this.  All of it only under
 * virtual time (MPTLAB_SPIN_VIRTUAL=1).
 *
 * Since issue 26 it does two more things (and the doubling above), each measured on the headline run
 * (blest-3g-wlan, minrtt_pr, 64 MiB download, no background, no traces; the
 * guest's system calls counted with strace -c in the guest, its ptrace stops
 * with perf on the host): iperf3's receiver made 141,000 clock reads, 54,000
 * reads and 28,000 select()s, its sender 70,000 clock reads and 14,000
 * select()s: 310,000 of the run's 374,000 ptrace stops, each ~12 us of
 * host CPU.
 *
 * Clock reads between waits (virtual time only, MPTLAB_SPIN_VIRTUAL=1): under
 * time-travel=inf-cpu guest time does not move while a process computes,
 * only while the guest idles (and by 256 ns per clock read, an artefact of
 * UML's time travel).  So a clock read that follows another with no call in
 * between that could have waited returns what the first one returned, and
 * saves the round trip: iperf3 reads CLOCK_MONOTONIC 5 times per select()
 * (timers, interval bookkeeping).  Every wrapper here that can wait, or
 * does I/O, starts a new epoch; a clock read in a new epoch reads the host.
 * Only CLOCK_MONOTONIC, CLOCK_REALTIME and gettimeofday() are cached; the
 * values a program sees differ from uncached ones by the 256 ns per read
 * that UML would have added, no more.  A call that can wait but is not
 * wrapped here (poll(), accept(), ...) would leave a stale value: iperf3
 * 3.12 waits only in select() and in blocking reads of its control socket,
 * both wrapped.
 *
 * Receive low-water mark (MPTLAB_RCVLOWAT=BYTES, under either clock, set by
 * the bulk workload's rcvlowat): the first large read (>= 64 KiB asked for)
 * of a non-blocking stream socket sets SO_RCVLOWAT on it, so select() says
 * the socket is readable once that many bytes are there (or at end of file,
 * or when the kernel must free memory), not at every segment: iperf3's
 * receiver woke up per 2.4 KB on average.  The control connection is
 * blocking and read in small pieces, so it is never touched (a low-water
 * mark there would hold back its 1-byte state messages).  What it changes in
 * the results is measured in docs/benchmarks.md ("Per-run host CPU"): the
 * reads are larger and fewer; the kernel acks each subflow's data as
 * before (MPTCP keeps the subflows' own low-water mark at 1 and acks at
 * once while the connection is below its mark, net/mptcp/subflow.c).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SPIN_SLEEP_NS 1000000L /* 1 ms: a spin lasts 100s of ms to seconds */
/*
 * ... and doubles while the spin goes on, up to 16 ms: iperf3's sender spun
 * 17,000 times (1 ms each) at the end of a 64 MiB download behind the 3G
 * queue, 3 system calls each, ~0.6 s of host CPU; with the doubling a few
 * hundred times.  It answers its control messages up to 16 ms later, after
 * it has written every byte.
 */
#define SPIN_SLEEP_MAX_NS 16000000L
#define SPIN_FAST_NS 20000L /* a select() that came back within 20 us did not wait */
#define LOWAT_MIN_READ (64 * 1024) /* iperf3 reads its data sockets 128 KiB at a time */
#define LOWAT_FDS 1024
#define LOWAT_SET 1
#define LOWAT_NOT 2
#define LOWAT_WAIT_MAX_US 1000000L /* a select() on a marked socket waits at most 1 s */

static int idle; /* the last select() came back at once and no I/O followed */
static long spin_ns = SPIN_SLEEP_NS; /* the next sleep of a spin */
static int virtual_time = -1; /* MPTLAB_SPIN_VIRTUAL=1; -1: not read yet */
static int rcvlowat = -1; /* MPTLAB_RCVLOWAT; 0: off; -1: not read yet */
/* per fd: LOWAT_SET, LOWAT_NOT (not a stream socket), or 0 (not looked at) */
static unsigned char lowat_state[LOWAT_FDS];
/* per fd: 1 once a call on it said EAGAIN, so its calls never wait */
static unsigned char nonblocking[LOWAT_FDS];
/* bumped after every wrapped call: a clock read in a new epoch reads the host */
static unsigned long epoch = 1;

struct cached_clock {
	unsigned long epoch;
	struct timespec ts;
};

static struct cached_clock mono_clock, wall_clock;

#define NEXT(name) \
	static __typeof__(name) *real; \
	if (!real) \
		real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

static int is_virtual(void)
{
	if (virtual_time < 0) {
		const char *v = getenv("MPTLAB_SPIN_VIRTUAL");

		virtual_time = v && v[0] == '1';
	}
	return virtual_time;
}

static int host_clock(clockid_t id, struct timespec *ts)
{
	NEXT(clock_gettime);
	return real(id, ts);
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
	struct cached_clock *c = NULL;

	if (id == CLOCK_MONOTONIC)
		c = &mono_clock;
	else if (id == CLOCK_REALTIME)
		c = &wall_clock;
	if (!c || !is_virtual())
		return host_clock(id, ts);
	if (c->epoch != epoch) {
		int err = host_clock(id, &c->ts);

		if (err)
			return err;
		c->epoch = epoch;
	}
	*ts = c->ts;
	return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	struct timespec ts;

	if (tz || !is_virtual()) {
		NEXT(gettimeofday);
		return real(tv, tz);
	}
	if (clock_gettime(CLOCK_REALTIME, &ts))
		return -1;
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

/* After a call that may have waited: the next clock read is fresh. */
static long waited(long ret)
{
	epoch++;
	return ret;
}

/*
 * After a call on fd: a call that said EAGAIN did not wait, and marks fd as
 * one whose calls never wait (non-blocking); any other call on an fd not
 * known to be non-blocking may have waited.  iperf3's data sockets are
 * non-blocking: their reads and writes keep the clock's epoch.
 */
static long on_fd(int fd, long ret)
{
	int again = ret < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
	int known = fd >= 0 && fd < LOWAT_FDS;

	if (again && known)
		nonblocking[fd] = 1;
	if (again || (known && nonblocking[fd]))
		return ret;
	return waited(ret);
}

/*
 * The sockets with a low-water mark that the caller waits to read: select()
 * reports them readable whenever it comes back, so that bytes below the mark
 * are read at the caller's next timer tick (iperf3: every 0.1 s) and never
 * sit there: at the end of a byte-limited test the sender waits for the
 * receiver to have read every byte, and the last bytes are below the mark
 * (measured: without this, iperf3 waited 120 s and failed with "idle
 * timeout for receiving data").  A read of such a socket with nothing in it
 * says EAGAIN, which iperf3 takes as "nothing yet".
 */
static int lowat_wanted(int nfds, const fd_set *rfds, fd_set *wanted)
{
	int fd, any = 0;

	FD_ZERO(wanted);
	if (!rfds || rcvlowat <= 0)
		return 0;
	for (fd = 0; fd < nfds && fd < LOWAT_FDS; fd++)
		if (lowat_state[fd] == LOWAT_SET && FD_ISSET(fd, rfds)) {
			FD_SET(fd, wanted);
			any = 1;
		}
	return any;
}

static int lowat_ready(int n, int nfds, fd_set *rfds, const fd_set *wanted)
{
	int fd;

	for (fd = 0; n >= 0 && fd < nfds && fd < LOWAT_FDS; fd++)
		if (FD_ISSET(fd, wanted) && !FD_ISSET(fd, rfds)) {
			FD_SET(fd, rfds);
			n++;
		}
	return n;
}

int select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds, struct timeval *tv)
{
	NEXT(select);
	struct timeval cap = { 0, LOWAT_WAIT_MAX_US }, *wait = tv;
	struct timespec t0, t1;
	fd_set wanted;
	int n, marked = lowat_wanted(nfds, rfds, &wanted);

	if (marked && (!tv || tv->tv_sec * 1000000L + tv->tv_usec > LOWAT_WAIT_MAX_US))
		wait = &cap;
	if (!is_virtual()) {
		n = real(nfds, rfds, wfds, efds, wait);
		return marked ? lowat_ready(n, nfds, rfds, &wanted) : n;
	}
	if (idle) {
		struct timespec ts = { 0, spin_ns };

		nanosleep(&ts, NULL);
		if (spin_ns < SPIN_SLEEP_MAX_NS)
			spin_ns *= 2;
	} else {
		spin_ns = SPIN_SLEEP_NS;
	}
	/* in the clock's epoch: no time passed since the value it holds */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	n = real(nfds, rfds, wfds, efds, wait);
	waited(0);
	clock_gettime(CLOCK_MONOTONIC, &t1); /* fresh; iperf3's next reads get it */
	idle = n >= 0 && (t1.tv_sec - t0.tv_sec) * 1000000000LL + t1.tv_nsec - t0.tv_nsec <
			  SPIN_FAST_NS;
	return marked ? lowat_ready(n, nfds, rfds, &wanted) : n;
}

int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	NEXT(poll);
	return waited(real(fds, nfds, timeout));
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
	NEXT(nanosleep);
	return waited(real(req, rem));
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	NEXT(accept);
	return waited(real(fd, addr, len));
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	NEXT(connect);
	return waited(real(fd, addr, len));
}

int close(int fd)
{
	NEXT(close);
	if (fd >= 0 && fd < LOWAT_FDS)
		lowat_state[fd] = nonblocking[fd] = 0;
	return waited(real(fd));
}

/* The low-water mark on a non-blocking stream socket read in large pieces. */
static void lowat(int fd, size_t count)
{
	socklen_t len = sizeof(int);
	int type, flags;

	if (rcvlowat < 0) {
		const char *v = getenv("MPTLAB_RCVLOWAT");

		rcvlowat = v ? atoi(v) : 0;
	}
	if (rcvlowat <= 0 || count < LOWAT_MIN_READ || fd < 0 || fd >= LOWAT_FDS ||
	    lowat_state[fd])
		return;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || !(flags & O_NONBLOCK))
		return; /* blocking: asked again on its next large read */
	lowat_state[fd] = LOWAT_NOT;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) || type != SOCK_STREAM)
		return;
	if (!setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &rcvlowat, sizeof(rcvlowat)))
		lowat_state[fd] = LOWAT_SET;
}

static ssize_t got(int fd, ssize_t n)
{
	if (n > 0)
		idle = 0;
	return on_fd(fd, n);
}

ssize_t read(int fd, void *buf, size_t count)
{
	NEXT(read);
	lowat(fd, count);
	return got(fd, real(fd, buf, count));
}

ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	NEXT(readv);
	return got(fd, real(fd, iov, iovcnt));
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	NEXT(recv);
	lowat(fd, len);
	return got(fd, real(fd, buf, len, flags));
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
		 socklen_t *fromlen)
{
	NEXT(recvfrom);
	lowat(fd, len);
	return got(fd, real(fd, buf, len, flags, from, fromlen));
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	NEXT(recvmsg);
	return got(fd, real(fd, msg, flags));
}

static ssize_t put(int fd, ssize_t n)
{
	idle = 0;
	return on_fd(fd, n);
}

ssize_t write(int fd, const void *buf, size_t count)
{
	NEXT(write);
	return put(fd, real(fd, buf, count));
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	NEXT(writev);
	return put(fd, real(fd, iov, iovcnt));
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	NEXT(send);
	return put(fd, real(fd, buf, len, flags));
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
	       socklen_t tolen)
{
	NEXT(sendto);
	return put(fd, real(fd, buf, len, flags, to, tolen));
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	NEXT(sendmsg);
	return put(fd, real(fd, msg, flags));
}

ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	NEXT(sendfile);
	return put(out_fd, real(out_fd, in_fd, offset, count));
}
