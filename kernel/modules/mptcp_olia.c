// SPDX-License-Identifier: GPL-2.0
/* Congestion control "olia": the Opportunistic Linked Increases Algorithm
 * (Khalili, Gast, Popovic, Le Boudec, "MPTCP is not Pareto-optimal",
 * CoNEXT 2012 / IEEE/ACM ToN 2013), coupled over an MPTCP connection.
 *
 * Slow start and the halving on loss are per subflow, as in Reno.  In
 * congestion avoidance each packet acknowledged on path r grows w_r by
 *
 *	(w_r / rtt_r^2) / (sum_p w_p / rtt_p)^2  +  alpha_r / w_r
 *
 * with n paths, l_r = max(l1_r, l2_r) the data acknowledged between the
 * last two losses of path r or since its last loss, B the paths with the
 * largest l_r / rtt_r^2 (the best paths), M the paths with the largest
 * window and C = B \ M (best paths that do not have the largest window):
 *
 *	alpha_r =  1 / (n |C|)	if r is in C,
 *		  -1 / (n |M|)	if r is in M and C is not empty,
 *		   0		otherwise,
 *
 * so the window moves from the largest-window paths to the best ones
 * (the thesis's Eq. 2.1-2.3 in notes-ferlin-thesis.md 3.2).  l is counted
 * in packets, as the windows are.  The fraction of a packet an ACK adds
 * (or, with a negative alpha, takes) is carried from ACK to ACK; the
 * window stays at 2 packets or more.  A socket that is not an MPTCP
 * subflow, or has no RTT sample yet, behaves as Reno.
 *
 * The floor of ssthresh on a loss is the parameter min_ssthresh once the
 * connection has two subflows or more: 2 by default, as Linux's Reno and
 * MPTCP v0.8x's OLIA; 1 is the specification's, which the thesis (seed
 * 002, Ch. 5, Remark 1) used for its figures, finding that Linux's 2 made
 * OLIA enter slow start more often and so more aggressive.
 */
#include <linux/module.h>
#include "cc_util.h"

static uint min_ssthresh = 2;
module_param(min_ssthresh, uint, 0644);
MODULE_PARM_DESC(min_ssthresh, "ssthresh floor with 2+ subflows: 2 (Linux, default) or 1 (the specification)");

struct olia {
	struct cc_link link;
	u64	l1;	/* packets acknowledged between the last two losses */
	u64	l2;	/* ... since the last loss */
	s64	acc;	/* window fraction carried, CC_ONE units */
};

static void olia_init(struct sock *sk)
{
	struct olia *ca = inet_csk_ca(sk);

	cc_link_join(sk, &ca->link);
}

static void olia_release(struct sock *sk)
{
	cc_link_leave(sk, inet_csk_ca(sk));
}

/* alpha_r / w_r, CC_ONE units */
static s64 olia_alpha_term(const struct cc_view *v)
{
	int k, in_c = 0, in_m = 0;
	bool self_c = false, self_m = false;
	u128 key, best = 0;
	u64 wmax = 0;

	for (k = 0; k < v->n; k++) {
		key = (u128)max(v->priv[k][0], v->priv[k][1]) * v->q[k] * v->q[k];
		best = max(best, key);
		wmax = max(wmax, v->w[k]);
	}
	for (k = 0; k < v->n; k++) {
		bool is_b, is_m = v->w[k] == wmax;

		key = (u128)max(v->priv[k][0], v->priv[k][1]) * v->q[k] * v->q[k];
		is_b = key == best;
		in_m += is_m;
		in_c += is_b && !is_m;
		if (k == v->self) {
			self_m = is_m;
			self_c = is_b && !is_m;
		}
	}
	if (self_c)
		return div64_u64(CC_ONE, (u64)v->n * in_c * v->w[v->self]);
	if (self_m && in_c)
		return -(s64)div64_u64(CC_ONE, (u64)v->n * in_m * v->w[v->self]);
	return 0;
}

static void olia_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct olia *ca = inet_csk_ca(sk);
	struct cc_view v;

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
	cc_window_add(tp, &ca->acc, cc_coupled_term(&v) + olia_alpha_term(&v),
		      acked);
}

static void olia_pkts_acked(struct sock *sk, const struct ack_sample *sample)
{
	struct olia *ca = inet_csk_ca(sk);

	if (sample->pkts_acked > 0)
		ca->l2 += sample->pkts_acked;
}

static void olia_in_ack_event(struct sock *sk, u32 flags)
{
	struct olia *ca = inet_csk_ca(sk);
	u64 priv[MPTCP_CC_PRIV] = { ca->l1, ca->l2 };

	cc_link_publish(sk, &ca->link, priv);
}

static u32 olia_ssthresh(struct sock *sk)
{
	struct olia *ca = inet_csk_ca(sk);
	struct cc_view v;
	u32 floor = 2;

	ca->l1 = ca->l2;
	ca->l2 = 0;
	ca->acc = 0;
	if (min_ssthresh != 2 && cc_view_init(sk, &ca->link, &v) && v.n >= 2)
		floor = max(min_ssthresh, 1U);
	return max(tcp_snd_cwnd(tcp_sk(sk)) >> 1, floor);
}

static struct tcp_congestion_ops olia_ops __read_mostly = {
	.init		= olia_init,
	.release	= olia_release,
	.ssthresh	= olia_ssthresh,
	.cong_avoid	= olia_cong_avoid,
	.pkts_acked	= olia_pkts_acked,
	.in_ack_event	= olia_in_ack_event,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.flags		= TCP_CONG_NON_RESTRICTED,
	.owner		= THIS_MODULE,
	.name		= "olia",
};

static int __init olia_register(void)
{
	BUILD_BUG_ON(sizeof(struct olia) > ICSK_CA_PRIV_SIZE);
	return tcp_register_congestion_control(&olia_ops);
}

static void __exit olia_unregister(void)
{
	tcp_unregister_congestion_control(&olia_ops);
}

module_init(olia_register);
module_exit(olia_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP coupled congestion control: OLIA");
