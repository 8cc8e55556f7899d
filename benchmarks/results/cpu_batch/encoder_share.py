"""How much of a CPU scoring batch at 80 sensors is the encoder + the ConvLSTM input convolutions (the part a
larger batch saves: each batch encodes its steps - 1 = 4 leading segments again, per worker thread). One torch
thread, one worker; the model and series bench_cpu_batch.py trained and wrote in its --work folder. Run 16:29 UTC:

    encode+input gates of 54 segments: min 0.634 med 0.673 s
    forward_windows of 50 windows (1 worker): min 2.334 med 2.468 s
    share per segment: 0.252

    PYTHONPATH=src python benchmarks/results/cpu_batch/encoder_share.py
"""
import time, torch, numpy as np
from mscred import MSCRED
from mscred.ops import cpu_inference as ci
torch.set_num_threads(1)
det = MSCRED.load("/tmp/mscred_bench_cpu_batch/model_80_train1500_seed0", device="cpu")
net = det.net_.eval()
seg = torch.from_numpy(det._segments(np.load("/tmp/mscred_bench_cpu_batch/series_80x8000_seed0.npy")[:1200]))
print(seg.shape)
w = ci._Weights(net, torch.channels_last)
levels = [ci._Level(x, torch.channels_last) for x in w.levels]
def enc(m):
    feats = ci._encode(w, seg[:m])
    return [lv.input_gates(f) for lv, f in zip(levels, feats)]
def fwd(k):
    return ci.forward_windows(net, seg[:k + 4], 5, workers=1)
with torch.inference_mode():
    for f in (lambda: enc(54), lambda: fwd(50)): f()
    te, tf = [], []
    for _ in range(7):
        t = time.perf_counter(); enc(54); te.append(time.perf_counter() - t)
        t = time.perf_counter(); fwd(50); tf.append(time.perf_counter() - t)
print("encode+input gates of 54 segments: min %.3f med %.3f s" % (min(te), np.median(te)))
print("forward_windows of 50 windows (1 worker): min %.3f med %.3f s" % (min(tf), np.median(tf)))
print("share per segment: %.3f" % (min(te) / 54 / (min(tf) / 50)))
