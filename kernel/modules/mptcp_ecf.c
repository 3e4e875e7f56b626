// SPDX-License-Identifier: GPL-2.0
/* MPTCP scheduler "ecf": Earliest Completion First.
 *
 * Lim, Nahum, Towsley, Gibbens, "ECF: An MPTCP Path Scheduler to Manage
 * Heterogeneous Paths", CoNEXT 2017.
 *
 * When the fastest subflow f has a full congestion window, the next
 * candidate s (lowest RTT with room) is only used if sending there finishes
 * the queued data sooner than waiting for f.  With k segments not yet sent:
 *
 *	n     = 1 + k / CWND_f		(RTTs f needs for the backlog)
 *	delta = max(RTTVAR_f, RTTVAR_s)
 *	if n * RTT_f < (1 + waiting * beta) * (RTT_s + delta):
 *		if (k / CWND_s) * RTT_s >= 2 * RTT_f + delta:
 *			waiting = 1: do not use s, wait for f
 *		else use s
 *	else waiting = 0: use s
 *
 * beta (hysteresis, thousandths) defaults to 250 = 0.25.
 */
#include <linux/module.h>
#include "sched_util.h"

static unsigned int beta __read_mostly = 250;
module_param(beta, uint, 0644);
MODULE_PARM_DESC(beta, "hysteresis factor, thousandths (default 250 = 0.25)");

struct ecf_state {
	struct sched_stats_conn stats;
	bool waiting;
};

module_param_cb(stats, &sched_stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats, SCHED_STATS_DESC);

static bool ecf_wait_for_fast(struct ecf_state *st,
			      const struct mptcp_sched_subflow_info *f,
			      const struct mptcp_sched_subflow_info *s,
			      const struct mptcp_sched_conn_info *conn)
{
	u64 k = DIV_ROUND_UP(conn->pending_bytes, max(f->mss, 1U));
	u64 delta = max(f->rttvar_us, s->rttvar_us);
	u64 fast_done, slow_done;

	/* n * RTT_f with n = 1 + k / CWND_f */
	fast_done = f->srtt_us + div_u64(k * f->srtt_us, max(f->cwnd, 1U));
	slow_done = div_u64((1000 + (st->waiting ? beta : 0)) * (s->srtt_us + delta), 1000);

	if (fast_done < slow_done) {
		if (div_u64(k * s->srtt_us, max(s->cwnd, 1U)) >= 2 * (u64)f->srtt_us + delta) {
			st->waiting = true;
			return true;
		}
		return false;
	}
	st->waiting = false;
	return false;
}

static int ecf_pick(struct mptcp_sock *msk, struct ecf_state *st,
		    const struct mptcp_sched_data *data,
		    const struct sched_view *v)
{
	struct mptcp_sched_conn_info conn;
	int fast, pick;

	fast = sched_min_rtt(v, false);
	pick = sched_min_rtt(v, true);
	if (data->reinject || fast < 0 || pick < 0 || pick == fast)
		return sched_mark(v, pick);
	if (!v->info[fast].srtt_us || !v->info[pick].srtt_us)
		return sched_mark(v, pick);

	mptcp_sched_conn_info(msk, &conn);
	if (ecf_wait_for_fast(st, &v->info[fast], &v->info[pick], &conn))
		return -EAGAIN;
	return sched_mark(v, pick);
}

static int ecf_get_subflow(struct mptcp_sock *msk,
			   struct mptcp_sched_data *data)
{
	struct ecf_state *st = mptcp_sched_priv(msk);
	struct sched_view v;

	sched_view_init(&v, data);
	sched_stats_account(msk, data, &v, &st->stats);
	return sched_stats_done(msk, data, ecf_pick(msk, st, data, &v));
}

static struct mptcp_sched_ops ecf_ops = {
	.get_subflow	= ecf_get_subflow,
	.name		= "ecf",
	.owner		= THIS_MODULE,
};

static int __init ecf_register(void)
{
	BUILD_BUG_ON(sizeof(struct ecf_state) > MPTCP_SCHED_PRIV_SIZE);
	return mptcp_register_scheduler(&ecf_ops);
}

static void __exit ecf_unregister(void)
{
	mptcp_unregister_scheduler(&ecf_ops);
}

module_init(ecf_register);
module_exit(ecf_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP Earliest Completion First packet scheduler (Lim et al., CoNEXT 2017)");
