"""Hardware design-space exploration (``vta dse``)."""
