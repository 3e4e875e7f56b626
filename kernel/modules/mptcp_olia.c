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
 *
 * The same module registers "olia_sbd", MPTCP-SBD's control (the thesis,
 * Ch. 5.3; Ferlin et al., IFIP Networking 2016): OLIA over S, the subflows
 * that share x's bottleneck, instead of over all of them, and Reno when S
 * is {x}.  Who shares with whom is decided at the receiver (patch 0014's
 * one-way delays, RFC 8382's grouping, mptlab/guest/sbd.py) and written to
 * the parameter sbd_group as "SADDR SPORT DADDR DPORT GROUP", the subflow
 * as the sender sees it: group 0 = not bottlenecked (Reno), g > 0 = shares
 * bottleneck g; "clear" forgets every decision.  A subflow without a
 * decision yet couples with all subflows, as OLIA (the conservative
 * choice; the thesis does not say).  Each subflow publishes its group as
 * its third coupling value, so S is read from the published values.
 */
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/spinlock.h>
#include "cc_util.h"

static uint min_ssthresh = 2;
module_param(min_ssthresh, uint, 0644);
MODULE_PARM_DESC(min_ssthresh, "ssthresh floor with 2+ subflows: 2 (Linux, default) or 1 (the specification)");

struct olia {
	struct cc_link link;
	u64	l1;	/* packets acknowledged between the last two losses */
	u64	l2;	/* ... since the last loss */
	s64	acc;	/* window fraction carried, CC_ONE units */
	u32	sbd_gen;	/* sbd_gen when sbd_group was looked up */
	u32	sbd_group;	/* olia_sbd: 0 undecided, 1 + the decided group */
};

/* olia_sbd's decisions, by the sender's view of a subflow */
#define SBD_FLOWS	64

struct sbd_flow {
	__be32	saddr, daddr;
	u16	sport, dport;
	u32	group;		/* 1 + the decided group */
};

static struct sbd_flow sbd_flows[SBD_FLOWS];
static int sbd_nflows;
static atomic_t sbd_gen = ATOMIC_INIT(1);
static DEFINE_SPINLOCK(sbd_lock);

static int sbd_group_set(const char *val, const struct kernel_param *kp)
{
	char sa[16], da[16];
	struct sbd_flow f;
	int i, ret = 0;
	u32 group;

	if (sysfs_streq(val, "clear")) {
		spin_lock_bh(&sbd_lock);
		sbd_nflows = 0;
		spin_unlock_bh(&sbd_lock);
		atomic_inc(&sbd_gen);
		return 0;
	}
	if (sscanf(val, "%15s %hu %15s %hu %u", sa, &f.sport, da, &f.dport,
		   &group) != 5 || group >= U32_MAX ||
	    !in4_pton(sa, -1, (u8 *)&f.saddr, -1, NULL) ||
	    !in4_pton(da, -1, (u8 *)&f.daddr, -1, NULL))
		return -EINVAL;
	f.group = group + 1;

	spin_lock_bh(&sbd_lock);
	for (i = 0; i < sbd_nflows; i++)
		if (sbd_flows[i].saddr == f.saddr &&
		    sbd_flows[i].sport == f.sport &&
		    sbd_flows[i].daddr == f.daddr &&
		    sbd_flows[i].dport == f.dport)
			break;
	if (i < SBD_FLOWS) {
		sbd_flows[i] = f;
		sbd_nflows = max(sbd_nflows, i + 1);
	} else {
		ret = -ENOSPC;
	}
	spin_unlock_bh(&sbd_lock);
	atomic_inc(&sbd_gen);
	return ret;
}

static const struct kernel_param_ops sbd_group_ops = {
	.set = sbd_group_set,
};

module_param_cb(sbd_group, &sbd_group_ops, NULL, 0200);
MODULE_PARM_DESC(sbd_group, "olia_sbd decision: SADDR SPORT DADDR DPORT GROUP (0 = not bottlenecked), or clear");

/* This subflow's decided group (1 + group; 0 undecided), looked up again
 * only after a new decision was written
 */
static u32 sbd_lookup(struct sock *sk, struct olia *ca)
{
	const struct inet_sock *inet = inet_sk(sk);
	u32 gen = atomic_read(&sbd_gen);
	int i;

	if (ca->sbd_gen == gen)
		return ca->sbd_group;
	ca->sbd_group = 0;
	spin_lock_bh(&sbd_lock);
	for (i = 0; i < sbd_nflows; i++)
		if (sbd_flows[i].saddr == inet->inet_saddr &&
		    sbd_flows[i].sport == inet->inet_num &&
		    sbd_flows[i].daddr == inet->inet_daddr &&
		    sbd_flows[i].dport == ntohs(inet->inet_dport))
			ca->sbd_group = sbd_flows[i].group;
	spin_unlock_bh(&sbd_lock);
	ca->sbd_gen = gen;
	return ca->sbd_group;
}

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

/* olia_sbd: keep S, the subflows that share this one's bottleneck; all
 * while this one is undecided.  False when S is {x}: Reno.
 */
static bool sbd_keep(struct cc_view *v, u32 group)
{
	bool keep[MPTCP_CC_SLOTS];
	int k;

	if (!group)
		return true;
	if (group == 1)
		return false;
	for (k = 0; k < v->n; k++)
		keep[k] = k == v->self || v->priv[k][2] == group;
	return cc_view_keep(v, keep) && v->n >= 2;
}

static void olia_avoid(struct sock *sk, u32 acked, bool sbd)
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
	if (!cc_view_init(sk, &ca->link, &v) || v.n < 2 ||
	    (sbd && !sbd_keep(&v, sbd_lookup(sk, ca)))) {
		tcp_cong_avoid_ai(tp, tcp_snd_cwnd(tp), acked);
		return;
	}
	cc_window_add(tp, &ca->acc, cc_coupled_term(&v) + olia_alpha_term(&v),
		      acked);
}

static void olia_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	olia_avoid(sk, acked, false);
}

static void olia_sbd_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	olia_avoid(sk, acked, true);
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

static void olia_sbd_in_ack_event(struct sock *sk, u32 flags)
{
	struct olia *ca = inet_csk_ca(sk);
	u64 priv[MPTCP_CC_PRIV] = { ca->l1, ca->l2, sbd_lookup(sk, ca) };

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

static struct tcp_congestion_ops olia_sbd_ops __read_mostly = {
	.init		= olia_init,
	.release	= olia_release,
	.ssthresh	= olia_ssthresh,
	.cong_avoid	= olia_sbd_cong_avoid,
	.pkts_acked	= olia_pkts_acked,
	.in_ack_event	= olia_sbd_in_ack_event,
	.undo_cwnd	= tcp_reno_undo_cwnd,
	.flags		= TCP_CONG_NON_RESTRICTED,
	.owner		= THIS_MODULE,
	.name		= "olia_sbd",
};

static int __init olia_register(void)
{
	int ret;

	BUILD_BUG_ON(sizeof(struct olia) > ICSK_CA_PRIV_SIZE);
	BUILD_BUG_ON(MPTCP_CC_PRIV < 3);
	ret = tcp_register_congestion_control(&olia_ops);
	if (ret)
		return ret;
	ret = tcp_register_congestion_control(&olia_sbd_ops);
	if (ret)
		tcp_unregister_congestion_control(&olia_ops);
	return ret;
}

static void __exit olia_unregister(void)
{
	tcp_unregister_congestion_control(&olia_sbd_ops);
	tcp_unregister_congestion_control(&olia_ops);
}

module_init(olia_register);
module_exit(olia_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP coupled congestion control: OLIA, and OLIA over shared bottlenecks (olia_sbd)");
