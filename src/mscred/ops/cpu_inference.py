"""Scoring on a CPU: ``MSCREDNet.forward_windows`` of the reference backend without autograd, in small chunks of
windows, channels-last, with the ConvLSTM cell in a few in-place passes, the windows shared by worker threads.

The same function as the reference ops (``ops.reference``, ``ops.convlstm_sliding``) up to float32 rounding
(tests/test_cpu_forward_chunked.py); what differs is how a CPU spends its time. On the 2-core development VM:
1.9x at 30 sensors, 3.6x at 80 (benchmarks/results/cpu_forward/):

* chunks: the reference ops run every layer on the whole scoring batch (128 windows, 50 at 80 sensors), so each
  ConvLSTM step makes ~10 tensors of 20-170 MB. Above glibc's mmap threshold (32 MB at most) every one of them is
  fresh pages, faulted in and zeroed by the kernel at each allocation (a 41 MB multiply: 24 ms into a new tensor,
  5 ms into an old one), and none stays in cache: level 1's 2x2 recurrent convolution at 80 sensors ran at 44
  GFLOP/s on 50 windows in NCHW, ~200 on 4 channels-last (one thread). Here the encoder, the input convolutions,
  the ConvLSTMs, the attention and the decoder run on ``chunk_windows`` windows at a time, in buffers reused from
  chunk to chunk; the input gates of the last ``steps - 1`` segments carry over to the next chunk (as views, not
  concatenated), so every segment is still encoded once.
* channels-last (NHWC) convolutions and buffers: oneDNN's kernels without NCHW reorders.
* the cell: one sigmoid over the four gates, tanh(x) = 2 sigmoid(2x) - 1 (the g block's weights and bias are
  doubled, which is exact, and the cell state is kept doubled, also exact), so no tanh, which ATen computes ~10x
  slower than a sigmoid on this CPU (2.3 against 0.24 ns an element); the forget bias folded into the bias; every
  product in place. The recurrent convolution reads the hidden state from a zero-bordered buffer the cell writes
  into (no padded copy) and is skipped at the first step (h = 0); the attention reads those buffers too (zero
  borders add nothing to its inner products and are cropped from its output).
* threads: the windows are split between ``worker_count`` Python threads (PyTorch ops release the GIL), each with
  its share of torch's threads (one each on 2 cores), instead of every small op being split between torch's
  threads, whose barriers at each op cost most on a shared box (2 threads there: 0.4-0.7x of one for the chunked
  ops, the workers 1.8x of one at low load).

Used only where it gives the reference's results: a CPU tensor, float32/float64, no autograd, no autocast, the
"reference" model backend and the "torch" conv backend (``applies``); GPU paths and training never come here.
MSCRED_CPU_CHUNKED=0 switches it off, MSCRED_CPU_WORKERS=0 keeps one thread of the caller's,
MSCRED_CPU_EXACT_TANH=1 computes the cell with ATen's tanh (A/B runs).
"""
from __future__ import annotations

import threading

import torch
import torch.nn.functional as F

from mscred.ops.reference import same_padding
from mscred.ops.triton.runtime import switched_off, switched_on

# Windows per chunk: as many as keep level 1's gate pre-activations (4 * 32 channels * n^2 floats per window) near
# CHUNK_BYTES, between 1 and MAX_CHUNK (benchmarks/results/cpu_forward/: chunk sweep at 30 and 80 sensors).
CHUNK_BYTES = 8 * 2 ** 20
MAX_CHUNK = 16
# Threads scoring windows side by side (``worker_count``).
MAX_WORKERS = 4


def applies(net, segments: torch.Tensor) -> bool:
    """Whether ``net.forward_windows(segments, ...)`` takes this path (see the module's docstring): ``scores_on``
    the segments' device, float32/float64, no autograd, no autocast."""
    return (scores_on(net, segments.device) and segments.dtype in (torch.float32, torch.float64)
            and not torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu"))


def scores_on(net, device: torch.device) -> bool:
    """Whether ``net``'s scoring on ``device`` runs this path: a CPU, the "reference" model backend and the "torch"
    conv backend, not switched off (MSCRED_CPU_CHUNKED=0). ``predict`` then scores a model trained with bf16 in
    float32 here (autocast would take the reference ops): the float32 path was as fast as the reference ops under
    CPU bf16 autocast at 30 sensors (0.70 against 0.72 s for 128 windows) and 2x faster at 80 (3.15 against
    6.35 s), with 1e-4 x their error (results/cpu_forward/bf16.md)."""
    cfg = getattr(net, "cfg", None)
    return (device.type == "cpu" and getattr(cfg, "backend", None) == "reference"
            and getattr(cfg, "conv_backend", None) == "torch" and not switched_off("MSCRED_CPU_CHUNKED"))


def chunk_windows(net, n: int, itemsize: int = 4) -> int:
    """Windows per chunk for ``n`` sensors (CHUNK_BYTES of level 1's gates)."""
    per_window = net.lstms[0].weight.shape[0] * n * n * itemsize  # 4 * Ch gate channels
    return max(1, min(MAX_CHUNK, CHUNK_BYTES // per_window))


class _Weights:
    """The network's weights as this path reads them, made once per call and shared by the worker threads:
    ConvLSTM gates prepared for the cell (``_level_weights``), convolutions in ``fmt``."""

    def __init__(self, net, fmt: torch.memory_format):
        self.fmt = fmt
        enc, dec = net.encoder, net.decoder
        self.encoder = [(c.weight.detach().contiguous(memory_format=fmt), c.bias.detach(), c.stride)
                        for c in (enc.conv1, enc.conv2, enc.conv3, enc.conv4)]
        self.levels = [_level_weights(lstm, fmt) for lstm in net.lstms]
        self.decoder = [(d.weight.detach(), d.bias.detach(), d.stride, d.selu)
                        for d in (dec.deconv4, dec.deconv3, dec.deconv2, dec.deconv1)]


def _level_weights(lstm, fmt: torch.memory_format) -> tuple:
    """(w_x, w_h, bias) of one ConvLSTM, input and recurrent halves, with the g block doubled (tanh(g) =
    2 sigmoid(2g) - 1; exact: a power of two) and the forget bias in the bias (sigmoid(f + forget_bias))."""
    w, b = lstm.weight.detach(), lstm.bias.detach()
    Ch = w.shape[0] // 4
    C = w.shape[1] - Ch
    scale = torch.ones(4 * Ch, dtype=w.dtype)
    scale[Ch:2 * Ch] = 2.0
    w = w * scale[:, None, None, None]
    b = b * scale
    b[2 * Ch:3 * Ch] += lstm.forget_bias
    return w[:, :C].contiguous(memory_format=fmt), w[:, C:].contiguous(memory_format=fmt), b.contiguous()


class _Level:
    """One level's ConvLSTM + attention in one thread: its weights (``_level_weights``) and per-chunk buffers."""

    def __init__(self, weights: tuple, fmt: torch.memory_format):
        self.w_x, self.w_h, self.bias = weights
        self.Ch = self.w_h.shape[1]
        self.k, self.fmt = self.w_x.shape[-1], fmt
        self.hp = None

    def input_gates(self, f: torch.Tensor) -> torch.Tensor:
        """(m, C, H, W) level features -> (m, 4Ch, H, W) input half of the gates, bias included."""
        return _conv(f, self.w_x, self.bias, 1, same_padding(f.shape[-1], self.k, 1), self.fmt)

    def run(self, gx: list[torch.Tensor], k: int, steps: int, out: torch.Tensor) -> None:
        """The ConvLSTM of ``k`` consecutive windows from their k + steps - 1 segments' input gates (4Ch, H, W),
        ``gx`` one tensor or consecutive parts (left apart: concatenating would copy them all per chunk), then
        the attention over its ``steps`` hidden states, written into ``out`` (k, Ch, H, W)."""
        Ch = self.Ch
        H, W = gx[0].shape[-2:]
        like = gx[0]
        top, bottom, left, right = same_padding(H, self.k, 1)
        Hp, Wp = H + top + bottom, W + left + right
        if self.hp is None or self.hp.shape[1] < k or self.hp.shape[0] != steps:
            # Hidden states of every step, zero-bordered (the recurrent convolution's padding), NHWC or NCHW.
            shape = (steps, k, Hp, Wp, Ch) if self.fmt == torch.channels_last else (steps, k, Ch, Hp, Wp)
            self.hp = like.new_zeros(shape)
            self.c2, self.tmp = _empty(like, (k, Ch, H, W), self.fmt), _empty(like, (k, Ch, H, W), self.fmt)
            self.z0 = _empty(like, (k, 4 * Ch, H, W), self.fmt)
        hp = [self._nchw(self.hp[t, :k]) for t in range(steps)]  # (k, Ch, Hp, Wp) views
        c2, tmp = self.c2[:k], self.tmp[:k]  # c2 = 2 c: then tanh(c) = 2 sigmoid(c2) - 1 without a scaling pass
        exact = switched_on("MSCRED_CPU_EXACT_TANH")  # A/B runs: ATen's tanh and three sigmoids instead
        for t in range(steps):
            if t == 0:  # h = 0: no recurrent convolution
                z = self.z0[:k]
                for dst, src in _rows(gx, t, k):
                    z[dst].copy_(src) if exact else torch.sigmoid(src, out=z[dst])
            else:
                z = F.conv2d(hp[t - 1], self.w_h)  # (k, 4Ch, H, W)
                for dst, src in _rows(gx, t, k):
                    z[dst].add_(src)
                if not exact:
                    z.sigmoid_()
            i, g, f, o = z.split(Ch, dim=1)  # sigmoid(i), sigmoid(2g), sigmoid(f + forget_bias), sigmoid(o)
            if exact:
                i.sigmoid_()
                z[:, 2 * Ch:].sigmoid_()
                g.mul_(0.5).tanh_().mul_(2)
            else:
                g.mul_(4).sub_(2)  # 2 tanh(g)
            if t == 0:
                torch.mul(i, g, out=c2)
            else:
                c2.mul_(f).addcmul_(i, g)
            if exact:
                torch.mul(c2, 0.5, out=tmp).tanh_()
            else:
                torch.sigmoid(c2, out=tmp).mul_(2).sub_(1)  # tanh(c)
            torch.mul(o, tmp, out=hp[t][:, :, top:top + H, left:left + W])
        self._attention(steps, k, out, (top, left, H, W))

    def _nchw(self, buf: torch.Tensor) -> torch.Tensor:
        return buf.permute(0, 3, 1, 2) if self.fmt == torch.channels_last else buf

    def _attention(self, steps: int, k: int, out: torch.Tensor, crop) -> None:
        """MSCRED's attention (``ops.reference.temporal_attention``) over the bordered hidden states."""
        top, left, H, W = crop
        hs = self.hp[:, :k].reshape(steps, k, -1).transpose(0, 1)  # (k, T, N) view, zero borders included
        # ATen's sum (blocked/pairwise), not bmm: MKL's float32 dot products of these thousands of terms were
        # ~2x less accurate, and the softmax carries their error into every output (1.6e-6 against 4e-7).
        scores = (hs * hs[:, -1:]).sum(-1) / steps  # (k, T)
        a = torch.softmax(scores, dim=1)
        att = torch.bmm(a[:, None, :], hs).view(k, *self.hp.shape[2:])  # (k, Hp, Wp, Ch) or (k, Ch, Hp, Wp)
        out.copy_(self._nchw(att)[:, :, top:top + H, left:left + W])


def _last(parts: list[torch.Tensor], m: int) -> list[torch.Tensor]:
    """The last ``m`` rows of the concatenation of ``parts``, as parts (views)."""
    out = []
    for part in reversed(parts):
        if m <= 0:
            break
        out.insert(0, part[max(0, part.shape[0] - m):])
        m -= out[0].shape[0]
    return out


def _rows(parts: list[torch.Tensor], t: int, k: int):
    """(slice of the k windows, their input gates at step t) pairs: rows t .. t + k - 1 of the concatenation of
    ``parts``, part by part."""
    start = 0
    for part in parts:
        lo, hi = max(t, start), min(t + k, start + part.shape[0])
        if lo < hi:
            yield slice(lo - t, hi - t), part[lo - start:hi - start]
        start += part.shape[0]


def _empty(like: torch.Tensor, shape, fmt) -> torch.Tensor:
    return torch.empty(shape, dtype=like.dtype, device=like.device, memory_format=fmt)


def _conv(x: torch.Tensor, w: torch.Tensor, b, stride: int, padding, fmt) -> torch.Tensor:
    """TF "same" convolution (explicit (top, bottom, left, right) padding), in ``fmt``."""
    top, bottom, left, right = padding
    x = x.contiguous(memory_format=fmt)
    if top == bottom and left == right:
        return F.conv2d(x, w, b, stride=stride, padding=(top, left))
    return F.conv2d(F.pad(x, (left, right, top, bottom)), w, b, stride=stride)


def _encode(weights: "_Weights", seg: torch.Tensor) -> list[torch.Tensor]:
    """conv1..conv4 + SELU of (m, K, n, n) segments -> the four levels' features."""
    feats, f = [], seg
    for w, b, stride in weights.encoder:
        f = torch.selu_(_conv(f, w, b, stride, same_padding(f.shape[-1], w.shape[-1], stride), weights.fmt))
        feats.append(f)
    return feats


def _deconv_into(deconv: tuple, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``SameDeconv.forward`` (transposed convolution, TF crop, SELU) written into ``out`` (k, O, size, size)."""
    w, b, stride, selu = deconv
    size = out.shape[-1]
    top = same_padding(size, w.shape[-1], stride)[0]
    y = F.conv_transpose2d(x, w, b, stride=stride)
    out.copy_(y[:, :, top:top + size, top:top + size])
    return torch.selu_(out) if selu else out


def forward_windows(net, segments: torch.Tensor, steps: int, chunk: int | None = None,
                    fmt: torch.memory_format = torch.channels_last, workers: int | None = None) -> torch.Tensor:
    """``MSCREDNet.forward_windows`` (S, K, n, n) -> (S - steps + 1, K, n, n) in chunks of ``chunk`` windows
    (default ``chunk_windows``), for ``applies``, the windows split between ``workers`` threads (default
    ``worker_count``)."""
    n_windows = segments.shape[0] - steps + 1
    chunk = chunk or chunk_windows(net, segments.shape[-1], segments.element_size())
    workers = workers or worker_count(n_windows, chunk)
    weights = _Weights(net, fmt)
    result = segments.new_empty(n_windows, *segments.shape[1:])
    if workers == 1:
        _forward_range(weights, segments, steps, chunk, result)
        return result
    bounds = [n_windows * j // workers for j in range(workers + 1)]
    threads = max(1, torch.get_num_threads() // workers)
    errors: list[BaseException] = []
    inference = torch.is_inference_mode_enabled()  # (grad and inference modes are per thread)

    def work(lo: int, hi: int) -> None:
        try:
            torch.set_num_threads(threads)  # this thread's (OpenMP's per-thread setting)
            with torch.inference_mode(inference), torch.no_grad():
                _forward_range(weights, segments[lo:hi + steps - 1], steps, chunk, result[lo:hi])
        except BaseException as err:  # noqa: BLE001 - raised again by the caller's thread
            errors.append(err)

    before = torch.get_num_threads()
    pool = [threading.Thread(target=work, args=(bounds[j], bounds[j + 1]), name=f"mscred-cpu-{j}")
            for j in range(workers)]
    try:
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    finally:
        torch.set_num_threads(before)  # (the default that threads started later take)
    if errors:
        raise errors[0]
    return result


def worker_count(n_windows: int, chunk: int) -> int:
    """Threads that score the windows side by side, each with torch.get_num_threads() // workers threads of its
    own: as many as torch's threads, at most one per chunk and MAX_WORKERS; MSCRED_CPU_WORKERS=0: one."""
    if switched_off("MSCRED_CPU_WORKERS"):
        return 1
    return max(1, min(torch.get_num_threads(), MAX_WORKERS, n_windows // chunk))


def _forward_range(weights: "_Weights", segments: torch.Tensor, steps: int, chunk: int,
                   result: torch.Tensor) -> None:
    """``forward_windows`` of all windows of ``segments`` into ``result``, in one thread."""
    fmt = weights.fmt
    levels = [_Level(w, fmt) for w in weights.levels]
    n_windows = result.shape[0]
    tail = None  # the input gates of the previous chunk's last steps - 1 segments, per level
    done = 0     # segments encoded so far
    for w0 in range(0, n_windows, chunk):
        k = min(chunk, n_windows - w0)
        feats = _encode(weights, segments[done:w0 + k + steps - 1])
        done = w0 + k + steps - 1
        new = [lv.input_gates(f) for lv, f in zip(levels, feats)]
        gates = [[g] if tail is None else [*t, g] for t, g in zip(tail or new, new)]
        tail = [_last(g, steps - 1) for g in gates]  # the next chunk's first windows need them
        sizes = [g.shape[-1] for g in new]
        # The decoder's concatenations [deconv output, attention] of levels 1-3, filled in place.
        cats = [_empty(segments, (k, 2 * lv.Ch, s, s), fmt) for lv, s in zip(levels[:3], sizes)]
        for lv, g, cat in zip(levels[:3], gates, cats):
            lv.run(g, k, steps, cat[:, lv.Ch:])
        a4 = _empty(segments, (k, levels[3].Ch, sizes[3], sizes[3]), fmt)
        levels[3].run(gates[3], k, steps, a4)
        d4, d3, d2, d1 = weights.decoder
        _deconv_into(d4, a4, cats[2][:, :levels[2].Ch])
        _deconv_into(d3, cats[2], cats[1][:, :levels[1].Ch])
        _deconv_into(d2, cats[1], cats[0][:, :levels[0].Ch])
        _deconv_into(d1, cats[0], result[w0:w0 + k])
