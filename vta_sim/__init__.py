"""The VTA simulator: bit-exact semantics of the reference functional simulator, the load,
compute and store modules running concurrently under the dependency-token queues, and (later)
a cycle-approximate timing model with statistics and traces."""
