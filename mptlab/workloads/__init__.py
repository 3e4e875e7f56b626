"""Workloads, run inside the guest between the hosts of a built topology.

``mptlab.workloads.<type>`` runs the workload the YAML's ``workload.type``
names: ``run(ctx)`` in the guest and, for content made on the host,
``prepare(params)`` (the interface: ``mptlab.guest.workload``).  Its fields
are part of the experiment language (``mptlab.spec.workloads``): checked on
the host, they reach ``run`` as plain data in base units (``ctx.workload``),
so that the guest never imports pydantic.

``background`` is not a workload: it starts and stops the experiment's
``background:`` flows around the workload.  ``helpers/`` holds what the
workloads share (endpoints, statistics, the content cache, the HTTP server,
page and video content, the DASH player).  docs/workloads.md documents
every workload's parameters and metrics.
"""
