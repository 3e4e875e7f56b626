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

/* Opportunistic retransmission and penalisation (Raiciu et al., NSDI 2012)
 * for a reinject call (patch 0005): the fastest subflow with room that has
 * not carried the blocking segment yet; with @penalise, every slower subflow
 * that did carry it has its cwnd halved (at most once per its RTT).  -1 if
 * there is none: every subflow carried it (an MPTCP-level RTO).
 */
static inline int sched_orp(struct mptcp_sock *msk,
			    const struct sched_view *v, bool penalise)
{
	int i, best = -1;

	for (i = 0; i < v->n; i++) {
		const struct mptcp_sched_subflow_info *info = &v->info[i];

		if (!info->cwnd_avail || !info->memory_free ||
		    mptcp_sched_rtx_head_sent_on(msk, v->ctx[i]))
			continue;
		if (best < 0 || sched_rtt_key(info) < sched_rtt_key(&v->info[best]))
			best = i;
	}
	for (i = 0; best >= 0 && penalise && i < v->n; i++) {
		if (i == best ||
		    !mptcp_sched_rtx_head_sent_on(msk, v->ctx[i]) ||
		    sched_rtt_key(&v->info[i]) <= sched_rtt_key(&v->info[best]))
			continue;
		mptcp_sched_penalise(v->ctx[i]);
	}
	return best;
}

static inline int sched_mark(const struct sched_view *v, int i)
{
	if (i < 0)
		return -EAGAIN;
	mptcp_subflow_set_scheduled(v->ctx[i], true);
	return 0;
}

#endif /* _MPTLAB_SCHED_UTIL_H */
