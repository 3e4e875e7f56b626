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
 *
 * Two rule sets, the word parameter rules:
 *
 * paper (default): the above, as the paper states it: lambda starts at
 *   1.0, moves by a symmetric delta once per RTT_F on send-window
 *   blocking and may fall below 1.0; no penalisation.
 *
 * v095: what the authors' released module (MPTCP v0.95) does differently,
 *   from a reading of its behaviour (notes-blest-kubde.md A3.4), not its
 *   code:
 *   - lambda in [1.0, 1.3], starting at 1.2; +0.04 when an MPTCP-level
 *     retransmission is pending, -0.01 otherwise, at most once per the
 *     slow subflow's minimum RTT.  v0.95 tests the meta socket's
 *     retransmission timestamp; here "pending" is: the kernel asked for
 *     an MPTCP-level re-send after a timeout (a reinject call that is not
 *     the opportunistic one) and the connection's snd_una has not moved
 *     since.  The slow subflow's minimum RTT is Linux's windowed minimum
 *     RTT sample (tcp_min_rtt()), v0.95 names a minimum sRTT.
 *   - the slow subflow's linger time: its minimum RTT plus the span up to
 *     the largest sRTT seen on it, scaled by (inflight_S + 1) / cwnd_S,
 *     and at least its current sRTT (largest sRTT: tracked per
 *     connection for the slowest subflow).
 *   - the fast subflow's bytes during it: n = floor(linger / sRTT_F) + 1
 *     RTTs; in slow start cwnd_F * (2^n - 1) packets (n at most 16),
 *     else (c + (n - 1) / 2) * n with c = max(cwnd_F, ssthresh_F + 1)
 *     (the half kept exact here); times MSS_F and lambda; skip S when
 *     that exceeds |M| - MSS_S * (inflight_S + 1), as in the paper's test.
 *   - penalisation on.
 *
 * The numeric parameters below take their default from the rule set
 * unless given (at load, or written later): a given value wins under
 * either rule set, and reading a parameter shows the value in force.
 * delta, when given, is both the step up and the step down; the rule
 * set's event (window blocking or a pending retransmission) and its
 * update period stay the rule set's.
 *
 * Mechanism counters (sched_util.h, parameter stats) get four lines of
 * BLEST's own: lambda integrated over busy time (thousandths x us) and
 * that time, the time lambda sat at its lower and at its upper bound, and
 * the decisions on the slow subflow: skipped (wait for F) or sent.  A skip
 * is a scheduler call answered -EAGAIN: the kernel asks again at the next
 * ACK, so skips count decisions, not segments.
 */
#include <linux/module.h>
#include <linux/hash.h>
#include <linux/string.h>
#include <net/tcp.h>
#include "sched_util.h"

enum { BLEST_PAPER, BLEST_V095 };

/* A module parameter that takes one of a few words. */
struct blest_choice {
	int val;
	const char * const *names;
	unsigned int n;
};

static int blest_choice_set(const char *val, const struct kernel_param *kp)
{
	struct blest_choice *c = kp->arg;
	int i = __sysfs_match_string(c->names, c->n, val);

	if (i < 0) {
		pr_err("blest: %s=%s: not one of paper, v095\n", kp->name, val);
		return -EINVAL;
	}
	WRITE_ONCE(c->val, i);
	return 0;
}

static int blest_choice_get(char *buf, const struct kernel_param *kp)
{
	const struct blest_choice *c = kp->arg;

	return scnprintf(buf, PAGE_SIZE, "%s\n", c->names[READ_ONCE(c->val)]);
}

static const struct kernel_param_ops blest_choice_ops = {
	.set = blest_choice_set,
	.get = blest_choice_get,
};

static const char * const blest_rule_names[] = { "paper", "v095" };
static struct blest_choice rules = { BLEST_PAPER, blest_rule_names,
				     ARRAY_SIZE(blest_rule_names) };
module_param_cb(rules, &blest_choice_ops, &rules, 0644);
MODULE_PARM_DESC(rules, "paper (default) or v095: the released module's lambda, linger time, fast bytes and penalisation");

/* A number whose default depends on the rule set until it is given. */
struct blest_knob {
	unsigned int val;
	bool given;
	bool is_bool;
	unsigned int def[2];	/* per rule set */
};

static unsigned int blest_get(const struct blest_knob *k)
{
	return READ_ONCE(k->given) ? READ_ONCE(k->val) :
	       k->def[READ_ONCE(rules.val)];
}

static int blest_knob_set(const char *val, const struct kernel_param *kp)
{
	struct blest_knob *k = kp->arg;
	unsigned int v;
	bool b;
	int err;

	if (k->is_bool) {
		err = kstrtobool(val, &b);
		v = b;
	} else {
		err = kstrtouint(val, 0, &v);
	}
	if (err)
		return err;
	WRITE_ONCE(k->val, v);
	WRITE_ONCE(k->given, true);
	return 0;
}

static int blest_knob_get(char *buf, const struct kernel_param *kp)
{
	const struct blest_knob *k = kp->arg;

	if (k->is_bool)
		return scnprintf(buf, PAGE_SIZE, "%c\n", blest_get(k) ? 'Y' : 'N');
	return scnprintf(buf, PAGE_SIZE, "%u\n", blest_get(k));
}

static const struct kernel_param_ops blest_knob_ops = {
	.set = blest_knob_set,
	.get = blest_knob_get,
};

static struct blest_knob lambda_init = { .def = { 1000, 1200 } };
module_param_cb(lambda_init, &blest_knob_ops, &lambda_init, 0644);
MODULE_PARM_DESC(lambda_init, "initial lambda, thousandths (paper 1000 = 1.0, v095 1200)");

static struct blest_knob delta = { .def = { 1, 0 } };
module_param_cb(delta, &blest_knob_ops, &delta, 0644);
MODULE_PARM_DESC(delta, "lambda step, thousandths (paper 1 = 0.001 up and down; v095: +40 / -10 unless given)");

static struct blest_knob lambda_min = { .def = { 100, 1000 } };
module_param_cb(lambda_min, &blest_knob_ops, &lambda_min, 0644);
MODULE_PARM_DESC(lambda_min, "lower bound of lambda, thousandths (paper 100 = 0.1, v095 1000)");

static struct blest_knob lambda_max = { .def = { 4000, 1300 } };
module_param_cb(lambda_max, &blest_knob_ops, &lambda_max, 0644);
MODULE_PARM_DESC(lambda_max, "upper bound of lambda, thousandths (paper 4000 = 4.0, v095 1300)");

static struct blest_knob penalise = { .is_bool = true, .def = { 0, 1 } };
module_param_cb(penalise, &blest_knob_ops, &penalise, 0644);
MODULE_PARM_DESC(penalise, "halve the blocking subflow's cwnd as minrtt_pr does (paper: off, v095: on)");

#define BLEST_V095_UP	40
#define BLEST_V095_DOWN	10

struct blest_state {
	struct sched_stats_conn stats;
	u64 next_update_us;	/* end of the current lambda period */
	u64 rtx_una;		/* v095: snd_una at the last timeout re-send */
	u32 lambda;		/* thousandths */
	u32 slow_tag;		/* v095: the subflow slow_srtt_max is of */
	u32 slow_srtt_max;	/* v095: its largest sRTT seen, us */
	bool blocked;		/* paper: window ran out this period */
	bool full;		/* paper: the window was full at the last call */
	bool rtx_pending;	/* v095: rtx_una is set */
};

/* BLEST's own counters, beside sched_util.h's; thousandths x us */
static atomic64_t blest_lambda_sum, blest_lambda_us, blest_at_min_us,
		  blest_at_max_us, blest_skips, blest_slow_sends;

static int blest_stats_get(char *buf, const struct kernel_param *kp)
{
	int n = sched_stats_show(buf);

	n += scnprintf(buf + n, PAGE_SIZE - n,
		       "lambda_sum %lld\nlambda_us %lld\nlambda_at_min_us %lld\n"
		       "lambda_at_max_us %lld\nslow_skips %lld\nslow_sends %lld\n",
		       atomic64_read(&blest_lambda_sum),
		       atomic64_read(&blest_lambda_us),
		       atomic64_read(&blest_at_min_us),
		       atomic64_read(&blest_at_max_us),
		       atomic64_read(&blest_skips),
		       atomic64_read(&blest_slow_sends));
	return n;
}

static const struct kernel_param_ops blest_stats_ops = {
	.set = sched_stats_set,
	.get = blest_stats_get,
};

module_param_cb(stats, &blest_stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats, SCHED_STATS_DESC);

static void blest_init(struct mptcp_sock *msk)
{
	struct blest_state *st = mptcp_sched_priv(msk);

	st->lambda = clamp(blest_get(&lambda_init), blest_get(&lambda_min),
			   blest_get(&lambda_max));
}

/* lambda over the @busy_us just past: its value, and whether at a bound */
static void blest_account(const struct blest_state *st, u64 busy_us)
{
	if (!busy_us)
		return;
	atomic64_add((u64)st->lambda * busy_us, &blest_lambda_sum);
	atomic64_add(busy_us, &blest_lambda_us);
	if (st->lambda <= blest_get(&lambda_min))
		atomic64_add(busy_us, &blest_at_min_us);
	if (st->lambda >= blest_get(&lambda_max))
		atomic64_add(busy_us, &blest_at_max_us);
}

/* Move lambda @n steps up or down, within its bounds. */
static void blest_step_n(struct blest_state *st, bool up, u64 n)
{
	bool given = READ_ONCE(delta.given);
	u32 lo = blest_get(&lambda_min), hi = blest_get(&lambda_max);
	u64 step;

	if (READ_ONCE(rules.val) == BLEST_V095 && !given)
		step = up ? BLEST_V095_UP : BLEST_V095_DOWN;
	else
		step = blest_get(&delta);
	step *= min_t(u64, n, U32_MAX);
	if (up)
		st->lambda = min_t(u64, (u64)st->lambda + step, hi);
	else
		st->lambda = st->lambda > lo + step ? st->lambda - step : lo;
}

static void blest_step(struct blest_state *st, bool up)
{
	blest_step_n(st, up, 1);
}

/* paper: once per RTT of the fastest subflow, move lambda by delta;
 * @reinject: the kernel asks for the segment that blocks the window to be
 * re-sent.
 */
static void blest_update_paper(struct blest_state *st,
			       const struct mptcp_sched_subflow_info *fast,
			       const struct mptcp_sched_conn_info *conn,
			       bool reinject)
{
	bool full = conn->pending_bytes &&
		    conn->inflight_bytes + fast->mss > conn->snd_wnd;
	bool was_full = st->full;
	u64 now = tcp_clock_us(), missed;

	st->full = full;
	if (reinject || full)
		st->blocked = true;

	if (!st->next_update_us) {
		st->next_update_us = now + fast->srtt_us;
		return;
	}
	if (now < st->next_update_us)
		return;

	/* Every RTT_F counts, also those that passed without a scheduler
	 * call: the window was then as the last call saw it.  The kernel
	 * seldom calls while the window is full, and one step per call let a
	 * blocked stretch of many RTT_F earn one step up against a step down
	 * for each unblocked RTT_F: lambda's mean was 0.37 with the window
	 * blocked 35 % of the busy time (one 64 MiB blest-3g-wlan run).
	 */
	missed = div64_u64(now - st->next_update_us, max(fast->srtt_us, 1U));
	blest_step(st, st->blocked);
	if (missed)
		blest_step_n(st, was_full, missed);
	st->blocked = false;
	st->next_update_us = now + fast->srtt_us;
}

static u32 blest_min_rtt(const struct sched_view *v, int i)
{
	u32 min_rtt = tcp_min_rtt(tcp_sk(mptcp_sched_subflow_sk(v->ctx[i])));

	/* no sample in the window yet: ~0U */
	return min(min_rtt, v->info[i].srtt_us);
}

/* v095: a timeout re-send is pending until snd_una moves; lambda moves at
 * most once per minimum RTT of the slowest subflow, whose largest sRTT is
 * tracked here for the linger time.
 */
static void blest_update_v095(struct mptcp_sock *msk, struct blest_state *st,
			      const struct sched_view *v,
			      const struct mptcp_sched_conn_info *conn,
			      bool reinject)
{
	u64 now = tcp_clock_us();
	int i, slow = -1;
	u32 tag;

	if (reinject && !mptcp_sched_opportunistic(msk)) {
		st->rtx_una = conn->snd_una;
		st->rtx_pending = true;
	} else if (st->rtx_pending && conn->snd_una != st->rtx_una) {
		st->rtx_pending = false;
	}

	for (i = 0; i < v->n; i++)
		if (v->info[i].srtt_us &&
		    (slow < 0 || v->info[i].srtt_us > v->info[slow].srtt_us))
			slow = i;
	if (slow < 0)
		return;
	tag = hash_ptr(v->ctx[slow], 31) + 1;
	if (tag != st->slow_tag) {
		st->slow_tag = tag;
		st->slow_srtt_max = 0;
	}
	st->slow_srtt_max = max(st->slow_srtt_max, v->info[slow].srtt_us);

	if (!st->next_update_us) {
		st->next_update_us = now + blest_min_rtt(v, slow);
		return;
	}
	if (now < st->next_update_us)
		return;
	blest_step(st, st->rtx_pending);
	st->next_update_us = now + blest_min_rtt(v, slow);
}

/* paper: bytes F would send during one RTT_S, times lambda */
static u64 blest_fast_bytes_paper(const struct blest_state *st,
				  const struct mptcp_sched_subflow_info *fast,
				  const struct mptcp_sched_subflow_info *slow)
{
	u64 rtts, x;

	/* rtts = RTT_S / RTT_F in 1/1024 units; RTT_S >= RTT_F here */
	rtts = div_u64((u64)slow->srtt_us << 10, fast->srtt_us);
	x = (u64)fast->mss * ((u64)fast->cwnd * 1024 + (rtts - 1024) / 2);
	x = (x * rtts) >> 20;
	return div_u64(x * st->lambda, 1000);
}

/* v095: bytes F would send during S's linger time, times lambda */
static u64 blest_fast_bytes_v095(const struct blest_state *st,
				 const struct sched_view *v, int f, int s)
{
	const struct mptcp_sched_subflow_info *fast = &v->info[f];
	const struct mptcp_sched_subflow_info *slow = &v->info[s];
	u64 lo = blest_min_rtt(v, s), hi, linger, n, pkts2, c;
	u64 cwnd = max(slow->cwnd, 1U);

	hi = max_t(u64, st->slow_srtt_max, slow->srtt_us);
	if (st->slow_tag != hash_ptr(v->ctx[s], 31) + 1)
		hi = slow->srtt_us;	/* not the tracked subflow: no history */
	linger = lo + div_u64((hi - lo) * min_t(u64, slow->inflight + 1, cwnd), cwnd);
	linger = max_t(u64, linger, slow->srtt_us);

	n = div_u64(linger, fast->srtt_us) + 1;
	if (fast->cwnd < fast->ssthresh) {	/* slow start */
		pkts2 = 2 * (u64)fast->cwnd * ((1ULL << min_t(u64, n, 16)) - 1);
	} else {
		c = max_t(u64, fast->cwnd, (u64)fast->ssthresh + 1);
		pkts2 = (2 * c + n - 1) * n;	/* twice (c + (n - 1) / 2) * n */
	}
	return div_u64(pkts2 * fast->mss * st->lambda, 2000);
}

/* Would a segment on @s block the fast subflow @f? */
static bool blest_would_block(const struct blest_state *st,
			      const struct sched_view *v, int f, int s,
			      const struct mptcp_sched_conn_info *conn)
{
	const struct mptcp_sched_subflow_info *slow = &v->info[s];
	u64 x, need, used;

	if (READ_ONCE(rules.val) == BLEST_V095)
		x = blest_fast_bytes_v095(st, v, f, s);
	else
		x = blest_fast_bytes_paper(st, &v->info[f], slow);

	used = (u64)slow->inflight + DIV_ROUND_UP(slow->notsent_bytes, max(slow->mss, 1U));
	need = (u64)slow->mss * (used + 1);
	if (need >= conn->snd_wnd)
		return true;
	return x > conn->snd_wnd - need;
}

static int blest_pick(struct mptcp_sock *msk, struct blest_state *st,
		      const struct mptcp_sched_data *data,
		      const struct sched_view *v)
{
	struct mptcp_sched_conn_info conn;
	int fast, pick;

	fast = sched_min_rtt(v, false);
	pick = sched_min_rtt(v, true);
	mptcp_sched_conn_info(msk, &conn);
	if (READ_ONCE(rules.val) == BLEST_V095)
		blest_update_v095(msk, st, v, &conn, data->reinject);
	else if (fast >= 0 && v->info[fast].srtt_us)
		blest_update_paper(st, &v->info[fast], &conn, data->reinject);
	if (data->reinject) {
		/* the segment holding the window: re-sent by minrtt_pr's rules
		 * (MPTCP v0.90's, which the paper's BLEST was built on),
		 * without penalisation unless asked (the paper: BLEST does
		 * without it; its Table II still counts BLEST's re-sends)
		 */
		int best = sched_orp(msk, v, blest_get(&penalise), 4000);

		if (best == SCHED_ORP_SKIP)
			return -EAGAIN;
		return sched_mark(v, best < 0 ? pick : best);
	}
	if (fast < 0 || pick < 0 || pick == fast)
		return sched_mark(v, pick);

	/* without RTT samples there is nothing to estimate: act as minrtt */
	if (!v->info[fast].srtt_us || !v->info[pick].srtt_us)
		return sched_mark(v, pick);

	if (blest_would_block(st, v, fast, pick, &conn)) {
		atomic64_inc(&blest_skips);
		return -EAGAIN;
	}
	atomic64_inc(&blest_slow_sends);
	return sched_mark(v, pick);
}

static int blest_get_subflow(struct mptcp_sock *msk,
			     struct mptcp_sched_data *data)
{
	struct blest_state *st = mptcp_sched_priv(msk);
	struct sched_view v;

	sched_view_init(&v, data);
	/* lambda's time is counted before this call may move it */
	blest_account(st, sched_stats_account(msk, data, &v, &st->stats));
	return sched_stats_done(msk, data, blest_pick(msk, st, data, &v));
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
