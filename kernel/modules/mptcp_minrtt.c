// SPDX-License-Identifier: GPL-2.0
/* MPTCP scheduler "minrtt": the classic MPTCP default.
 *
 * New data goes to the subflow with the lowest smoothed RTT among those
 * whose congestion window admits another segment; when it is full, the
 * next-lowest RTT subflow is filled, and so on.  Backup subflows are used
 * only when no regular subflow is active.  Re-sent data goes the same way.
 * (Linux 6.1's built-in "default" is different: it ranks subflows by the
 * time needed to drain their send queues at their pacing rate.)
 */
#include <linux/module.h>
#include "sched_util.h"

module_param_cb(stats, &sched_stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats, SCHED_STATS_DESC);

static int minrtt_get_subflow(struct mptcp_sock *msk,
			      struct mptcp_sched_data *data)
{
	struct sched_stats_conn *c = mptcp_sched_priv(msk);
	struct sched_view v;

	sched_view_init(&v, data);
	sched_stats_account(msk, data, &v, c);
	return sched_stats_done(msk, data, sched_mark(&v, sched_min_rtt(&v, true)));
}

static struct mptcp_sched_ops minrtt_ops = {
	.get_subflow	= minrtt_get_subflow,
	.name		= "minrtt",
	.owner		= THIS_MODULE,
};

static int __init minrtt_register(void)
{
	BUILD_BUG_ON(sizeof(struct sched_stats_conn) > MPTCP_SCHED_PRIV_SIZE);
	return mptcp_register_scheduler(&minrtt_ops);
}

static void __exit minrtt_unregister(void)
{
	mptcp_unregister_scheduler(&minrtt_ops);
}

module_init(minrtt_register);
module_exit(minrtt_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP lowest-RTT-first packet scheduler");
