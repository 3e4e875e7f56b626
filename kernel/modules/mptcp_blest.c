// SPDX-License-Identifier: GPL-2.0
/* MPTCP scheduler "blest": Blocking Estimation-based scheduling.
 *
 * Ferlin, Alay, Mehani, Boreli, "BLEST: Blocking Estimation-based MPTCP
 * Scheduler for Heterogeneous Networks", IFIP Networking 2016.
 *
 * Like minrtt, but before sending on a slower subflow S while the fastest
 * subflow F has a full congestion window, estimate how much F could send
 * during one RTT of S:
 *
 *	rtts = RTT_S / RTT_F
 *	X    = MSS_F * (CWND_F + (rtts - 1) / 2) * rtts
 *
 * and skip S (wait for F) when X * lambda > |M| - MSS_S * (inflight_S + 1),
 * |M| being the connection-level send window: a segment on S would hold
 * window space that F needs, and the receiver would be head-of-line
 * blocked.  lambda corrects the estimate: it starts at lambda_init and,
 * once per RTT_F, grows by delta when the connection-level window ran out
 * (head-of-line blocking at the sender) during that RTT and shrinks by
 * delta otherwise, within [lambda_min, lambda_max].  Values are in
 * thousandths (1000 = 1.0).  inflight_S counts segments queued on S and
 * not sent yet as well, since they will hold window space too.
 *
 * The blocking that raises lambda is seen where the kernel sees it: the
 * kernel asks for a re-send of the segment that holds the window
 * (reinject, patch 0001) when new data waits but the window is used up,
 * and new data is never offered to a scheduler while the window is full.
 * An earlier version looked for a full window on new-data calls only,
 * never saw one, and lambda fell to lambda_min within 30 s of every
 * 3G + WLAN bulk run (traced: blocked 0 at every update), which made
 * BLEST minRTT with extra waits (docs/reproduction.md).
 *
 * The segment that holds the window is re-sent by minrtt_pr's rules
 * (sched_orp(): on a faster subflow that has not carried it, if its
 * carrier is over 4 times slower), without penalisation by default.
 */
#include <linux/module.h>
#include <net/tcp.h>
#include "sched_util.h"

static unsigned int lambda_init __read_mostly = 1000;
module_param(lambda_init, uint, 0644);
MODULE_PARM_DESC(lambda_init, "initial lambda, thousandths (default 1000 = 1.0)");

static unsigned int delta __read_mostly = 1;
module_param(delta, uint, 0644);
MODULE_PARM_DESC(delta, "lambda step per RTT of the fastest subflow, thousandths (default 1 = 0.001)");

static unsigned int lambda_min __read_mostly = 100;
module_param(lambda_min, uint, 0644);
MODULE_PARM_DESC(lambda_min, "lower bound of lambda, thousandths (default 100 = 0.1)");

static unsigned int lambda_max __read_mostly = 4000;
module_param(lambda_max, uint, 0644);
MODULE_PARM_DESC(lambda_max, "upper bound of lambda, thousandths (default 4000 = 4.0)");

static bool penalise;
module_param(penalise, bool, 0644);
MODULE_PARM_DESC(penalise, "halve the blocking subflow's cwnd as minrtt_pr does (default: off, the paper's)");

struct blest_state {
	u32 lambda;		/* thousandths */
	bool blocked;		/* window ran out during the current RTT_F */
	u64 next_update_us;	/* end of the current RTT_F period */
};

static void blest_init(struct mptcp_sock *msk)
{
	struct blest_state *st = mptcp_sched_priv(msk);

	st->lambda = clamp(lambda_init, lambda_min, lambda_max);
}

/* Once per RTT of the fastest subflow, move lambda by delta; @reinject:
 * the kernel asks for the segment that blocks the window to be re-sent.
 */
static void blest_update_lambda(struct blest_state *st,
				const struct mptcp_sched_subflow_info *fast,
				const struct mptcp_sched_conn_info *conn,
				bool reinject)
{
	u64 now = tcp_clock_us();

	if (reinject ||
	    (conn->pending_bytes && conn->inflight_bytes + fast->mss > conn->snd_wnd))
		st->blocked = true;

	if (!st->next_update_us) {
		st->next_update_us = now + fast->srtt_us;
		return;
	}
	if (now < st->next_update_us)
		return;

	if (st->blocked)
		st->lambda = min(st->lambda + delta, lambda_max);
	else
		st->lambda = st->lambda > lambda_min + delta ?
			     st->lambda - delta : lambda_min;
	st->blocked = false;
	st->next_update_us = now + fast->srtt_us;
}

/* Would a segment on @slow block the fast subflow? */
static bool blest_would_block(const struct blest_state *st,
			      const struct mptcp_sched_subflow_info *fast,
			      const struct mptcp_sched_subflow_info *slow,
			      const struct mptcp_sched_conn_info *conn)
{
	u64 rtts, x, need, used;

	/* rtts = RTT_S / RTT_F in 1/1024 units; RTT_S >= RTT_F here */
	rtts = div_u64((u64)slow->srtt_us << 10, fast->srtt_us);
	x = (u64)fast->mss * ((u64)fast->cwnd * 1024 + (rtts - 1024) / 2);
	x = (x * rtts) >> 20;
	x = div_u64(x * st->lambda, 1000);

	used = (u64)slow->inflight + DIV_ROUND_UP(slow->notsent_bytes, max(slow->mss, 1U));
	need = (u64)slow->mss * (used + 1);
	if (need >= conn->snd_wnd)
		return true;
	return x > conn->snd_wnd - need;
}

static int blest_get_subflow(struct mptcp_sock *msk,
			     struct mptcp_sched_data *data)
{
	struct blest_state *st = mptcp_sched_priv(msk);
	struct mptcp_sched_conn_info conn;
	int fast, pick;
	struct sched_view v;

	sched_view_init(&v, data);
	fast = sched_min_rtt(&v, false);
	pick = sched_min_rtt(&v, true);
	mptcp_sched_conn_info(msk, &conn);
	if (fast >= 0 && v.info[fast].srtt_us)
		blest_update_lambda(st, &v.info[fast], &conn, data->reinject);
	if (data->reinject) {
		/* the segment holding the window: re-sent by minrtt_pr's rules
		 * (MPTCP v0.90's, which the paper's BLEST was built on),
		 * without penalisation unless asked (the paper: BLEST does
		 * without it; its Table II still counts BLEST's re-sends)
		 */
		int best = sched_orp(msk, &v, penalise, 4000);

		if (best == SCHED_ORP_SKIP)
			return -EAGAIN;
		return sched_mark(&v, best < 0 ? pick : best);
	}
	if (fast < 0 || pick < 0 || pick == fast)
		return sched_mark(&v, pick);

	/* without RTT samples there is nothing to estimate: act as minrtt */
	if (!v.info[fast].srtt_us || !v.info[pick].srtt_us)
		return sched_mark(&v, pick);

	if (blest_would_block(st, &v.info[fast], &v.info[pick], &conn))
		return -EAGAIN;
	return sched_mark(&v, pick);
}

static struct mptcp_sched_ops blest_ops = {
	.get_subflow	= blest_get_subflow,
	.init		= blest_init,
	.name		= "blest",
	.owner		= THIS_MODULE,
};

static int __init blest_register(void)
{
	BUILD_BUG_ON(sizeof(struct blest_state) > MPTCP_SCHED_PRIV_SIZE);
	return mptcp_register_scheduler(&blest_ops);
}

static void __exit blest_unregister(void)
{
	mptcp_unregister_scheduler(&blest_ops);
}

module_init(blest_register);
module_exit(blest_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP BLEST packet scheduler (Ferlin et al., IFIP Networking 2016)");
