/*
 * spin_sleep.so: an LD_PRELOAD library for iperf3 under virtual time
 * (mptlab, clock: virtual).  Built on the host by mptlab.workloads.bulk.prepare.
 *
 * Why: iperf3 3.12 (Debian 12) keeps its data socket in select()'s write set
 * after it has written every byte of a byte-limited test (-n) and calls
 * select() again at once, without writing, until the receiver says the test
 * is over: in a download (-R) the server spins for as long as the last
 * written bytes take to arrive (send buffer plus flight).  In real time that
 * spin lasts that long and no more.  Under UML's time-travel=inf-cpu, guest
 * time advances only while the guest idles (plus 256 ns per clock read), so
 * the spin hardly lets time advance: one iteration (select + 3 clock reads)
 * moved guest time by ~4.6 us and cost 4 guest system calls (~15-70 us of host
 * CPU each).  Measured: a 4 MiB two-path MPTCP download spun 72,513 times
 * over a 0.33 s tail, 15 s of host CPU instead of 1.7 s in real time.
 *
 * What it does: when select() reported descriptors writable and the program
 * has written to none of them by the time it calls select() again with one of
 * them in its write set, it sleeps SPIN_SLEEP_NS first.  A sleeping guest is
 * idle, so guest time jumps by that much at no host cost.  A program that
 * writes when told it can is never delayed; a program that ignores
 * writability reacts to its other descriptors (iperf3: the control socket's
 * TEST_END) up to SPIN_SLEEP_NS later.  iperf3 is single-threaded; so is this.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SPIN_SLEEP_NS 1000000L /* 1 ms: the tail of a transfer is 100s of ms */

static fd_set reported; /* writable per the last select(), not written to since */
static int any_reported;

static void wrote(int fd)
{
	if (any_reported && fd >= 0 && fd < FD_SETSIZE && FD_ISSET(fd, &reported)) {
		FD_ZERO(&reported);
		any_reported = 0;
	}
}

#define NEXT(name) \
	static __typeof__(name) *real; \
	if (!real) \
		real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

int select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds, struct timeval *tv)
{
	NEXT(select);
	int fd, n;

	if (any_reported && wfds) {
		for (fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
			if (FD_ISSET(fd, &reported) && FD_ISSET(fd, wfds)) {
				struct timespec ts = { 0, SPIN_SLEEP_NS };

				nanosleep(&ts, NULL);
				break;
			}
		}
	}
	n = real(nfds, rfds, wfds, efds, tv);
	FD_ZERO(&reported);
	any_reported = 0;
	if (n > 0 && wfds) {
		for (fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
			if (FD_ISSET(fd, wfds)) {
				FD_SET(fd, &reported);
				any_reported = 1;
			}
		}
	}
	return n;
}

ssize_t write(int fd, const void *buf, size_t count)
{
	NEXT(write);
	wrote(fd);
	return real(fd, buf, count);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	NEXT(writev);
	wrote(fd);
	return real(fd, iov, iovcnt);
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	NEXT(send);
	wrote(fd);
	return real(fd, buf, len, flags);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
	       socklen_t tolen)
{
	NEXT(sendto);
	wrote(fd);
	return real(fd, buf, len, flags, to, tolen);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	NEXT(sendmsg);
	wrote(fd);
	return real(fd, msg, flags);
}

ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	NEXT(sendfile);
	wrote(out_fd);
	return real(out_fd, in_fd, offset, count);
}
