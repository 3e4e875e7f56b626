// SPDX-License-Identifier: GPL-2.0
/*
 * fpstate: do a process's SSE/AVX registers survive what a UML guest does to
 * them?  Kernel patch 0008 skips writing a process's FP registers back to
 * its host process when the host process already holds them; this checks
 * the cases where they must be written after all.
 *
 * Two threads of one process (one host process under UML) each load their
 * own pattern into xmm0-15 (ymm0-15 where the CPU has AVX), make a system
 * call from inside the same asm block and compare the registers afterwards:
 * sched_yield() switches to the other thread in between, close(-1) fails
 * (under UML time-travel a failing call advances guest time by 1 us, so
 * the interval timer fires), and the SIGALRM handler loads other values
 * into every register, which sigreturn must undo.
 *
 *   fpstate ROUNDS [US]   exit 0 and "ok ..." when every round kept its values;
 *                         SIGALRM every US microseconds (default 1000)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>

#define NREG 16
#define WIDTH 32

static int have_avx;
static volatile long signals;

#define LOAD(op, n, off) op " " #off "(%[in]), %%xmm" #n "\n\t"
#define STORE(op, n, off) op " %%xmm" #n ", " #off "(%[out])\n\t"
#define LOADY(n, off) "vmovdqu " #off "(%[in]), %%ymm" #n "\n\t"
#define STOREY(n, off) "vmovdqu %%ymm" #n ", " #off "(%[out])\n\t"

#define CLOBBERS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", \
	"xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", \
	"xmm15", "rcx", "r11", "memory"

/* load in[], system call nr(arg), store to out[]: 16-byte registers */
static long call_sse(const unsigned char *in, unsigned char *out, long nr,
		     long arg)
{
	asm volatile(LOAD("movdqu", 0, 0) LOAD("movdqu", 1, 32)
		     LOAD("movdqu", 2, 64) LOAD("movdqu", 3, 96)
		     LOAD("movdqu", 4, 128) LOAD("movdqu", 5, 160)
		     LOAD("movdqu", 6, 192) LOAD("movdqu", 7, 224)
		     LOAD("movdqu", 8, 256) LOAD("movdqu", 9, 288)
		     LOAD("movdqu", 10, 320) LOAD("movdqu", 11, 352)
		     LOAD("movdqu", 12, 384) LOAD("movdqu", 13, 416)
		     LOAD("movdqu", 14, 448) LOAD("movdqu", 15, 480)
		     "syscall\n\t"
		     STORE("movdqu", 0, 0) STORE("movdqu", 1, 32)
		     STORE("movdqu", 2, 64) STORE("movdqu", 3, 96)
		     STORE("movdqu", 4, 128) STORE("movdqu", 5, 160)
		     STORE("movdqu", 6, 192) STORE("movdqu", 7, 224)
		     STORE("movdqu", 8, 256) STORE("movdqu", 9, 288)
		     STORE("movdqu", 10, 320) STORE("movdqu", 11, 352)
		     STORE("movdqu", 12, 384) STORE("movdqu", 13, 416)
		     STORE("movdqu", 14, 448) STORE("movdqu", 15, 480)
		     : "+a"(nr)
		     : [in] "r"(in), [out] "r"(out), "D"(arg)
		     : CLOBBERS);
	return nr;
}

/* the same with 32-byte registers (the upper halves are AVX state) */
__attribute__((target("avx")))
static long call_avx(const unsigned char *in, unsigned char *out, long nr,
		     long arg)
{
	asm volatile(LOADY(0, 0) LOADY(1, 32) LOADY(2, 64) LOADY(3, 96)
		     LOADY(4, 128) LOADY(5, 160) LOADY(6, 192) LOADY(7, 224)
		     LOADY(8, 256) LOADY(9, 288) LOADY(10, 320) LOADY(11, 352)
		     LOADY(12, 384) LOADY(13, 416) LOADY(14, 448) LOADY(15, 480)
		     "syscall\n\t"
		     STOREY(0, 0) STOREY(1, 32) STOREY(2, 64) STOREY(3, 96)
		     STOREY(4, 128) STOREY(5, 160) STOREY(6, 192) STOREY(7, 224)
		     STOREY(8, 256) STOREY(9, 288) STOREY(10, 320)
		     STOREY(11, 352) STOREY(12, 384) STOREY(13, 416)
		     STOREY(14, 448) STOREY(15, 480)
		     "vzeroupper\n\t"
		     : "+a"(nr)
		     : [in] "r"(in), [out] "r"(out), "D"(arg)
		     : CLOBBERS);
	return nr;
}

static void on_alarm(int sig)
{
	unsigned char junk[NREG * WIDTH], sink[NREG * WIDTH];

	(void)sig;
	memset(junk, 0xa5, sizeof(junk));
	/* getppid between loads and stores: the handler's own values */
	if (have_avx)
		call_avx(junk, sink, SYS_getppid, 0);
	else
		call_sse(junk, sink, SYS_getppid, 0);
	signals++;
}

struct worker {
	int seed;
	long rounds;
	long bad;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	int width = have_avx ? WIDTH : 16;
	unsigned char in[NREG * WIDTH], out[NREG * WIDTH];
	long i;
	int r, b;

	for (i = 0; i < w->rounds; i++) {
		for (b = 0; b < (int)sizeof(in); b++)
			in[b] = (unsigned char)(w->seed * 131 + i * 7 + b);
		memset(out, 0, sizeof(out));
		if (have_avx)
			call_avx(in, out, i % 2 ? SYS_sched_yield : SYS_close, -1);
		else
			call_sse(in, out, i % 2 ? SYS_sched_yield : SYS_close, -1);
		for (r = 0; r < NREG; r++)
			if (memcmp(in + r * WIDTH, out + r * WIDTH, width))
				w->bad++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker w[2] = { { 1, 0, 0 }, { 2, 0, 0 } };
	struct itimerval every = { { 0, 1000 }, { 0, 1000 } };
	pthread_t t;
	long rounds = argc > 1 ? atol(argv[1]) : 20000;

	if (argc > 2)
		every.it_value.tv_usec = every.it_interval.tv_usec = atol(argv[2]);

	__builtin_cpu_init();
	have_avx = __builtin_cpu_supports("avx");
	w[0].rounds = w[1].rounds = rounds;
	signal(SIGALRM, on_alarm);
	setitimer(ITIMER_REAL, &every, NULL);
	pthread_create(&t, NULL, work, &w[1]);
	work(&w[0]);
	pthread_join(t, NULL);
	setitimer(ITIMER_REAL, &(struct itimerval){ 0 }, NULL);
	printf("%s %s rounds=%ld signals=%ld bad=%ld\n",
	       w[0].bad + w[1].bad ? "FAILED" : "ok", have_avx ? "avx" : "sse",
	       2 * rounds, signals, w[0].bad + w[1].bad);
	return w[0].bad + w[1].bad ? 1 : 0;
}
