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
 * one-way delays, RFC 8382's grouping, mptlab/guest/sbd.py), which writes
 * each decision to the parameter sbd_group as "LADDR LPORT RADDR RPORT
 * GROUP FLOW ID", its own subflow as it sees it: group 0 = not
 * bottlenecked (Reno), g > 0 = shares bottleneck g; FLOW and ID number the
 * subflow and the decision.  The receiver's subflow carries the decision
 * to the sender in patch 0015's option on its next acks, as the thesis's
 * SBD option did; the sender's olia_sbd reads the last one received.  A
 * subflow without a decision yet couples with all subflows, as OLIA (the
 * conservative choice; the thesis does not say).  Each subflow publishes
 * its group as its third coupling value, so S is read from the published
 * values.
 */
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <net/inet_hashtables.h>
#include <net/net_namespace.h>
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

/* The established socket @laddr:@lport <- @raddr:@rport of @net, with a
 * reference.  A subflow the path manager opened from an endpoint with a
 * device is bound to that device, and the lookup matches a bound socket
 * only by its device: so each device of the namespace is tried too.
 * Called under rcu_read_lock().
 */
static struct sock *sbd_find(struct net *net, __be32 laddr, u16 lport,
			     __be32 raddr, u16 rport)
{
	struct inet_hashinfo *hashinfo = net->ipv4.tcp_death_row.hashinfo;
	struct net_device *dev;
	struct sock *sk;

	sk = __inet_lookup_established(net, hashinfo, raddr, htons(rport),
				       laddr, lport, 0, 0);
	if (sk)
		return sk;
	for_each_netdev_rcu(net, dev) {
		sk = __inet_lookup_established(net, hashinfo, raddr, htons(rport),
					       laddr, lport, dev->ifindex, 0);
		if (sk)
			return sk;
	}
	return NULL;
}

/* The receiver's side: find the subflow in whichever namespace holds it
 * (the guest's hosts are namespaces with distinct addresses) and hand it
 * the decision to carry.  IPv4 only, as mptlab's topologies.  -ENOENT if
 * no such subflow is established (it closed since its last samples).
 */
static int sbd_group_set(const char *val, const struct kernel_param *kp)
{
	__be32 laddr, raddr;
	u16 lport, rport, id;
	char la[16], ra[16];
	int ret = -ENOENT;
	struct sock *sk = NULL;
	u8 group, flow;
	struct net *net;

	if (sscanf(val, "%15s %hu %15s %hu %hhu %hhu %hu", la, &lport, ra,
		   &rport, &group, &flow, &id) != 7 ||
	    !in4_pton(la, -1, (u8 *)&laddr, -1, NULL) ||
	    !in4_pton(ra, -1, (u8 *)&raddr, -1, NULL))
		return -EINVAL;

	down_read(&net_rwsem);
	rcu_read_lock();
	for_each_net(net) {
		sk = sbd_find(net, laddr, lport, raddr, rport);
		if (sk)
			break;
	}
	rcu_read_unlock();
	up_read(&net_rwsem);
	if (!sk)
		return ret;
	if (sk_fullsock(sk) && sk_is_mptcp(sk)) {
		mptcp_sbd_feedback(sk, mptcp_sbd_pack(group, flow, id));
		ret = 0;
	}
	sock_gen_put(sk);
	return ret;
}

static const struct kernel_param_ops sbd_group_ops = {
	.set = sbd_group_set,
};

module_param_cb(sbd_group, &sbd_group_ops, NULL, 0200);
MODULE_PARM_DESC(sbd_group, "MPTCP-SBD decision at the receiver: LADDR LPORT RADDR RPORT GROUP (0 = not bottlenecked) FLOW ID");

/* The sender's side: this subflow's decided group (1 + group; 0 while no
 * decision has arrived)
 */
static u32 sbd_group_of(const struct sock *sk)
{
	u32 d = mptcp_sbd_decision(sk);

	return d ? 1 + (d >> 24) : 0;
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
	    (sbd && !sbd_keep(&v, sbd_group_of(sk)))) {
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
	u64 priv[MPTCP_CC_PRIV] = { ca->l1, ca->l2, sbd_group_of(sk) };

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
