// SPDX-License-Identifier: GPL-2.0
/* MPTCP scheduler "cp": constraint-based proactive scheduling.
 *
 * Oh, Lee, "Constraint-based proactive scheduling for MPTCP in wireless
 * networks", Elsevier, 2015 (mptlab seed 004), Sec. 3, Fig. 3.
 *
 * Lowest RTT first, but a slower subflow j gets data only when the
 * receiver's buffer can hold what the faster subflows will deliver out of
 * order while a segment on j is under way.  With the subflows ranked by
 * sRTT (k < j: k is faster), P_k the packets k has in flight and
 * L = floor(RTT_j / RTT_k) - 1 (0 when the ratio is below 2), k sends
 *
 *	D_kj = P_k * (2^L - 1)				in slow start
 *	D_kj = L * P_k + L * (L - 1) / 2		in congestion avoidance
 *
 * packets during RTT_j (the second term only when k fills its cwnd), and
 * the buffer needed to use j is B_1j = sum over k < j of D_kj * MSS_k.
 * When the fastest subflow's cwnd is full, the next subflow j (by rank)
 * with cwnd space is used if
 *
 *	mode=rad:  B_1j <= A
 *	mode=cons: the fastest is in congestion avoidance, 2 * P_1 * MSS_1 <= A
 *		   and B_1j + (bytes in flight on the connection) <= A
 *
 * A being the available receive buffer, and (if D_c is set) RTT_j <= D_c.
 * A subflow denied because B_1j > A is paused: the time, the connection's
 * snd_una and a pause count N are recorded, and after a guard time of
 * beta * RTT_j (static probing) or beta * RTT_j * N (dynamic), at most
 * guard_max_ms, if snd_una has moved, the pause is renewed (N + 1); from
 * the second pause on, each renewal lets probe_pkts segments through, so
 * that j's RTT estimate stays current.  The paper runs Rad with dynamic
 * and Cons with static probing (probing=auto), beta 4, T_max 2 s,
 * C_est = the initial cwnd (10).  Counters: /sys/module/mptcp_cp/
 * parameters/pauses and probes (all connections).
 *
 * What differs from the paper, and why:
 * - A, and the paper's RWND, is the connection-level send window |M|
 *   (the peer's advertised window from snd_una; what v0.88's scheduler
 *   saw as the meta socket's window): a sender cannot see the peer's
 *   buffer.  rcvbuf=<bytes> bounds A further, to schedule for a known
 *   receive buffer.
 * - The congestion-avoidance increase is Reno's (+1 packet per RTT, the
 *   paper's uncoupled case) whatever the control: LIA, OLIA and BALIA grow
 *   no faster, so B_1j is an upper bound for them; CUBIC's eq. (7) is not
 *   used.
 * - D_c is tested before the probing step (Fig. 3 tests it after, which
 *   refuses the same segments but spends probe budget); a path over D_c
 *   is never probed, so its RTT estimate is not refreshed, as in the
 *   paper.  dc_ms is a static D_c, dc_rtt one relative to the fastest
 *   subflow's sRTT (the paper's Figs. 13-14: 2 x); the smaller applies.
 * - N is never reset (the paper leaves it open); probing state is kept
 *   for up to 4 slower subflows per connection (64 bytes of scheduler
 *   state), matched by a hash of the subflow; with more, the extra ones
 *   are refused without probing.
 * - A subflow without an RTT sample is used as minrtt would (the paper:
 *   "the default scheduling").
 * - The paper turns OR&P off except in its Sec. 4.3; mptlab's kernel asks
 *   the scheduler to re-send a segment that blocks the connection-level
 *   window (reinject) for every per-segment scheduler.  orp=0 answers it
 *   as minrtt, orp=1 as minrtt_pr: on the fastest subflow with space that
 *   has not carried it, halving the cwnd of slower ones that did.
 */
#include <linux/module.h>
#include <linux/hash.h>
#include <linux/string.h>
#include <net/tcp.h>
#include "sched_util.h"

enum { CP_RAD, CP_CONS };
enum { CP_PROBE_AUTO, CP_PROBE_STATIC, CP_PROBE_DYNAMIC };

/* A module parameter that takes one of a few words. */
struct cp_choice {
	int val;
	const char * const *names;
	unsigned int n;
};

static int cp_choice_set(const char *val, const struct kernel_param *kp)
{
	struct cp_choice *c = kp->arg;
	int i = __sysfs_match_string(c->names, c->n, val);

	if (i < 0)
		return i;
	WRITE_ONCE(c->val, i);
	return 0;
}

static int cp_choice_get(char *buf, const struct kernel_param *kp)
{
	const struct cp_choice *c = kp->arg;

	return scnprintf(buf, PAGE_SIZE, "%s\n", c->names[READ_ONCE(c->val)]);
}

static const struct kernel_param_ops cp_choice_ops = {
	.set = cp_choice_set,
	.get = cp_choice_get,
};

static const char * const cp_modes[] = { "rad", "cons" };
static struct cp_choice mode = { CP_CONS, cp_modes, ARRAY_SIZE(cp_modes) };
module_param_cb(mode, &cp_choice_ops, &mode, 0644);
MODULE_PARM_DESC(mode, "rad (radical) or cons (conservative, default)");

static const char * const cp_probings[] = { "auto", "static", "dynamic" };
static struct cp_choice probing = { CP_PROBE_AUTO, cp_probings, ARRAY_SIZE(cp_probings) };
module_param_cb(probing, &cp_choice_ops, &probing, 0644);
MODULE_PARM_DESC(probing, "guard time: static, dynamic, or auto (default: rad dynamic, cons static)");

static unsigned int beta __read_mostly = 4000;
module_param(beta, uint, 0644);
MODULE_PARM_DESC(beta, "guard time in RTTs of the paused subflow, thousandths (default 4000 = 4)");

static unsigned int guard_max_ms __read_mostly = 2000;
module_param(guard_max_ms, uint, 0644);
MODULE_PARM_DESC(guard_max_ms, "longest guard time, ms (default 2000)");

static unsigned int probe_pkts __read_mostly = TCP_INIT_CWND;
module_param(probe_pkts, uint, 0644);
MODULE_PARM_DESC(probe_pkts, "segments per probe of a paused subflow (default 10, the initial cwnd)");

static unsigned int dc_ms __read_mostly;
module_param(dc_ms, uint, 0644);
MODULE_PARM_DESC(dc_ms, "delay constraint: no data on a slower subflow whose sRTT exceeds this, ms (default 0: off)");

static unsigned int dc_rtt __read_mostly;
module_param(dc_rtt, uint, 0644);
MODULE_PARM_DESC(dc_rtt, "delay constraint relative to the fastest sRTT, thousandths (default 0: off; the paper: 2000)");

static unsigned long rcvbuf __read_mostly;
module_param(rcvbuf, ulong, 0644);
MODULE_PARM_DESC(rcvbuf, "receive buffer to schedule for, bytes: bounds the advertised window (default 0: the window alone)");

static bool orp;
module_param(orp, bool, 0644);
MODULE_PARM_DESC(orp, "opportunistic retransmission and penalisation as minrtt_pr (default: off, as minrtt)");

static unsigned long pauses;
module_param(pauses, ulong, 0444);
MODULE_PARM_DESC(pauses, "subflow pauses so far (N_j increments, all connections)");

static unsigned long probes;
module_param(probes, ulong, 0444);
MODULE_PARM_DESC(probes, "probe segments let through so far (all connections)");

#define CP_PATHS	4

struct cp_path {		/* a slower subflow's pause state */
	u32 tag;		/* cp_tag() of the subflow; 0: free */
	u32 t_pause;		/* T_j^pause, ms */
	u32 s_pause;		/* S_j^pause: the connection's snd_una, low 32 bits */
	u16 n_pause;		/* N_j^pause */
	u16 c_est;		/* probe segments left, C_j^estimation */
};

struct cp_state {
	struct cp_path path[CP_PATHS];
};

static u32 cp_tag(const struct mptcp_subflow_context *ctx)
{
	return hash_ptr(ctx, 31) + 1;
}

/* @ctx's pause state; a slot of a subflow that has gone is reused. */
static struct cp_path *cp_path(struct cp_state *st, const struct sched_view *v,
			       const struct mptcp_subflow_context *ctx)
{
	struct cp_path *spare = NULL;
	u32 tag = cp_tag(ctx);
	int i, k;

	for (i = 0; i < CP_PATHS; i++) {
		struct cp_path *p = &st->path[i];

		if (p->tag == tag)
			return p;
		for (k = 0; k < v->n && p->tag != cp_tag(v->ctx[k]); k++)
			;
		if (!spare && k == v->n)
			spare = p;
	}
	if (spare) {
		memset(spare, 0, sizeof(*spare));
		spare->tag = tag;
	}
	return spare;
}

/* D_kj: packets the faster subflow @k sends during one RTT of j. */
static u64 cp_ooo_pkts(const struct mptcp_sched_subflow_info *k, u32 rtt_j)
{
	u64 l = rtt_j / k->srtt_us, p = k->inflight;

	if (l < 2)
		return 0;
	l = min_t(u64, l - 1, U16_MAX);
	if (k->cwnd < k->ssthresh)	/* slow start: doubles every RTT_k */
		return min_t(u64, p * ((1ULL << min_t(u64, l, 24)) - 1), U32_MAX);
	if (p < k->cwnd)		/* cannot fill its cwnd: no increase */
		return l * p;
	return l * p + l * (l - 1) / 2;
}

/* B_1j in bytes, for the subflow at rank @r of @order. */
static u64 cp_required(const struct sched_view *v, const int *order, int r)
{
	u32 rtt_j = v->info[order[r]].srtt_us;
	u64 b = 0;
	int i;

	for (i = 0; i < r; i++) {
		const struct mptcp_sched_subflow_info *k = &v->info[order[i]];

		b += cp_ooo_pkts(k, rtt_j) * k->mss;
	}
	return b;
}

static u64 cp_guard_ms(const struct cp_path *p, const struct mptcp_sched_subflow_info *j)
{
	int how = READ_ONCE(probing.val);
	u64 us = div_u64((u64)j->srtt_us * beta, 1000);

	if (how == CP_PROBE_DYNAMIC ||
	    (how == CP_PROBE_AUTO && READ_ONCE(mode.val) == CP_RAD))
		us *= p->n_pause;
	return min_t(u64, div_u64(us, 1000), guard_max_ms);
}

/* B_1j exceeds the buffer: pause @j, renew its pause, or probe it. */
static bool cp_probe(struct cp_state *st, const struct sched_view *v, int j,
		     const struct mptcp_sched_conn_info *conn)
{
	struct cp_path *p = cp_path(st, v, v->ctx[j]);
	u32 now = (u32)tcp_clock_ms(), una = (u32)conn->snd_una;

	if (!p)
		return false;
	if (!p->n_pause ||
	    (now - p->t_pause > cp_guard_ms(p, &v->info[j]) &&
	     (s32)(una - p->s_pause) > 0)) {
		p->t_pause = now;
		p->s_pause = una;
		p->n_pause = min_t(u32, p->n_pause + 1, U16_MAX);
		p->c_est = min_t(u32, probe_pkts, U16_MAX);
		pauses++;
		return false;
	}
	if (p->n_pause < 2 || !p->c_est)
		return false;
	p->c_est--;
	probes++;
	return true;
}

/* May the subflow at rank @r (not the fastest) carry the next segment? */
static bool cp_allowed(struct cp_state *st, const struct sched_view *v,
		       const int *order, int r,
		       const struct mptcp_sched_conn_info *conn, u64 avail)
{
	const struct mptcp_sched_subflow_info *f = &v->info[order[0]];
	const struct mptcp_sched_subflow_info *sj = &v->info[order[r]];
	bool cons = READ_ONCE(mode.val) == CP_CONS;
	u64 dc = U64_MAX, need;

	if (!sj->srtt_us)
		return true;
	if (cons && (f->cwnd < f->ssthresh ||
		     2ULL * f->inflight * f->mss > avail))
		return false;
	if (dc_ms)
		dc = (u64)dc_ms * 1000;
	if (dc_rtt)
		dc = min_t(u64, dc, div_u64((u64)f->srtt_us * dc_rtt, 1000));
	if (sj->srtt_us > dc)
		return false;

	need = cp_required(v, order, r);
	if (need > avail)
		return cp_probe(st, v, order[r], conn);
	return !cons || need + conn->inflight_bytes <= avail;
}

/* The subflows by ascending sRTT (unmeasured last), stable. */
static void cp_rank(const struct sched_view *v, int *order)
{
	int i, k;

	for (i = 0; i < v->n; i++) {
		for (k = i; k > 0 &&
		     sched_rtt_key(&v->info[order[k - 1]]) > sched_rtt_key(&v->info[i]); k--)
			order[k] = order[k - 1];
		order[k] = i;
	}
}

/* The blocking segment: as minrtt, or with OR&P as minrtt_pr. */
static int cp_reinject(struct mptcp_sock *msk, const struct sched_view *v)
{
	int best = orp ? sched_orp(msk, v, true, 4000) : SCHED_ORP_NONE;

	if (best == SCHED_ORP_SKIP)
		return -EAGAIN;
	if (best < 0)
		best = sched_min_rtt(v, true);
	return sched_mark(v, best);
}

static int cp_get_subflow(struct mptcp_sock *msk, struct mptcp_sched_data *data)
{
	struct cp_state *st = mptcp_sched_priv(msk);
	int order[MPTCP_SUBFLOWS_MAX];
	struct mptcp_sched_conn_info conn;
	struct sched_view v;
	u64 avail;
	int r;

	sched_view_init(&v, data);
	if (data->reinject)
		return cp_reinject(msk, &v);
	if (!v.n)
		return -EAGAIN;

	cp_rank(&v, order);
	if (v.info[order[0]].cwnd_avail && v.info[order[0]].memory_free)
		return sched_mark(&v, order[0]);
	if (!v.info[order[0]].srtt_us)	/* nothing measured yet */
		return sched_mark(&v, sched_min_rtt(&v, true));

	mptcp_sched_conn_info(msk, &conn);
	avail = conn.snd_wnd;
	if (rcvbuf)
		avail = min_t(u64, avail, rcvbuf);
	for (r = 1; r < v.n; r++) {
		const struct mptcp_sched_subflow_info *info = &v.info[order[r]];

		if (!info->cwnd_avail || !info->memory_free)
			continue;
		if (cp_allowed(st, &v, order, r, &conn, avail))
			return sched_mark(&v, order[r]);
	}
	return -EAGAIN;
}

/* The re-send counters only: the 64 bytes of per-connection state are all
 * taken by the plan (or the probing state), which leaves no room for the
 * state the time counters need (sched_util.h).
 */
module_param_cb(stats, &sched_stats_ops, NULL, 0444);
MODULE_PARM_DESC(stats, SCHED_STATS_DESC);

static int cp_get_subflow_counted(struct mptcp_sock *msk,
				  struct mptcp_sched_data *data)
{
	return sched_stats_done(msk, data, cp_get_subflow(msk, data));
}

static struct mptcp_sched_ops cp_ops = {
	.get_subflow	= cp_get_subflow_counted,
	.name		= "cp",
	.owner		= THIS_MODULE,
};

static int __init cp_register(void)
{
	BUILD_BUG_ON(sizeof(struct cp_state) > MPTCP_SCHED_PRIV_SIZE);
	return mptcp_register_scheduler(&cp_ops);
}

static void __exit cp_unregister(void)
{
	mptcp_unregister_scheduler(&cp_ops);
}

module_init(cp_register);
module_exit(cp_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP constraint-based proactive (CP) scheduler (Oh, Lee, 2015)");
