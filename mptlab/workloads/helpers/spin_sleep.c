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
 * sleep SPIN_SLEEP_NS first.  A sleeping guest is idle, so guest time jumps by
 * that much at no host cost.  A program that does I/O between its select()s,
 * or whose select() waited, is never delayed; a spinning one reacts to what
 * it waits for (iperf3: the control socket's messages) up to SPIN_SLEEP_NS
 * later.  iperf3 is single-threaded; so is this.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SPIN_SLEEP_NS 1000000L /* 1 ms: a spin lasts 100s of ms to seconds */
#define SPIN_FAST_NS 20000L /* a select() that came back within 20 us did not wait */

static int idle; /* the last select() came back at once and no I/O followed */

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#define NEXT(name) \
	static __typeof__(name) *real; \
	if (!real) \
		real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

int select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds, struct timeval *tv)
{
	NEXT(select);
	long long start;
	int n;

	if (idle) {
		struct timespec ts = { 0, SPIN_SLEEP_NS };

		nanosleep(&ts, NULL);
	}
	start = now_ns();
	n = real(nfds, rfds, wfds, efds, tv);
	idle = n >= 0 && now_ns() - start < SPIN_FAST_NS;
	return n;
}

static ssize_t got(ssize_t n)
{
	if (n > 0)
		idle = 0;
	return n;
}

ssize_t read(int fd, void *buf, size_t count)
{
	NEXT(read);
	return got(real(fd, buf, count));
}

ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	NEXT(readv);
	return got(real(fd, iov, iovcnt));
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	NEXT(recv);
	return got(real(fd, buf, len, flags));
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
		 socklen_t *fromlen)
{
	NEXT(recvfrom);
	return got(real(fd, buf, len, flags, from, fromlen));
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	NEXT(recvmsg);
	return got(real(fd, msg, flags));
}

ssize_t write(int fd, const void *buf, size_t count)
{
	NEXT(write);
	idle = 0;
	return real(fd, buf, count);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	NEXT(writev);
	idle = 0;
	return real(fd, iov, iovcnt);
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	NEXT(send);
	idle = 0;
	return real(fd, buf, len, flags);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
	       socklen_t tolen)
{
	NEXT(sendto);
	idle = 0;
	return real(fd, buf, len, flags, to, tolen);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	NEXT(sendmsg);
	idle = 0;
	return real(fd, msg, flags);
}

ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	NEXT(sendfile);
	idle = 0;
	return real(out_fd, in_fd, offset, count);
}
