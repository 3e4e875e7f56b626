/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by the mptlab MPTCP schedulers: a snapshot of every
 * subflow and the classic "lowest RTT first" choices.
 */
#ifndef _MPTLAB_SCHED_UTIL_H
#define _MPTLAB_SCHED_UTIL_H

#include <linux/ipv6.h>
#include <linux/moduleparam.h>
#include <linux/spinlock.h>
#include <net/inet_connection_sock.h>
#include <net/ipv6.h>
#include <net/mptcp.h>
#include <net/tcp.h>

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

/* Mechanism counters (issue 39): what regime a run is in, not a decision
 * input.  Module-global, summed over the connections the module schedules
 * (a bulk run has one data connection, plus iperf3's control connection,
 * which sends little); each module has its own copy (this header is
 * included, not linked) and reports it in one read-only module parameter,
 * /sys/module/<module>/parameters/stats: a parameter rather than debugfs
 * because the guest already reads /sys/module for provenance and debugfs
 * need not be mounted there; one file rather than one per counter so that
 * a read is one consistent snapshot (taken under the lock).  Lines of
 * "name value", "blocked_pair SADDR DADDR us" per address pair.
 *
 * Time is accounted at each scheduler call: the state found at a call is
 * taken to hold until the connection's next call.  The kernel calls at
 * every push and ACK while data waits, so the error is at most the gap
 * between two ACKs; while the window stays full after the one re-send a
 * blocking segment gets, nothing calls until the window opens, and that
 * whole gap is correctly counted as blocked.
 *
 * busy: more than one segment of data waited to be sent, so more remains
 * after this call's pick (the shares' denominator).  Not "data in flight":
 * no call comes when the last data is acknowledged, so a connection that
 * went idle would count as busy until its next send; iperf3's control
 * connection (MPTCP too) sends a few small messages over the whole run and
 * counted 3 times a 6 MiB transfer's duration that way.  Time from first
 * to last call (observed_us) has the same fault.
 * blocked: data waits, a subflow has cwnd and send-buffer room, and the
 * connection-level window has no room for one more segment of it (the
 * kernel's own test for asking for an opportunistic re-send, patch 0001).
 * Split by the address pair of the subflow holding the oldest
 * unacknowledged data; of several carriers (it was re-sent) the slowest,
 * which is where it was first sent since re-sends go to faster subflows;
 * "unheld" when none carried it (a zero window) or the pair table is full.
 */
#define SCHED_STATS_PAIRS	8

struct sched_stats_pair {
	struct in6_addr saddr, daddr;	/* IPv4 as v4-mapped */
	u64 blocked_us;
};

struct sched_stats {
	spinlock_t lock;
	u64 calls, observed_us, busy_us, blocked_us, unheld_us;
	u64 or_lost, or_queued, rto;
	int pairs;
	struct sched_stats_pair pair[SCHED_STATS_PAIRS];
};

static struct sched_stats sched_stats __maybe_unused = {
	.lock = __SPIN_LOCK_UNLOCKED(sched_stats.lock),
};

/* Per connection, in mptcp_sched_priv(): the state at the previous call. */
struct sched_stats_conn {
	u64 last_us;		/* tcp_clock_us() of the previous call; 0: none */
	s8 pair;		/* slot of the pair holding snd_una; -1: unheld */
	u8 busy:1,
	   blocked:1;
};

static inline void sched_stats_addrs(const struct sock *ssk,
				     struct in6_addr *saddr,
				     struct in6_addr *daddr)
{
#if IS_ENABLED(CONFIG_IPV6)
	if (ssk->sk_family == AF_INET6) {
		*saddr = ssk->sk_v6_rcv_saddr;
		*daddr = ssk->sk_v6_daddr;
		return;
	}
#endif
	ipv6_addr_set_v4mapped(inet_sk(ssk)->inet_saddr, saddr);
	ipv6_addr_set_v4mapped(inet_sk(ssk)->inet_daddr, daddr);
}

/* The slot of @ssk's address pair, claimed if new; -1 if the table is full.
 * Called with sched_stats.lock held.
 */
static inline int sched_stats_slot(const struct sock *ssk)
{
	struct in6_addr saddr, daddr;
	int i;

	sched_stats_addrs(ssk, &saddr, &daddr);
	for (i = 0; i < sched_stats.pairs; i++)
		if (ipv6_addr_equal(&sched_stats.pair[i].saddr, &saddr) &&
		    ipv6_addr_equal(&sched_stats.pair[i].daddr, &daddr))
			return i;
	if (i == SCHED_STATS_PAIRS)
		return -1;
	sched_stats.pair[i].saddr = saddr;
	sched_stats.pair[i].daddr = daddr;
	sched_stats.pairs++;
	return i;
}

/* The slowest subflow that carried the oldest unacknowledged data, or NULL.
 * Every subflow, not only the view's: a backup or a failing subflow can
 * hold it too.
 */
static inline struct sock *sched_stats_holder(struct mptcp_sock *msk,
					      const struct mptcp_sched_data *data)
{
	struct sock *ssk, *holder = NULL;
	int i;

	for (i = 0; i < data->subflows; i++) {
		if (!mptcp_sched_rtx_head_sent_on(msk, data->contexts[i]))
			continue;
		ssk = mptcp_sched_subflow_sk(data->contexts[i]);
		if (!holder || tcp_sk(ssk)->srtt_us > tcp_sk(holder)->srtt_us)
			holder = ssk;
	}
	return holder;
}

/* Account the time since @c's previous call to the state found then, and
 * record the state now.  Returns the time that counted as busy (the
 * interval, if the connection had data outstanding at the previous call),
 * for a module's own time-weighted counters.
 */
static inline u64 sched_stats_account(struct mptcp_sock *msk,
				      const struct mptcp_sched_data *data,
				      const struct sched_view *v,
				      struct sched_stats_conn *c)
{
	int room = sched_min_rtt(v, true), pair = -1;
	struct mptcp_sched_conn_info conn;
	struct sock *holder = NULL;
	u64 now = tcp_clock_us();
	u64 dt = c->last_us ? now - c->last_us : 0;
	bool blocked;

	mptcp_sched_conn_info(msk, &conn);
	blocked = conn.pending_bytes && room >= 0 &&
		  conn.inflight_bytes + v->info[room].mss >= conn.snd_wnd;
	if (blocked)
		holder = sched_stats_holder(msk, data);

	spin_lock_bh(&sched_stats.lock);
	sched_stats.calls++;
	sched_stats.observed_us += dt;
	if (c->busy)
		sched_stats.busy_us += dt;
	if (c->blocked) {
		sched_stats.blocked_us += dt;
		if (c->pair >= 0)
			sched_stats.pair[c->pair].blocked_us += dt;
		else
			sched_stats.unheld_us += dt;
	}
	if (holder)
		pair = sched_stats_slot(holder);
	spin_unlock_bh(&sched_stats.lock);

	dt = c->busy ? dt : 0;
	c->last_us = now;
	c->busy = room >= 0 ? conn.pending_bytes > v->info[room].mss :
			      conn.pending_bytes > 0;
	c->blocked = blocked;
	c->pair = pair;
	return dt;
}

/* After a reinject call that marked a subflow (@ret 0): count the re-send
 * by cause.  An MPTCP-level timeout re-send is "rto".  An opportunistic one
 * is "lost" when a subflow that carried the blocking data is recovering a
 * loss (TCP_CA_Recovery or TCP_CA_Loss), else "queued": it is still queued
 * or in flight on a slower subflow.  Which of that subflow's segments was
 * lost is not visible to a scheduler (it would need the subflow's sequence
 * of the data and that subflow's lock), so a carrier recovering another
 * segment counts as "lost" too.  Counted when decided: the kernel then
 * sends at most one MSS from the head, and nothing if the subflow cannot;
 * the bytes re-sent are upstream's bytes_retrans and MPTcpExt's counters.
 */
static inline int sched_stats_done(struct mptcp_sock *msk,
				   const struct mptcp_sched_data *data, int ret)
{
	bool lost = false;
	struct sock *ssk;
	int i;

	if (!data->reinject || ret)
		return ret;
	if (!mptcp_sched_opportunistic(msk)) {
		spin_lock_bh(&sched_stats.lock);
		sched_stats.rto++;
		spin_unlock_bh(&sched_stats.lock);
		return ret;
	}
	for (i = 0; i < data->subflows; i++) {
		if (!mptcp_sched_rtx_head_sent_on(msk, data->contexts[i]))
			continue;
		ssk = mptcp_sched_subflow_sk(data->contexts[i]);
		if (inet_csk(ssk)->icsk_ca_state >= TCP_CA_Recovery)
			lost = true;
	}
	spin_lock_bh(&sched_stats.lock);
	if (lost)
		sched_stats.or_lost++;
	else
		sched_stats.or_queued++;
	spin_unlock_bh(&sched_stats.lock);
	return ret;
}

static inline int sched_stats_addr(char *buf, int size, const struct in6_addr *a)
{
	if (ipv6_addr_v4mapped(a))
		return scnprintf(buf, size, " %pI4", &a->s6_addr32[3]);
	return scnprintf(buf, size, " %pI6c", a);
}

/* The counters as text into @buf (a PAGE_SIZE parameter buffer). */
static inline int sched_stats_show(char *buf)
{
	struct sched_stats s;
	int i, n;

	spin_lock_bh(&sched_stats.lock);
	s = sched_stats;
	spin_unlock_bh(&sched_stats.lock);
	n = scnprintf(buf, PAGE_SIZE,
		      "calls %llu\nobserved_us %llu\nbusy_us %llu\nblocked_us %llu\n"
		      "unheld_us %llu\nor_lost %llu\nor_queued %llu\nrto %llu\n",
		      s.calls, s.observed_us, s.busy_us, s.blocked_us,
		      s.unheld_us, s.or_lost, s.or_queued, s.rto);
	for (i = 0; i < s.pairs; i++) {
		n += scnprintf(buf + n, PAGE_SIZE - n, "blocked_pair");
		n += sched_stats_addr(buf + n, PAGE_SIZE - n, &s.pair[i].saddr);
		n += sched_stats_addr(buf + n, PAGE_SIZE - n, &s.pair[i].daddr);
		n += scnprintf(buf + n, PAGE_SIZE - n, " %llu\n",
			       s.pair[i].blocked_us);
	}
	return n;
}

/* Read only: a value given at load time is refused (EPERM), not ignored. */
static inline int sched_stats_set(const char *val, const struct kernel_param *kp)
{
	pr_err("%s: read only\n", kp->name);
	return -EPERM;
}

static inline int sched_stats_get(char *buf, const struct kernel_param *kp)
{
	return sched_stats_show(buf);
}

static const struct kernel_param_ops sched_stats_ops __maybe_unused = {
	.set = sched_stats_set,
	.get = sched_stats_get,
};

#define SCHED_STATS_DESC "mechanism counters since load, all connections (read only; docs/schedulers.md)"

static inline int sched_mark(const struct sched_view *v, int i)
{
	if (i < 0)
		return -EAGAIN;
	mptcp_subflow_set_scheduled(v->ctx[i], true);
	return 0;
}

#endif /* _MPTLAB_SCHED_UTIL_H */
