// SPDX-License-Identifier: GPL-2.0
/* Congestion control "wvegas": weighted Vegas (Cao, Xu, Fu, "Delay-based
 * congestion control for multipath TCP", ICNP 2012), coupled over an
 * MPTCP connection.
 *
 * Each subflow runs Vegas once per round trip: with baseRTT_r its smallest
 * RTT sample and rtt_r the smallest sample of the round just ended,
 *
 *	diff_r = w_r * (rtt_r - baseRTT_r) / rtt_r
 *
 * estimates the packets the subflow keeps queued in the network.  Vegas
 * keeps diff between two fixed thresholds; wVegas gives the connection one
 * budget, total_alpha packets, and splits it over the subflows by their
 * share of the connection's rate, weight_r = x_r / sum_k x_k with
 * x_k = w_k / rtt_k, so alpha_r = weight_r * total_alpha.  In congestion
 * avoidance a subflow grows by one packet per round while diff_r < alpha_r
 * and shrinks by one while diff_r > alpha_r: a congested path's rate share
 * and its budget shrink together, and traffic shifts to the others.  Slow
 * start ends once diff_r exceeds gamma packets (Vegas's rule).  A loss
 * halves the window as in Reno.
 *
 * Choices the paper leaves open or that differ from it: total_alpha = 10
 * packets and gamma = 1 (module parameters); alpha_r is at least one
 * packet; a round with fewer than two RTT samples does nothing in
 * congestion avoidance; the paper's extra back-off when a queue grows
 * beyond the base RTT is not implemented.  A socket that is not an MPTCP
 * subflow, or has no RTT sample yet, behaves as Reno (not as Vegas).
 */
#include <linux/module.h>
#include "cc_util.h"

static unsigned int total_alpha = 10;
module_param(total_alpha, uint, 0644);
MODULE_PARM_DESC(total_alpha, "packets the connection keeps queued in all (default 10)");
static unsigned int gamma = 1;
module_param(gamma, uint, 0644);
MODULE_PARM_DESC(gamma, "queued packets that end slow start (default 1)");

struct wvegas {
	struct cc_link link;
	u32	base_rtt;	/* smallest RTT sample, us */
	u32	round_rtt;	/* smallest RTT sample of this round, us */
	u32	last_rtt;	/* ... of the last complete round (published) */
	u32	samples;	/* RTT samples in this round */
	u32	round_end;	/* the round ends when this is acknowledged */
};

static void wvegas_start_round(struct tcp_sock *tp, struct wvegas *ca)
{
	ca->round_end = tp->snd_nxt;
	ca->round_rtt = U32_MAX;
	ca->samples = 0;
}

static void wvegas_init(struct sock *sk)
{
	struct wvegas *ca = inet_csk_ca(sk);

	ca->base_rtt = U32_MAX;
	wvegas_start_round(tcp_sk(sk), ca);
	cc_link_join(sk, &ca->link);
}

static void wvegas_release(struct sock *sk)
{
	cc_link_leave(sk, inet_csk_ca(sk));
}

static void wvegas_pkts_acked(struct sock *sk, const struct ack_sample *sample)
{
	struct wvegas *ca = inet_csk_ca(sk);
	u32 rtt;

	if (sample->rtt_us <= 0)
		return;
	rtt = sample->rtt_us + 1;	/* never 0 */
	ca->base_rtt = min(ca->base_rtt, rtt);
	ca->round_rtt = min(ca->round_rtt, rtt);
	ca->samples++;
}

/* alpha_r, in 1/256 packets: this subflow's share of total_alpha */
static u64 wvegas_alpha(struct sock *sk, struct wvegas *ca, u32 rtt)
{
	u64 x_self, x_sum = 0;
	struct cc_view v;
	int k;

	if (!cc_view_init(sk, &ca->link, &v) || v.n < 2)
		return (u64)total_alpha << 8;
	/* x_k = w_k / rtt_k, with the round's RTT where a subflow published it */
	for (k = 0; k < v.n; k++) {
		u64 r = k == v.self ? rtt : (v.priv[k][0] ? v.priv[k][0] : v.rtt[k]);

		x_sum += div64_u64(v.w[k] << 20, r);
	}
	x_self = div64_u64(v.w[v.self] << 20, rtt);
	if (!x_sum)
		return (u64)total_alpha << 8;
	return max_t(u64, 1 << 8,
		     div64_u64(x_self * ((u64)total_alpha << 8), x_sum));
}

static void wvegas_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct wvegas *ca = inet_csk_ca(sk);
	u32 cwnd = tcp_snd_cwnd(tp), rtt;
	u64 diff, alpha;

	if (!ca->link.slot1) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if (!after(ack, ca->round_end)) {
		if (tcp_in_slow_start(tp))
			tcp_slow_start(tp, acked);
		return;
	}

	/* a round ended */
	if (ca->samples < 2) {
		if (tcp_in_slow_start(tp))
			tcp_slow_start(tp, acked);
		wvegas_start_round(tp, ca);
		return;
	}
	rtt = ca->round_rtt;
	ca->last_rtt = rtt;
	diff = div64_u64((u64)cwnd * (rtt - ca->base_rtt) << 8, rtt);
	if (tcp_in_slow_start(tp)) {
		if (diff > (u64)gamma << 8)
			tp->snd_ssthresh = min(tp->snd_ssthresh,
					       max(cwnd - 1, 2U));
		else
			tcp_slow_start(tp, acked);
	} else {
		alpha = wvegas_alpha(sk, ca, rtt);
		if (diff > alpha && cwnd > 2) {
			/* ssthresh follows, or the smaller window would count
			 * as slow start and grow straight back
			 */
			tcp_snd_cwnd_set(tp, cwnd - 1);
			tp->snd_ssthresh = min(tp->snd_ssthresh, cwnd - 1);
		} else if (diff < alpha && tcp_is_cwnd_limited(sk))
			tcp_snd_cwnd_set(tp, min(cwnd + 1, tp->snd_cwnd_clamp));
	}
	wvegas_start_round(tp, ca);
}

static void wvegas_in_ack_event(struct sock *sk, u32 flags)
{
	struct wvegas *ca = inet_csk_ca(sk);
	u64 priv[MPTCP_CC_PRIV] = { ca->last_rtt, ca->base_rtt };

	cc_link_publish(sk, &ca->link, priv);
}

static u32 wvegas_ssthresh(struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

static struct tcp_congestion_ops wvegas_ops __read_mostly = {
	.init		= wvegas_init,
	.release	= wvegas_release,
	.ssthresh	= wvegas_ssthresh,
	.cong_avoid	= wvegas_cong_avoid,
	.pkts_acked	= wvegas_pkts_acked,
	.in_ack_event	= wvegas_in_ack_event,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.flags		= TCP_CONG_NON_RESTRICTED,
	.owner		= THIS_MODULE,
	.name		= "wvegas",
};

static int __init wvegas_register(void)
{
	BUILD_BUG_ON(sizeof(struct wvegas) > ICSK_CA_PRIV_SIZE);
	return tcp_register_congestion_control(&wvegas_ops);
}

static void __exit wvegas_unregister(void)
{
	tcp_unregister_congestion_control(&wvegas_ops);
}

module_init(wvegas_register);
module_exit(wvegas_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP coupled congestion control: weighted Vegas");
