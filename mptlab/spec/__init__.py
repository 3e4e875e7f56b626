"""The experiment language, on the host: units and link shapes (plain data the
guest reads too), the models that check YAML and Python input, every
workload's fields, network plans, the catalog that expands experiments into
runs, and Mininet topologies.  Nothing here imports pydantic at import time
but ``models``, ``workloads``, ``catalog`` and ``mininet``."""
