// SPDX-License-Identifier: GPL-2.0
/* MPTCP scheduler "redundant": every segment on every active subflow.
 *
 * All active subflows are marked together, so the kernel sends new data on
 * one of them and the same bytes on each of the others (ReMP-style).  New
 * data is only scheduled while no active subflow holds more than
 * max_backlog segments queued and not yet sent: the connection moves at the
 * pace of its slowest path and every path transmits every byte, instead of
 * the fast path running ahead and the slow one skipping data that was
 * acknowledged meanwhile.
 */
#include <linux/module.h>
#include "sched_util.h"

static unsigned int max_backlog __read_mostly = 4;
module_param(max_backlog, uint, 0644);
MODULE_PARM_DESC(max_backlog, "segments a subflow may hold unsent before new data waits (default 4)");

static int redundant_get_subflow(struct mptcp_sock *msk,
				 struct mptcp_sched_data *data)
{
	struct sched_view v;
	int i;

	sched_view_init(&v, data);
	if (!v.n)
		return -EAGAIN;

	for (i = 0; i < v.n; i++)
		if (!v.info[i].memory_free ||
		    v.info[i].notsent_bytes > max_backlog * v.info[i].mss)
			return -EAGAIN;

	for (i = 0; i < v.n; i++)
		mptcp_subflow_set_scheduled(v.ctx[i], true);
	return 0;
}

static struct mptcp_sched_ops redundant_ops = {
	.get_subflow	= redundant_get_subflow,
	.name		= "redundant",
	.owner		= THIS_MODULE,
};

static int __init redundant_register(void)
{
	return mptcp_register_scheduler(&redundant_ops);
}

static void __exit redundant_unregister(void)
{
	mptcp_unregister_scheduler(&redundant_ops);
}

module_init(redundant_register);
module_exit(redundant_unregister);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("MPTCP redundant packet scheduler");
