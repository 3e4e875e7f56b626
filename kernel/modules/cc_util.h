/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by the mptlab coupled congestion controls: joining the
 * connection's coupling slots (patch 0003) and a snapshot of the
 * connection's subflows in units that keep the coupled formulas in 64-bit
 * integers.
 *
 * The formulas divide windows by squared RTTs.  With q_k = (R << 8) / rtt_k
 * for a common R (the largest RTT among the subflows), w_k / rtt_k^2 is
 * w_k * q_k^2 / (R << 8)^2 and sum_k w_k / rtt_k is S / (R << 8) with
 * S = sum_k w_k * q_k, so every ratio the algorithms use is a ratio of
 * w * q and w * q^2 terms in which (R << 8) cancels.  For RTT ratios up
 * to 2^13 (1 ms against 8 s) q < 2^21, so w * q^2 fits 64 bits for
 * windows below 2^22 packets; products of two such terms go through
 * mul_u64_u64_div_u64().
 */
#ifndef _MPTLAB_CC_UTIL_H
#define _MPTLAB_CC_UTIL_H

#include <linux/math64.h>
#include <net/mptcp.h>
#include <net/tcp.h>

#define CC_ONE		(1ULL << 32)	/* fixed point 1.0 of window increments */

/* The first member of every module's private area: slot + 1, 0 while the
 * socket is not (or cannot be) coupled.  The area is zeroed before init()
 * and the MPTCP socket itself runs release() without init().
 */
struct cc_link {
	u8	slot1;
};

static inline void cc_link_join(struct sock *sk, struct cc_link *l)
{
	int slot = mptcp_cc_join(sk);

	l->slot1 = slot < 0 ? 0 : slot + 1;
}

static inline void cc_link_leave(struct sock *sk, struct cc_link *l)
{
	if (l->slot1)
		mptcp_cc_leave(sk, l->slot1 - 1);
	l->slot1 = 0;
}

static inline void cc_link_publish(struct sock *sk, struct cc_link *l,
				   const u64 *priv)
{
	if (l->slot1)
		mptcp_cc_publish(sk, l->slot1 - 1, priv);
}

struct cc_view {
	int	n;		/* subflows with an RTT sample */
	int	self;		/* this subflow's index */
	u64	w[MPTCP_CC_SLOTS];	/* windows, packets */
	u64	q[MPTCP_CC_SLOTS];	/* (R << 8) / rtt */
	u64	rtt[MPTCP_CC_SLOTS];	/* sRTT, us */
	u64	priv[MPTCP_CC_SLOTS][MPTCP_CC_PRIV];
	u64	s;		/* sum of w * q */
};

/* q and s of the subflows in @v, scaled by their largest RTT */
static inline bool cc_view_weigh(struct cc_view *v)
{
	u64 rmax = 0;
	int i;

	for (i = 0; i < v->n; i++)
		rmax = max(rmax, v->rtt[i]);
	v->s = 0;
	for (i = 0; i < v->n; i++) {
		v->q[i] = div64_u64(rmax << 8, v->rtt[i]);
		v->s += v->w[i] * v->q[i];
	}
	return v->s > 0;
}

/* Fill @v with the coupled subflows of @sk's connection (this subflow's
 * own values live, the others as published).  False when the socket is
 * not coupled, or it or every sibling lacks an RTT sample: the caller
 * then behaves as Reno.
 */
static inline bool cc_view_init(struct sock *sk, struct cc_link *l,
				struct cc_view *v)
{
	struct mptcp_cc_peer peers[MPTCP_CC_SLOTS];
	const struct tcp_sock *tp = tcp_sk(sk);
	int i, n, self;

	if (!l->slot1 || !tp->srtt_us)
		return false;
	n = mptcp_cc_peers(sk, l->slot1 - 1, peers, &self);
	if (self < 0)
		return false;
	peers[self].cwnd = tcp_snd_cwnd(tp);
	peers[self].srtt_us = tp->srtt_us >> 3;

	v->n = 0;
	v->self = -1;
	for (i = 0; i < n; i++) {
		if (!peers[i].srtt_us || !peers[i].cwnd)
			continue;
		if (i == self)
			v->self = v->n;
		v->w[v->n] = peers[i].cwnd;
		v->rtt[v->n] = peers[i].srtt_us;
		memcpy(v->priv[v->n], peers[i].priv, sizeof(v->priv[0]));
		v->n++;
	}
	return v->self >= 0 && cc_view_weigh(v);
}

/* Keep only the subflows k of @v with @keep[k] (this subflow must be one)
 * and recompute q and s over them, as if the others did not exist: the
 * view of a control that couples a subset of the connection (olia_sbd).
 * False when nothing is left to couple with.
 */
static inline bool cc_view_keep(struct cc_view *v, const bool *keep)
{
	int i, n = 0, self = -1;

	for (i = 0; i < v->n; i++) {
		if (!keep[i])
			continue;
		if (i == v->self)
			self = n;
		v->w[n] = v->w[i];
		v->rtt[n] = v->rtt[i];
		memcpy(v->priv[n], v->priv[i], sizeof(v->priv[0]));
		n++;
	}
	v->n = n;
	v->self = self;
	return self >= 0 && cc_view_weigh(v);
}

/* w_k * q_k^2, the numerator of w_k / rtt_k^2 */
static inline u64 cc_wq2(const struct cc_view *v, int k)
{
	return v->w[k] * v->q[k] * v->q[k];
}

/* (w_self / rtt_self^2) / (sum_k w_k / rtt_k)^2 in CC_ONE units: the
 * per-packet increase that LIA, OLIA and BALIA share
 */
static inline u64 cc_coupled_term(const struct cc_view *v)
{
	return div64_u64(mul_u64_u64_div_u64(cc_wq2(v, v->self), CC_ONE, v->s),
			 v->s);
}

/* Add @inc (CC_ONE units per packet) times @acked packets to the window,
 * carrying the fraction in *@acc; the window stays at 2 packets or more.
 */
static inline void cc_window_add(struct tcp_sock *tp, s64 *acc, s64 inc,
				 u32 acked)
{
	u32 cwnd = tcp_snd_cwnd(tp);

	*acc += inc * acked;
	while (*acc >= (s64)CC_ONE) {
		*acc -= CC_ONE;
		cwnd++;
	}
	while (*acc <= -(s64)CC_ONE) {
		*acc += CC_ONE;
		if (cwnd > 2)
			cwnd--;
	}
	tcp_snd_cwnd_set(tp, min(cwnd, tp->snd_cwnd_clamp));
}

#endif
