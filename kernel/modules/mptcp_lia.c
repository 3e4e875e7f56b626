// SPDX-License-Identifier: GPL-2.0
/* Congestion control "lia": the Linked Increases Algorithm of RFC 6356,
 * coupled over the subflows of an MPTCP connection.
 *
 * Slow start and the decrease on loss are per subflow, as in Reno.  In
 * congestion avoidance each ACK of subflow i grows its window by
 *
 *	min(alpha / w_total, 1 / w_i)	packets per packet acknowledged,
 *	alpha = w_total * max_k(w_k / rtt_k^2) / (sum_k w_k / rtt_k)^2
 *
 * (RFC 6356 section 3, in packets instead of bytes: the subflows of an
 * emulated connection share one MSS).  So the connection takes no more
 * than one TCP would on its best path, and no more than a TCP on any path
 * it shares with one.  The per-ACK step is the Reno step of a window of
 * max(w_i, w_total / alpha) packets; w_total / alpha reduces to
 * (sum_k w_k q_k)^2 / max_k(w_k q_k^2) with q as in cc_util.h.  alpha is
 * recomputed on every ACK from the windows and sRTTs the subflows
 * published (RFC 6356 allows computing it once per window; per ACK costs a
 * few multiplications for at most 8 subflows).  A socket that is not an
 * MPTCP subflow, or has no RTT sample yet, behaves as Reno.
 */
#include <linux/module.h>
#include "cc_util.h"

struct lia {
	struct cc_link link;
};

static void lia_init(struct sock *sk)
{
	cc_link_join(sk, inet_csk_ca(sk));
}

static void lia_release(struct sock *sk)
{
	cc_link_leave(sk, inet_csk_ca(sk));
}

/* The window whose Reno step is the coupled step, or 0 for Reno. */
static u32 lia_window(struct sock *sk, struct lia *ca)
{
	struct cc_view v;
	u64 best = 0, w;
	int k;

	if (!cc_view_init(sk, &ca->link, &v) || v.n < 2)
		return 0;
	for (k = 0; k < v.n; k++)
		best = max(best, cc_wq2(&v, k));
	w = mul_u64_u64_div_u64(v.s, v.s, best);
	return min_t(u64, U32_MAX, max(w, v.w[v.self]));
}

static void lia_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct lia *ca = inet_csk_ca(sk);
	u32 w;

	if (tcp_is_cwnd_limited(sk)) {
		if (tcp_in_slow_start(tp))
			acked = tcp_slow_start(tp, acked);
		if (acked) {
			w = lia_window(sk, ca);
			tcp_cong_avoid_ai(tp, w ? w : tcp_snd_cwnd(tp), acked);
		}
	}
}

/* every ACK, also in loss recovery, where cong_avoid() is not called */
static void lia_in_ack_event(struct sock *sk, u32 flags)
{
	cc_link_publish(sk, inet_csk_ca(sk), NULL);
}

static u32 lia_ssthresh(struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

static struct tcp_congestion_ops lia_ops __read_mostly = {
	.init		= lia_init,
	.release	= lia_release,
	.ssthresh	= lia_ssthresh,
	.cong_avoid	= lia_cong_avoid,
	.in_ack_event	= lia_in_ack_event,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.flags		= TCP_CONG_NON_RESTRICTED,
	.owner		= THIS_MODULE,
	.name		= "lia",
};

static int __init lia_register(void)
{
	BUILD_BUG_ON(sizeof(struct lia) > ICSK_CA_PRIV_SIZE);
	return tcp_register_congestion_control(&lia_ops);
}

static void __exit lia_unregister(void)
{
	tcp_unregister_congestion_control(&lia_ops);
}

module_init(lia_register);
module_exit(lia_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP coupled congestion control: LIA (RFC 6356)");
