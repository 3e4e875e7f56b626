// SPDX-License-Identifier: GPL-2.0
/* MPTCP scheduler "minrtt_pr": lowest RTT first with opportunistic
 * retransmission and penalisation (OR&P), the default of the out-of-tree
 * MPTCP v0.88-v0.90 and the baseline of the BLEST and MPT-BM papers.
 *
 * New data goes to the lowest-RTT subflow with cwnd space ("minrtt").
 * When the connection-level window is full and its oldest segment holds
 * up the receiver, the kernel asks again with reinject set (patch 0001):
 * the segment is re-sent on the fastest subflow with cwnd space that has
 * not carried it yet (Raiciu et al., NSDI 2012), and every slower subflow
 * that did carry it has its cwnd halved (mptcp_sched_penalise(), patches
 * 0005 and 0010).  As MPTCP v0.90: the segment is re-sent only if a
 * subflow that carried it is more than rtt_ratio (4) times slower than the
 * re-sender or has a cwnd of at most 4 (else that subflow delivers it
 * soon enough itself), and the halving happens at most once per the
 * re-sender's sRTT, to a subflow in the Open state.  Each step is a module
 * parameter.  retransmit=0 answers a reinject call as minrtt does (the
 * lowest-RTT subflow with room, which may have carried the segment): the
 * call also stands for MPTCP-level retransmissions after a timeout, which
 * must not be refused, so the kernel's opportunistic retransmission itself
 * cannot be switched off from here.
 */
#include <linux/module.h>
#include "sched_util.h"

static bool retransmit = true;
module_param(retransmit, bool, 0644);
MODULE_PARM_DESC(retransmit, "re-send a blocking segment on a faster subflow (default: on)");

static bool penalise = true;
module_param(penalise, bool, 0644);
MODULE_PARM_DESC(penalise, "halve the cwnd of the subflow that blocks (default: on)");

static unsigned int rtt_ratio = 4000;
module_param(rtt_ratio, uint, 0644);
MODULE_PARM_DESC(rtt_ratio, "re-send only past this sRTT ratio carrier/re-sender, thousandths (v0.90: 4000; 0: always)");

module_param_cb(stats, &sched_stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats, SCHED_STATS_DESC);

static int minrtt_pr_pick(struct mptcp_sock *msk,
			  const struct mptcp_sched_data *data,
			  const struct sched_view *v)
{
	int best;

	if (!data->reinject || !retransmit)
		return sched_mark(v, sched_min_rtt(v, true));

	best = sched_orp(msk, v, penalise, rtt_ratio);
	if (best == SCHED_ORP_SKIP)
		return -EAGAIN;
	if (best < 0)	/* every subflow carried it (an MPTCP-level RTO) */
		best = sched_min_rtt(v, true);
	return sched_mark(v, best);
}

static int minrtt_pr_get_subflow(struct mptcp_sock *msk,
				 struct mptcp_sched_data *data)
{
	struct sched_stats_conn *c = mptcp_sched_priv(msk);
	struct sched_view v;

	sched_view_init(&v, data);
	sched_stats_account(msk, data, &v, c);
	return sched_stats_done(msk, data, minrtt_pr_pick(msk, data, &v));
}

static struct mptcp_sched_ops minrtt_pr_ops = {
	.get_subflow	= minrtt_pr_get_subflow,
	.name		= "minrtt_pr",
	.owner		= THIS_MODULE,
};

static int __init minrtt_pr_register(void)
{
	BUILD_BUG_ON(sizeof(struct sched_stats_conn) > MPTCP_SCHED_PRIV_SIZE);
	return mptcp_register_scheduler(&minrtt_pr_ops);
}

static void __exit minrtt_pr_unregister(void)
{
	mptcp_unregister_scheduler(&minrtt_pr_ops);
}

module_init(minrtt_pr_register);
module_exit(minrtt_pr_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP lowest-RTT-first scheduler with opportunistic retransmission and penalisation");
