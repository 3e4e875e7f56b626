"""The host side of a campaign: find the kernel, run every run in its own UML
guest (``execute``), many at once and resumable (``runner``), or on a Dask
cluster (``cluster``), and tell the user how it goes (``progress``)."""
