"""Cost of LogClaims.results() on a long tuning log: a log of N lines, one line appended
before each of M calls (what a tuner waiting on another tuner's candidate does every 0.2 s).
Prints the process CPU seconds of the M calls.

    PYTHONPATH=. python benchmarks/bench_log_claims.py 5000 50
"""
import sys, time, os, tempfile, numpy as np
from compiler.tuner import Task
from compiler.tuner.records import LogClaims, Record
from compiler.tuner.space import TunerSpace
from isa import VTAConfig
cfg = VTAConfig(); task = Task.conv2d(1, 16, 6, 6, 16, 3, 1, 1, name="tiny")
space = TunerSpace(task.workload(cfg), cfg)
pts = space.sample(np.random.default_rng(0), 200)
recs = [Record.make(task, cfg, space.knobs(p).as_dict(), 10_000 + i) for i, p in enumerate(pts)]
log = os.path.join(tempfile.mkdtemp(), "log.jsonl")
with open(log, "w") as f:
    for i in range(int(sys.argv[1])):
        f.write(recs[i % len(recs)].to_json() + "\n")
c = LogClaims(log)
t = time.process_time()
for _ in range(int(sys.argv[2])):
    with open(log, "a") as f:
        f.write(recs[_ % len(recs)].to_json() + "\n")
    r = c.results()
print(f"{len(r)} keys, {int(sys.argv[2])} polls of a {sys.argv[1]}-line log: {time.process_time() - t:.3f} CPU s")
