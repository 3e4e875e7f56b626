// SPDX-License-Identifier: GPL-2.0
/* MPTCP scheduler "daps": Delay-Aware Packet Scheduling, the original
 * version (Sarwar, Boreli, Lochin, Mifdaoui, Smith, "Mitigating receiver's
 * buffer blocking by delay aware packet scheduling in multipath data
 * transfer", WAINA 2013), as the BLEST paper restates it (Ferlin et al.,
 * IFIP Networking 2016, Sec. IV-A, Algorithm 1).  Not the two-subflow
 * simplification of Kuhn et al. (ICC 2014), which the BLEST paper does not
 * evaluate either.
 *
 * DAPS plans which subflow carries each of the next segments, for a whole
 * "scheduling run" at a time, from each subflow's forward delay D_i and
 * congestion window C_i, so that the segments arrive in order.  A run spans
 * L = lcm(D_1, ..., D_n).  Subflow i has a transmission opportunity every
 * D_i (at t = 0, D_i, 2 D_i, ... < L) and carries C_i segments at each.
 * The opportunities of all subflows are taken in the order in which their
 * segments arrive (t + D_i; on a tie the lower-delay subflow first), and
 * each takes the next C_i sequence numbers.  The paper's example: two
 * subflows of equal capacity, one with ten times the other's delay:
 * segments 1..10 go on the fast subflow, 11 on the slow one, which sends
 * it at once and it arrives just after 10.  After the run, plan the next
 * one with the subflows' current delays and windows; within a run DAPS
 * does not react to them (the paper's main criticism).
 *
 * In the kernel a scheduler is asked before every segment, so the plan is
 * followed in sequence order: the segment at the run's current position
 * goes to the planned subflow, even when its cwnd is full (it waits in
 * that subflow's send queue, as with OTIAS); that is how the slow subflow
 * gets its segments "at t = 0" while the fast one still works through its
 * earlier ones.  Only a full send buffer on the planned subflow holds the
 * segment back (-EAGAIN: nothing is sent until that subflow drains), and
 * so does a subflow that already holds one run's share of unsent data
 * (below).  The
 * position advances when a segment was sent (the connection's snd_nxt
 * moved), not per call: a call may end in a delegated send that asks
 * again.  The state (per subflow D_i, C_i and its next opportunity; the
 * current one and the segments left in it) fits in the 64-byte
 * per-connection area, no schedule vector is stored: the next opportunity
 * is the earliest arrival among the subflows' next ones.
 *
 * Choices the paper leaves open, and differences:
 * - D_i is sRTT_i / 2 (symmetric paths, OTIAS's assumption too), rounded
 *   to the nearest quantum_us (default 1 ms), at least 1 quantum.
 * - The run is capped at max_cycle quanta (default 1000, 1 s at the
 *   default quantum): delays of tens to hundreds of ms in 1 ms quanta
 *   often have an lcm of many seconds (lcm(47, 301) = 14147 ms).  When
 *   the lcm exceeds the cap, the run is the largest multiple of the
 *   largest D_i within the cap (or that D_i alone if it is larger): the
 *   slowest subflow gets a whole number of opportunities and the faster
 *   ones every opportunity that starts within the run.
 * - A subflow takes part once it has an RTT sample; when the set of
 *   usable subflows changes (one joins, gets its first sample, closes or
 *   turns stale) a new run is planned at once.  Backup subflows are used
 *   only when no regular one is active, as by the other schedulers.
 * - A reinject call (the kernel's opportunistic or MPTCP-level
 *   retransmission) is answered as minrtt: DAPS defines no reinjection.
 * - C_i and D_i are capped at 65535 (u16) to fit the state area.
 * - The plan is followed in sequence order, not in time: a segment is
 *   assigned when the scheduler is asked, which is as soon as there is
 *   room in the send buffers.  Unchecked, assignment runs ahead of the
 *   subflows: the fast subflow's queue grew to 0.5-1.1 MB of unsent data
 *   (16 MiB over 3G + WLAN) while 3G's stayed at 5 KB, so each 3G segment
 *   arrived hundreds of ms before the WLAN segments ahead of it in
 *   sequence, and the receiver's OFO queue was no smaller than minRTT's
 *   (8 MiB over 3G with a 100-packet queue + WLAN, seeds 1-4: a byte's
 *   mean OFO wait 0.47-0.61 x minRTT's, no better than a plan made by
 *   departure).  The paper's runs follow each other in time, so a subflow
 *   never holds more than a run's share: the planned subflow takes a
 *   segment only while its unsent data is at most its share of one run
 *   (opportunities x C_i x MSS), else the segment waits (-EAGAIN).  With
 *   that, the same uploads: 0.32-0.38 x minRTT's wait; planned by
 *   departure with the same cap, 0.56-0.66 x
 *   (tests/test_kernel_rules_sched.py).
 * - Real subflows send one cwnd per RTT = 2 D_i, not per D_i: the plan's
 *   time axis runs at half speed for every subflow alike, so each
 *   subflow's share (C_i / D_i over the sum) is the paper's.
 */
#include <linux/module.h>
#include <linux/jhash.h>
#include <linux/lcm.h>
#include "sched_util.h"

static unsigned int quantum_us __read_mostly = 1000;
module_param(quantum_us, uint, 0644);
MODULE_PARM_DESC(quantum_us, "unit of the forward delays, microseconds (default 1000)");

static unsigned int max_cycle __read_mostly = 1000;
module_param(max_cycle, uint, 0644);
MODULE_PARM_DESC(max_cycle, "longest scheduling run, quanta, at most 65535 (default 1000)");

struct daps_path {
	u16 delay;	/* D_i, quanta */
	u16 cwnd;	/* C_i, segments per opportunity */
	u16 next;	/* index of its next opportunity in the run */
};

struct daps_state {
	u32 set;	/* fingerprint of the planned subflows; 0: no plan */
	u32 snd_nxt;	/* low bits of the connection's snd_nxt at the last call */
	u16 run;	/* length of the run, quanta */
	u16 left;	/* segments left in the current opportunity */
	u8 n;		/* subflows in the plan */
	u8 cur;		/* subflow of the current opportunity */
	struct daps_path path[MPTCP_SUBFLOWS_MAX];
};

/* The subflows that take part, in view order: those with an RTT sample. */
struct daps_set {
	int n;
	int idx[MPTCP_SUBFLOWS_MAX];	/* index into the sched_view */
	u32 fingerprint;
};

static void daps_set_init(struct daps_set *s, const struct sched_view *v)
{
	unsigned long key[MPTCP_SUBFLOWS_MAX];
	int i;

	s->n = 0;
	for (i = 0; i < v->n; i++) {
		if (!v->info[i].srtt_us)
			continue;
		key[s->n] = (unsigned long)v->ctx[i];
		s->idx[s->n++] = i;
	}
	s->fingerprint = jhash(key, s->n * sizeof(key[0]), s->n) | 1;
}

/* Move to the opportunity whose segments arrive first; false at the end
 * of the run.
 */
static bool daps_next_opportunity(struct daps_state *st)
{
	u32 best_arrival = U32_MAX;
	int i, best = -1;

	for (i = 0; i < st->n; i++) {
		const struct daps_path *p = &st->path[i];
		u32 arrival;

		if ((u32)p->next * p->delay >= st->run)
			continue;
		arrival = ((u32)p->next + 1) * p->delay;
		if (best < 0 || arrival < best_arrival ||
		    (arrival == best_arrival && p->delay < st->path[best].delay)) {
			best = i;
			best_arrival = arrival;
		}
	}
	if (best < 0)
		return false;
	st->path[best].next++;
	st->cur = best;
	st->left = st->path[best].cwnd;
	return true;
}

static void daps_plan(struct daps_state *st, const struct sched_view *v,
		      const struct daps_set *s)
{
	u32 quantum = max(quantum_us, 1U);
	u32 cap = clamp(max_cycle, 1U, (unsigned int)U16_MAX);
	unsigned long l = 1;
	u32 dmax = 1;
	int i;

	for (i = 0; i < s->n; i++) {
		const struct mptcp_sched_subflow_info *info = &v->info[s->idx[i]];
		struct daps_path *p = &st->path[i];

		p->delay = clamp(DIV_ROUND_CLOSEST(info->srtt_us / 2, quantum),
				 1U, (unsigned int)U16_MAX);
		p->cwnd = clamp(info->cwnd, 1U, (unsigned int)U16_MAX);
		p->next = 0;
		dmax = max_t(u32, dmax, p->delay);
		if (l <= cap)	/* both <= 65535: no overflow */
			l = lcm(l, p->delay);
	}
	if (l <= cap)
		st->run = l;
	else
		st->run = dmax > cap ? dmax : rounddown(cap, dmax);
	st->n = s->n;
	st->set = s->fingerprint;
	daps_next_opportunity(st);	/* every subflow has one at t = 0 */
}

/* Bytes subflow @k carries in one run of the plan: its opportunities in
 * the run times its window.  More than that queued and not sent means the
 * subflow is a whole run behind the plan.
 */
static u32 daps_run_share(const struct daps_state *st, int k, u32 mss)
{
	const struct daps_path *p = &st->path[k];

	return DIV_ROUND_UP((u32)st->run, p->delay) * p->cwnd * max(mss, 1U);
}

static int daps_get_subflow(struct mptcp_sock *msk,
			    struct mptcp_sched_data *data)
{
	struct daps_state *st = mptcp_sched_priv(msk);
	struct mptcp_sched_conn_info conn;
	struct sched_view v;
	struct daps_set s;
	int i;

	sched_view_init(&v, data);
	if (data->reinject)
		return sched_mark(&v, sched_min_rtt(&v, true));

	daps_set_init(&s, &v);
	if (!s.n)	/* no RTT sample yet: nothing to plan with */
		return sched_mark(&v, sched_min_rtt(&v, true));

	mptcp_sched_conn_info(msk, &conn);
	if (st->set != s.fingerprint || st->n != s.n) {
		daps_plan(st, &v, &s);
	} else if ((u32)conn.snd_nxt != st->snd_nxt) {
		/* the segment of the last pick went out */
		if (st->left > 1)
			st->left--;
		else if (!daps_next_opportunity(st))
			daps_plan(st, &v, &s);
	}
	st->snd_nxt = (u32)conn.snd_nxt;

	i = s.idx[st->cur];
	if (!v.info[i].memory_free)
		return -EAGAIN;
	if (v.info[i].notsent_bytes > daps_run_share(st, st->cur, v.info[i].mss))
		return -EAGAIN;
	return sched_mark(&v, i);
}

/* The re-send counters only: the 64 bytes of per-connection state are all
 * taken by the plan (or the probing state), which leaves no room for the
 * state the time counters need (sched_util.h).
 */
module_param_cb(stats, &sched_stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats, SCHED_STATS_DESC);

static int daps_get_subflow_counted(struct mptcp_sock *msk,
				    struct mptcp_sched_data *data)
{
	return sched_stats_done(msk, data, daps_get_subflow(msk, data));
}

static struct mptcp_sched_ops daps_ops = {
	.get_subflow	= daps_get_subflow_counted,
	.name		= "daps",
	.owner		= THIS_MODULE,
};

static int __init daps_register(void)
{
	BUILD_BUG_ON(sizeof(struct daps_state) > MPTCP_SCHED_PRIV_SIZE);
	return mptcp_register_scheduler(&daps_ops);
}

static void __exit daps_unregister(void)
{
	mptcp_unregister_scheduler(&daps_ops);
}

module_init(daps_register);
module_exit(daps_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP DAPS scheduler: a delay-aware schedule over the lcm of the forward delays");
