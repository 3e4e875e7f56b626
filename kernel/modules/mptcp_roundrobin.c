// SPDX-License-Identifier: GPL-2.0
/* MPTCP scheduler "roundrobin": subflows take turns.
 *
 * Each active subflow in turn sends num_segments segments, then the next
 * one.  With cwnd_limited (the default) a subflow whose congestion window
 * is full is skipped, so that a slow path does not stall the others; with
 * cwnd_limited=0 the turn waits for that subflow's send buffer instead.
 *
 * A turn counts segments that were sent (the connection's snd_nxt moved),
 * not picks: a pick made while another subflow's lock is held becomes a
 * delegated send, and that subflow asks again.  Counting picks handed the
 * turn on at every ask, so two subflows delegated to each other without
 * sending (under virtual time ksoftirqd then spun with guest time stopped).
 */
#include <linux/module.h>
#include "sched_util.h"

static unsigned int num_segments __read_mostly = 1;
module_param(num_segments, uint, 0644);
MODULE_PARM_DESC(num_segments, "segments a subflow sends per turn (default 1)");

static bool cwnd_limited __read_mostly = true;
module_param(cwnd_limited, bool, 0644);
MODULE_PARM_DESC(cwnd_limited, "skip subflows whose cwnd is full (default 1)");

struct rr_state {
	struct mptcp_subflow_context *last;	/* subflow holding the turn */
	unsigned int sent;			/* segments sent in this turn */
	u64 snd_nxt;				/* connection's snd_nxt at the last call */
	struct sched_stats_conn stats;
};

module_param_cb(stats, &sched_stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats, SCHED_STATS_DESC);

static bool rr_usable(const struct mptcp_sched_subflow_info *info)
{
	if (!info->memory_free)
		return false;
	return !cwnd_limited || info->cwnd_avail;
}

static int rr_pick(struct mptcp_sock *msk, struct rr_state *st,
		   const struct mptcp_sched_data *data,
		   const struct sched_view *v)
{
	struct mptcp_sched_conn_info conn;
	int i, cur = -1;

	if (!v->n)
		return -EAGAIN;

	if (!data->reinject) {
		mptcp_sched_conn_info(msk, &conn);
		if (conn.snd_nxt != st->snd_nxt) {
			st->snd_nxt = conn.snd_nxt;
			st->sent++;
		}
	}

	for (i = 0; i < v->n; i++)
		if (v->ctx[i] == st->last)
			cur = i;

	/* keep the turn while it lasts, then move on */
	if (cur >= 0 && st->sent < max(num_segments, 1U) && rr_usable(&v->info[cur]))
		goto pick;

	/* the next usable subflow after the current one (cur may be -1) */
	for (i = 1; i <= v->n; i++) {
		int next = (cur + i) % v->n;

		if (rr_usable(&v->info[next])) {
			cur = next;
			st->last = v->ctx[cur];
			st->sent = 0;
			goto pick;
		}
		if (!cwnd_limited)
			return -EAGAIN;
	}
	return -EAGAIN;

pick:
	return sched_mark(v, cur);
}

static int rr_get_subflow(struct mptcp_sock *msk,
			  struct mptcp_sched_data *data)
{
	struct rr_state *st = mptcp_sched_priv(msk);
	struct sched_view v;

	sched_view_init(&v, data);
	sched_stats_account(msk, data, &v, &st->stats);
	return sched_stats_done(msk, data, rr_pick(msk, st, data, &v));
}

static struct mptcp_sched_ops rr_ops = {
	.get_subflow	= rr_get_subflow,
	.name		= "roundrobin",
	.owner		= THIS_MODULE,
};

static int __init rr_register(void)
{
	BUILD_BUG_ON(sizeof(struct rr_state) > MPTCP_SCHED_PRIV_SIZE);
	return mptcp_register_scheduler(&rr_ops);
}

static void __exit rr_unregister(void)
{
	mptcp_unregister_scheduler(&rr_ops);
}

module_init(rr_register);
module_exit(rr_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP round-robin packet scheduler");
