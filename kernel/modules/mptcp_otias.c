// SPDX-License-Identifier: GPL-2.0
/* MPTCP scheduler "otias": Out-of-order Transmission for In-order Arrival
 * Scheduling (Yang, Wang, Amer, "Out-of-order transmission for in-order
 * arrival scheduling for multipath TCP", AINA workshops 2014), as the BLEST
 * paper restates it (its Algorithm 2) and the Ferlin thesis (5.2).
 *
 * For every segment, estimate when it would arrive on each subflow j:
 *
 *	can_send_j  = cwnd_j - inflight_j
 *	rtt_wait_j  = max(0, floor((queued_j - can_send_j) / cwnd_j))
 *	T_j         = (rtt_wait_j + 1/2) * srtt_j
 *
 * (queued_j: segments on j's send queue not yet sent; one cwnd per RTT,
 * one-way delay = RTT / 2) and give the segment to the smallest T_j, even
 * when its cwnd is full: the segment waits in that subflow's queue.  Only
 * a full send buffer (sk_stream_memory_free) keeps a subflow out.  The
 * original has no reinjection: a reinject call is answered as minrtt.
 */
#include <linux/module.h>
#include "sched_util.h"

/* T_j in microseconds times 2 (to keep the half RTT an integer). */
static u64 otias_arrival2(const struct mptcp_sched_subflow_info *info)
{
	u32 mss = max_t(u32, info->mss, 1);
	u32 cwnd = max_t(u32, info->cwnd, 1);
	u32 queued = DIV_ROUND_UP(info->notsent_bytes, mss);
	u32 can_send = cwnd > info->inflight ? cwnd - info->inflight : 0;
	u32 rtt_wait = queued > can_send ? (queued - can_send) / cwnd : 0;

	if (!info->srtt_us)
		return U64_MAX;
	return (2ULL * rtt_wait + 1) * info->srtt_us;
}

module_param_cb(stats, &sched_stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats, SCHED_STATS_DESC);

static int otias_pick(const struct mptcp_sched_data *data,
		      const struct sched_view *v)
{
	u64 best_t = U64_MAX;
	int i, best = -1;

	if (data->reinject)
		return sched_mark(v, sched_min_rtt(v, true));

	for (i = 0; i < v->n; i++) {
		u64 t;

		if (!v->info[i].memory_free)
			continue;
		t = otias_arrival2(&v->info[i]);
		if (best < 0 || t < best_t) {
			best = i;
			best_t = t;
		}
	}
	return sched_mark(v, best);
}

static int otias_get_subflow(struct mptcp_sock *msk,
			     struct mptcp_sched_data *data)
{
	struct sched_stats_conn *c = mptcp_sched_priv(msk);
	struct sched_view v;

	sched_view_init(&v, data);
	sched_stats_account(msk, data, &v, c);
	return sched_stats_done(msk, data, otias_pick(data, &v));
}

static struct mptcp_sched_ops otias_ops = {
	.get_subflow	= otias_get_subflow,
	.name		= "otias",
	.owner		= THIS_MODULE,
};

static int __init otias_register(void)
{
	BUILD_BUG_ON(sizeof(struct sched_stats_conn) > MPTCP_SCHED_PRIV_SIZE);
	return mptcp_register_scheduler(&otias_ops);
}

static void __exit otias_unregister(void)
{
	mptcp_unregister_scheduler(&otias_ops);
}

module_init(otias_register);
module_exit(otias_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP OTIAS scheduler: least estimated arrival time, queueing beyond cwnd");
