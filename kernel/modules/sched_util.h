/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by the mptlab MPTCP schedulers: a snapshot of every
 * subflow and the classic "lowest RTT first" choices.
 */
#ifndef _MPTLAB_SCHED_UTIL_H
#define _MPTLAB_SCHED_UTIL_H

#include <net/mptcp.h>

struct sched_view {
	int n;
	struct mptcp_subflow_context *ctx[MPTCP_SUBFLOWS_MAX];
	struct mptcp_sched_subflow_info info[MPTCP_SUBFLOWS_MAX];
};

/* Fill @v with the active subflows; backup subflows only when no active
 * regular subflow exists (the MPTCP backup semantics).
 */
static inline void sched_view_init(struct sched_view *v,
				   const struct mptcp_sched_data *data)
{
	struct mptcp_sched_subflow_info tmp;
	bool want_backup = true;
	int i;

	for (i = 0; i < data->subflows; i++) {
		mptcp_sched_subflow_info(data->contexts[i], &tmp);
		if (tmp.active && !tmp.backup)
			want_backup = false;
	}

	v->n = 0;
	for (i = 0; i < data->subflows; i++) {
		struct mptcp_sched_subflow_info *info = &v->info[v->n];

		mptcp_sched_subflow_info(data->contexts[i], info);
		if (!info->active || info->backup != want_backup)
			continue;
		v->ctx[v->n++] = data->contexts[i];
	}
}

/* A subflow with no RTT sample yet sorts after every measured one. */
static inline u64 sched_rtt_key(const struct mptcp_sched_subflow_info *info)
{
	return info->srtt_us ? info->srtt_us : U64_MAX;
}

/* Index of the lowest-RTT subflow; with @need_space only among those whose
 * cwnd admits another segment and whose send buffer has room.  -1 if none.
 */
static inline int sched_min_rtt(const struct sched_view *v, bool need_space)
{
	int i, best = -1;

	for (i = 0; i < v->n; i++) {
		const struct mptcp_sched_subflow_info *info = &v->info[i];

		if (need_space && (!info->cwnd_avail || !info->memory_free))
			continue;
		if (best < 0 || sched_rtt_key(info) < sched_rtt_key(&v->info[best]))
			best = i;
	}
	return best;
}

#define SCHED_ORP_NONE	-1	/* every subflow with room carried the segment */
#define SCHED_ORP_SKIP	-2	/* not worth re-sending now (rtt_ratio, carriers) */

/* Opportunistic retransmission and penalisation (Raiciu et al., NSDI 2012),
 * as MPTCP v0.90's default scheduler did it, for a reinject call (patch
 * 0005): the fastest subflow with room that has not carried the blocking
 * segment re-sends it, but only if a subflow that carried it has a cwnd of
 * at most 4 or an sRTT above @rtt_ratio / 1000 times the re-sender's (v0.90:
 * 4000; 0: always); with @penalise, every slower subflow that carried it
 * has its cwnd halved, at most once per the re-sender's sRTT (patch 0010).
 * Both rules are v0.90's for the opportunistic re-send only: a
 * retransmission after an MPTCP-level timeout goes to the fastest subflow
 * with room that has not carried it, unconditionally (patch 0010).  The
 * index of the re-sender, SCHED_ORP_NONE (every subflow with room carried
 * it, after an MPTCP-level timeout) or SCHED_ORP_SKIP (not worth it, or no
 * subflow with room lacks it for an opportunistic re-send).  Which subflows
 * carried it is known per byte since patch 0013 (per 32 KiB fragment
 * before, which marked most fragments as carried by every subflow).
 */
static inline int sched_orp(struct mptcp_sock *msk, const struct sched_view *v,
			    bool penalise, u32 rtt_ratio)
{
	bool opportunistic = mptcp_sched_opportunistic(msk);
	const struct mptcp_sched_subflow_info *b;
	bool resend = !rtt_ratio || !opportunistic;
	bool decided = resend;
	int i, best = -1;

	for (i = 0; i < v->n; i++) {
		const struct mptcp_sched_subflow_info *info = &v->info[i];

		if (!info->cwnd_avail || !info->memory_free ||
		    mptcp_sched_rtx_head_sent_on(msk, v->ctx[i]))
			continue;
		if (best < 0 || sched_rtt_key(info) < sched_rtt_key(&v->info[best]))
			best = i;
	}
	/* No subflow with room lacks the segment.  The opportunistic re-send
	 * then waits for one (the next ACK asks again): re-sent on a subflow
	 * that carried it, it would only queue behind itself there, and it
	 * would use up the one re-send allowed per blocking segment.  v0.90
	 * did not re-send either when its pick had carried it.  A re-send
	 * after an MPTCP-level timeout must go somewhere: the caller's.
	 */
	if (best < 0)
		return opportunistic ? SCHED_ORP_SKIP : SCHED_ORP_NONE;
	b = &v->info[best];
	for (i = 0; i < v->n; i++) {
		const struct mptcp_sched_subflow_info *info = &v->info[i];

		if (i == best || !mptcp_sched_rtx_head_sent_on(msk, v->ctx[i]))
			continue;
		if (penalise && opportunistic && sched_rtt_key(info) > sched_rtt_key(b))
			mptcp_sched_penalise(v->ctx[i], b->srtt_us);
		if (decided)
			continue;
		/* the first carrier with a tiny cwnd, or close enough in RTT
		 * to the re-sender to deliver soon itself, decides
		 */
		if (info->cwnd <= 4) {
			resend = true;
			decided = true;
		} else if ((u64)rtt_ratio * b->srtt_us >= (u64)info->srtt_us * 1000) {
			resend = false;
			decided = true;
		} else {
			resend = true;
		}
	}
	return resend ? best : SCHED_ORP_SKIP;
}

static inline int sched_mark(const struct sched_view *v, int i)
{
	if (i < 0)
		return -EAGAIN;
	mptcp_subflow_set_scheduled(v->ctx[i], true);
	return 0;
}

#endif /* _MPTLAB_SCHED_UTIL_H */
