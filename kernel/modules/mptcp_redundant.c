// SPDX-License-Identifier: GPL-2.0
/* MPTCP scheduler "redundant": every segment on every active subflow.
 *
 * All active subflows are marked together, so the kernel sends new data on
 * one of them and the same bytes on each of the others (ReMP-style).  A
 * marked subflow that has not carried every byte sent so far first sends
 * what it missed, from the oldest data not yet DATA_ACKed (kernel patch
 * 0001), and new data goes out once no marked subflow lags.
 *
 * pace=slowest (default): new data is only scheduled while no active
 * subflow holds more than max_backlog segments queued and not yet sent:
 * the connection moves at the pace of its slowest path and every path
 * transmits every byte, instead of the fast path running ahead and the
 * slow one skipping data that was acknowledged meanwhile.
 *
 * pace=fastest: the redundant scheduler of MPTCP v0.95 as its users
 * describe it (the one Kubde & Sawarkar ran, mptlab seed 001): a subflow
 * whose cwnd opens sends the next data it has not sent yet, skipping what
 * the connection has had DATA_ACKed meanwhile; when it has carried
 * everything, that is new data.  The fast subflow so runs ahead at its own
 * pace and the slow one carries copies where it can; mptlab's kubde-*
 * experiments run it, as the paper did.  Only subflows with cwnd space
 * and at most max_backlog unsent segments are marked.  A lone such
 * subflow marked by itself would take new data even if it lags
 * (patch 0001), so it is marked together with the subflow that last took
 * new data alone (the leader, normally the fastest), which then sends
 * nothing unless it lags too: the lone one catches up first.
 *
 * What differs from v0.95 (pace=fastest): the kernel decides which marked
 * subflow takes new data (the first one, when none lags), the leader is
 * a guess kept per connection, and a leader that lags too queues copies
 * beyond its cwnd while its send buffer has room (only after another
 * subflow took new data, which is rare); v0.95 walks a send queue per
 * subflow instead.  Either pace answers a reinject call
 * (the kernel's opportunistic retransmission) with the same marks.
 */
#include <linux/module.h>
#include <linux/string.h>
#include "sched_util.h"

enum { PACE_SLOWEST, PACE_FASTEST };
static const char * const pace_names[] = { "slowest", "fastest" };
static int pace __read_mostly = PACE_SLOWEST;

static int pace_set(const char *val, const struct kernel_param *kp)
{
	int i = __sysfs_match_string(pace_names, ARRAY_SIZE(pace_names), val);

	if (i < 0) {
		pr_err("mptcp_redundant: pace=%s: allowed: slowest, fastest\n", val);
		return i;
	}
	WRITE_ONCE(pace, i);
	return 0;
}

static int pace_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%s\n", pace_names[READ_ONCE(pace)]);
}

static const struct kernel_param_ops pace_ops = {
	.set = pace_set,
	.get = pace_get,
};

module_param_cb(pace, &pace_ops, NULL, 0644);
MODULE_PARM_DESC(pace, "slowest (every path carries every byte, default) or fastest (MPTCP v0.95's)");

static unsigned int max_backlog __read_mostly = 4;
module_param(max_backlog, uint, 0644);
MODULE_PARM_DESC(max_backlog, "segments a subflow may hold unsent before new data waits (default 4)");

/* per connection (mptcp_sched_priv): the subflow that last took new data
 * alone; only compared, never dereferenced
 */
struct redundant_state {
	const struct mptcp_subflow_context *leader;
	struct sched_stats_conn stats;
};

module_param_cb(stats, &sched_stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats, SCHED_STATS_DESC);

static bool redundant_ok(const struct mptcp_sched_subflow_info *info)
{
	return info->memory_free &&
	       info->notsent_bytes <= max_backlog * info->mss;
}

static int redundant_slowest(struct sched_view *v)
{
	int i;

	for (i = 0; i < v->n; i++)
		if (!redundant_ok(&v->info[i]))
			return -EAGAIN;
	for (i = 0; i < v->n; i++)
		mptcp_subflow_set_scheduled(v->ctx[i], true);
	return 0;
}

static int redundant_fastest(struct mptcp_sock *msk, struct sched_view *v)
{
	struct redundant_state *st = mptcp_sched_priv(msk);
	int i, lone = -1, leader = -1, marked = 0;

	for (i = 0; i < v->n; i++) {
		if (v->ctx[i] == st->leader && v->info[i].memory_free)
			leader = i;
		if (!v->info[i].cwnd_avail || !redundant_ok(&v->info[i]))
			continue;
		mptcp_subflow_set_scheduled(v->ctx[i], true);
		lone = i;
		marked++;
	}
	if (!marked)
		return -EAGAIN;
	if (marked == 1) {
		if (leader >= 0 && leader != lone)
			mptcp_subflow_set_scheduled(v->ctx[leader], true);
		else
			st->leader = v->ctx[lone];
	}
	return 0;
}

static int redundant_get_subflow(struct mptcp_sock *msk,
				 struct mptcp_sched_data *data)
{
	struct redundant_state *st = mptcp_sched_priv(msk);
	struct sched_view v;

	sched_view_init(&v, data);
	sched_stats_account(msk, data, &v, &st->stats);
	if (!v.n)
		return -EAGAIN;
	if (READ_ONCE(pace) == PACE_FASTEST)
		return sched_stats_done(msk, data, redundant_fastest(msk, &v));
	return sched_stats_done(msk, data, redundant_slowest(&v));
}

static struct mptcp_sched_ops redundant_ops = {
	.get_subflow	= redundant_get_subflow,
	.name		= "redundant",
	.owner		= THIS_MODULE,
};

static int __init redundant_register(void)
{
	BUILD_BUG_ON(sizeof(struct redundant_state) > MPTCP_SCHED_PRIV_SIZE);
	return mptcp_register_scheduler(&redundant_ops);
}

static void __exit redundant_unregister(void)
{
	mptcp_unregister_scheduler(&redundant_ops);
}

module_init(redundant_register);
module_exit(redundant_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP redundant packet scheduler");
