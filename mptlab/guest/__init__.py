"""What runs inside the UML guest: the agent (one run, read from spec.json
once into the typed ``config.GuestRun``), the network it builds
(``netlab``, ``build``), the scheduler modules, the sampler, the kernel's
tracepoints and counters, the stall watchdog, and the workload interface.
It imports only ``mptlab.rundir`` and the plain data of ``mptlab.spec``:
a guest starts in a fraction of a second."""
