"""MSCRED.fit at the demo's settings (synthetic data, 30 sensors, 20,000 rows, 3 epochs, defaults: CPU, reference,
float32, eager, batch 32), with its phases (training steps, validation,
signature matrices, the final reconstruction) timed, as one JSON line:
    PYTHONPATH=src python3 benchmarks/bench_cpu_fit.py   (results/cpu_fit_speed/)"""
import collections, json, sys, time, resource
import torch
import mscred, mscred.signature as S, mscred.train as T, mscred.train_graphs as G, mscred.detector as D
from mscred.data.synthetic import generate_synthetic

acc = collections.defaultdict(float)
def timed(name, fn):
    def w(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            acc[name] += time.perf_counter() - t
    return w
S.signature_matrices = timed("signature_matrices", S.signature_matrices)
G.EagerStep.__call__ = timed("train_steps", G.EagerStep.__call__)
T.Trainer._evaluate = timed("validation", T.Trainer._evaluate)
D.MSCRED._reconstruct = timed("final_reconstruct", D.MSCRED._reconstruct)
data = generate_synthetic(n_sensors=30, length=20_000, seed=0)
load = open("/proc/loadavg").read().split()[0]
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
m = D.MSCRED(epochs=3, seed=0).fit(data.train)
total = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"src": mscred.__file__, "fit_s": total, **acc, "load1_before": float(load),
                  "windows_per_s": [h["windows_per_s"] for h in m.history_],
                  "train_loss": [h["train_loss"] for h in m.history_], "val_loss": [h["val_loss"] for h in m.history_],
                  "threshold": float(m.threshold_), "score_sum": float(m.decision_scores_.sum()),
                  "sys_s": r1.ru_stime - r0.ru_stime, "user_s": r1.ru_utime - r0.ru_utime,
                  "faults": r1.ru_minflt - r0.ru_minflt}))
