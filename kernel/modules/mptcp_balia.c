// SPDX-License-Identifier: GPL-2.0
/* Congestion control "balia": Balanced Linked Adaptation (Peng, Walid,
 * Hwang, Low, "Multipath TCP: analysis, design and implementation",
 * IEEE/ACM ToN 2016), coupled over an MPTCP connection.
 *
 * With x_k = w_k / rtt_k the rate of path k and alpha_r = max_k x_k / x_r:
 *
 *	per packet acknowledged on r:	w_r += x_r / (rtt_r (sum_k x_k)^2)
 *					       * (1 + alpha_r) / 2
 *					       * (4 + alpha_r) / 5
 *	on a loss on r:			w_r -= w_r / 2 * min(alpha_r, 1.5)
 *
 * x_r / (rtt_r (sum_k x_k)^2) is the same coupled term as OLIA's
 * (cc_util.h); alpha is kept in 1/65536.  One path (alpha = 1) is Reno.
 * Slow start is per subflow.  The fraction of a packet an ACK adds is
 * carried from ACK to ACK.  A socket that is not an MPTCP subflow, or has
 * no RTT sample yet, behaves as Reno.  The floor of ssthresh with two
 * subflows or more is the parameter min_ssthresh: 2 by default (Linux's),
 * 1 the specification's (as mptcp_olia.c).
 */
#include <linux/module.h>
#include "cc_util.h"

#define A_ONE	(1U << 16)

static uint min_ssthresh = 2;
module_param(min_ssthresh, uint, 0644);
MODULE_PARM_DESC(min_ssthresh, "ssthresh floor with 2+ subflows: 2 (Linux, default) or 1 (the specification)");

struct balia {
	struct cc_link link;
	s64	acc;	/* window fraction carried, CC_ONE units */
};

static void balia_init(struct sock *sk)
{
	struct balia *ca = inet_csk_ca(sk);

	cc_link_join(sk, &ca->link);
}

static void balia_release(struct sock *sk)
{
	cc_link_leave(sk, inet_csk_ca(sk));
}

/* alpha_r in A_ONE units; the rates x_k are proportional to w_k * q_k */
static u64 balia_alpha(const struct cc_view *v)
{
	u64 xmax = 0;
	int k;

	for (k = 0; k < v->n; k++)
		xmax = max(xmax, v->w[k] * v->q[k]);
	return div64_u64(xmax * A_ONE, v->w[v->self] * v->q[v->self]);
}

static void balia_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct balia *ca = inet_csk_ca(sk);
	struct cc_view v;
	u64 a, factor;

	if (!tcp_is_cwnd_limited(sk))
		return;
	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	if (!cc_view_init(sk, &ca->link, &v) || v.n < 2) {
		tcp_cong_avoid_ai(tp, tcp_snd_cwnd(tp), acked);
		return;
	}
	a = balia_alpha(&v);
	/* (1 + a) (4 + a) / 10, A_ONE units */
	factor = div64_u64((A_ONE + a) * (4ULL * A_ONE + a), 10ULL * A_ONE);
	cc_window_add(tp, &ca->acc,
		      mul_u64_u64_div_u64(cc_coupled_term(&v), factor, A_ONE),
		      acked);
}

static u32 balia_ssthresh(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct balia *ca = inet_csk_ca(sk);
	u32 w = tcp_snd_cwnd(tp);
	struct cc_view v;
	u64 a;

	ca->acc = 0;
	if (!cc_view_init(sk, &ca->link, &v) || v.n < 2)
		return tcp_reno_ssthresh(sk);
	a = min_t(u64, balia_alpha(&v), 3 * A_ONE / 2);
	return max_t(u32, w - (u32)div64_u64((u64)w * a, 2 * A_ONE),
		     max(min_ssthresh, 1U));
}

static void balia_in_ack_event(struct sock *sk, u32 flags)
{
	cc_link_publish(sk, inet_csk_ca(sk), NULL);
}

static struct tcp_congestion_ops balia_ops __read_mostly = {
	.init		= balia_init,
	.release	= balia_release,
	.ssthresh	= balia_ssthresh,
	.cong_avoid	= balia_cong_avoid,
	.in_ack_event	= balia_in_ack_event,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.flags		= TCP_CONG_NON_RESTRICTED,
	.owner		= THIS_MODULE,
	.name		= "balia",
};

static int __init balia_register(void)
{
	BUILD_BUG_ON(sizeof(struct balia) > ICSK_CA_PRIV_SIZE);
	return tcp_register_congestion_control(&balia_ops);
}

static void __exit balia_unregister(void)
{
	tcp_unregister_congestion_control(&balia_ops);
}

module_init(balia_register);
module_exit(balia_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP coupled congestion control: BALIA");
