"""The MSCRED network (Zhang et al., AAAI 2019), layer for layer as the paper's architecture table, for n >= 4 sensors.

Input: h = 5 consecutive multi-scale signature matrices, (B, T, K, n, n) with K scales. Output: the reconstruction
of the last step, (B, K, n, n).

    Encoder        conv1..conv4 (SELU, TF "same" padding) on every step at once
    AttnConvLSTM   per level: a ConvLSTM over the T steps (hidden = level channels), then MSCRED's temporal attention
    Decoder        transposed convolutions from level 4 up, each concatenated with the attention output of the level
                   below, cropped TF-style so that every size comes back exactly

Every op of the encoder and of the ConvLSTM/attention goes through ``mscred.ops`` so that ``cfg.conv_backend`` /
``cfg.backend`` choose the implementation. Parameter names (``encoder.conv1.weight``, ``lstms.0.weight``,
``decoder.deconv4.weight``, ...) are saved to safetensors: keep them stable.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from mscred import level_streams, ops
from mscred.config import ModelConfig
from mscred.ops import AUTO, attention_cat, cpu_inference, encoder_xh, shared_output, subpixel
from mscred.ops.concat import cat_channels
from mscred.ops.convlstm_sliding import convlstm_sliding
from mscred.ops.lstm_attention import resident_attention
from mscred.ops.padding import pad_copy
from mscred.ops import weight_cache, wgrad_stream
from mscred.ops.reference import same_padding
from mscred.ops.triton import attention as fused_attention
from mscred.ops.triton import convlstm as fused_convlstm
from mscred.ops.triton import convlstm_attention, convlstm_concat, convlstm_in_xh
from mscred.ops.triton import small_conv, small_deconv
from mscred.ops.triton.attention import temporal_attention_into
from mscred.ops.triton.bias_act import bias_act, bias_act_into, bias_act_shared, bias_act_subpixel_into
from mscred.ops.triton.bias_act_cat import bias_act_cat
from mscred.ops.triton.bias_act_cat import enabled as bias_act_cat_enabled
from mscred.ops.triton.runtime import runs_fused, switched_off, switched_on

# The table's kernels and strides of conv1..conv4; the decoder mirrors them (deconv_l undoes conv_l).
KERNELS = (3, 3, 2, 2)
STRIDES = (1, 2, 2, 2)


class _CastChannelsLast(torch.autograd.Function):
    """A conv weight in the autocast dtype and channels-last order in one kernel; its gradient back to the master
    weight's dtype and contiguous order in one kernel.

    Why: with a channels-last input, cuDNN copies a contiguous weight to channels-last inside every forward and
    data-gradient call, after autocast's separate cast; its channels-last weight gradient is cast to float32 and
    then copied again by AccumulateGrad to the parameter's contiguous order: five small kernels per convolution
    and step, two here. The parameters themselves stay contiguous (checkpoints, safetensors)."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        ctx.master_dtype = weight.dtype
        return weight.to(dtype=dtype, memory_format=torch.channels_last)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad.to(dtype=ctx.master_dtype, memory_format=torch.contiguous_format), None


def cpu_state(net: nn.Module) -> dict[str, torch.Tensor]:
    """``net.state_dict()`` with every tensor its own contiguous CPU copy, for safetensors: it refuses tensors that
    share memory, and the fused bf16 training step packs the weights into one buffer (``ops/weight_cache.py``)."""
    return {k: v.detach().to("cpu", copy=True).contiguous() for k, v in net.state_dict().items()}


def _autocast_weight(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``weight`` as the fused path's convolutions want it under autocast (see _CastChannelsLast; made with every
    other weight at once where the training step's ``weight_cache.cast_once`` did), else as is."""
    cached = weight_cache.lookup(weight)
    if cached is not None:
        return cached
    device = x.device.type
    if torch.is_autocast_enabled(device) and weight.dtype == torch.float32:
        return _CastChannelsLast.apply(weight, torch.get_autocast_dtype(device))
    return weight


class SameConv(nn.Module):
    """Convolution with TF "same" padding, bias and SELU, run by ``mscred.ops.conv2d`` on ``backend``.

    ``fused_act`` (the fused model backend with the cuDNN/ATen conv backend "torch"): the convolution runs without
    bias (with its own symmetric padding where TF's padding is symmetric, so no padded copy of the input), then
    bias + SELU in one kernel (``ops/triton/bias_act.py``) instead of cuDNN's separate broadcast bias add, SELU,
    SELU backward and bias-gradient reduction. The other conv backends fuse bias + SELU in their own epilogue.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int, backend: str,
                 fused_act: bool = False):
        super().__init__()
        self.kernel, self.stride, self.backend = kernel, stride, backend
        self.fused_act = fused_act and backend == "torch"
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel, kernel))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        # Glorot uniform, as the original TensorFlow code's default initializer.
        nn.init.xavier_uniform_(self.weight)

    def forward(self, x: torch.Tensor, out_pads: tuple[int, int, int, int] = (0, 0, 0, 0), two: bool = False,
                xh_images: int = 0):
        """(N, C, H, W) -> (N, O, ceil(H/s), ceil(W/s)); with ``out_pads`` (top, bottom, left, right) inside a
        zero border of those widths (the training encoder's ConvLSTM input), written there by the fused
        epilogue, no copy. ``two`` (fused path): (out, a view of out) for two consumers, whose gradients the
        epilogue's backward sums itself (``ops.shared_output``); with ``xh_images`` > 0 the second is instead the
        x half of a ConvLSTM's [x, h] buffer written by the same kernel (``ops.encoder_xh``)."""
        padding = same_padding(x.shape[-1], self.kernel, self.stride)
        if self.fused_act:
            top, bottom, left, right = padding
            w = _autocast_weight(self.weight, x)
            if small_conv.suits(x.shape[1], w.shape[0], self.kernel, self.stride, w.dtype):
                # conv1 (3 channels) in bf16: our kernel does convolution + bias + SELU; cuDNN has no tensor-core kernel.
                if two:
                    return small_conv.conv_act_shared(x, w, self.bias, True, out_pads, xh_images)
                return small_conv.conv_act(x, w, self.bias, selu=True, out_pads=out_pads)
            if top == bottom and left == right:
                y = wgrad_stream.conv2d(x, w, self.stride, (top, left))
            else:  # TF's extra bottom/right row: a padded copy that writes each element once (ops/padding.py)
                y = wgrad_stream.conv2d(pad_copy(x, padding), w, self.stride)
            return self._epilogue(y, out_pads, two, xh_images)
        out = ops.conv2d(x, self.weight, self.bias, self.stride, padding, True, backend=self.backend)
        out = pad_copy(out, out_pads) if any(out_pads) else out
        return (out, out) if two else out

    def forward_padded(self, xp: torch.Tensor, out_pads: tuple[int, int, int, int] = (0, 0, 0, 0),
                       two: bool = False, xh_images: int = 0):
        """``forward`` of an input already zero-bordered with this convolution's TF padding (the encoder's copy
        shared with a ConvLSTM, ``Encoder.forward``); the fused path (``fused_act``) only."""
        w = _autocast_weight(self.weight, xp)
        return self._epilogue(wgrad_stream.conv2d(xp, w, self.stride), out_pads, two, xh_images)

    def _epilogue(self, y: torch.Tensor, out_pads: tuple[int, int, int, int], two: bool, xh_images: int = 0):
        """bias + SELU of the fused path (``bias_act``), for one consumer or for two (``two``)."""
        if two:
            return bias_act_shared(y, self.bias, True, out_pads, xh_images)
        return bias_act(y, self.bias, selu=True, out_pads=out_pads)


class SameDeconv(nn.Module):
    """Transposed convolution with TF "same" semantics: the exact adjoint of a same-padded conv of ``size``.

    The full transposed convolution of an m x m input has (m-1)*stride + kernel rows; TensorFlow's
    ``conv2d_transpose(..., padding="SAME", output_shape=size)`` keeps rows [top, top + size), where ``top`` is the
    top padding of the forward "same" convolution from ``size`` to m. Cropping this way makes every n >= 4 work
    (e.g. 8 -> 15 for n = 30, 2 -> 3 for n = 5).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int, selu: bool,
                 fused_act: bool = False):
        super().__init__()
        self.kernel, self.stride, self.selu, self.fused_act = kernel, stride, selu, fused_act
        self.weight = nn.Parameter(torch.empty(in_channels, out_channels, kernel, kernel))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, x: torch.Tensor, size: int, out: torch.Tensor | None = None,
                skip: torch.Tensor | None = None, skip_in_cat: bool = False) -> torch.Tensor:
        """(B, C, m, m) -> (B, O, size, size). ``out`` (inference only, fused path): a (B, O, size, size) tensor to
        write the result into, e.g. the channel slice of the decoder's concatenation buffer; returned. ``skip`` (the
        fused path's training): a (B, S, size, size) tensor to concatenate after the result along channels, the
        result written into the concatenation itself (``ops/triton/bias_act_cat.py``); (B, O + S, size, size).
        ``skip_in_cat``: skip is the upper half of that concatenation already (``ops.attention_cat``)."""
        if skip is not None and not self.fused_act:
            return torch.cat([self.forward(x, size), skip], dim=1)
        top = same_padding(size, self.kernel, self.stride)[0]
        if self.fused_act:  # crop + bias (+ SELU) in one kernel each way (see SameConv)
            w = _autocast_weight(self.weight, x)
            if (size == x.shape[-1] and top == self.kernel // 2 and out is None and skip is None
                    and small_conv.suits(w.shape[0], w.shape[1], self.kernel, self.stride, w.dtype)):
                # deconv1 (3 output channels): stride 1 + TF crop = a same convolution with the flipped kernel
                # (opt-in: on its own weight, no flipped copy, ops/triton/small_deconv.py).
                if small_deconv.enabled():
                    return small_deconv.deconv_act(x, w, self.bias, selu=self.selu)
                return small_conv.conv_act(x, small_conv.deconv_as_conv(w), self.bias, selu=self.selu)
            if skip is None and self._subpixel(x, w):
                # Inference: the transposed convolution as one stride-1 convolution giving every output phase
                # (ops/subpixel.py), read back through the phases by the bias + SELU kernel.
                if out is None:
                    out = torch.empty(x.shape[0], w.shape[1], size, size, device=x.device, dtype=w.dtype,
                                      memory_format=torch.channels_last)
                sub = subpixel.convolve(x, w, self.stride)
                return bias_act_subpixel_into(sub, self.bias, self.selu, self.stride, top, top, out)
            y = wgrad_stream.conv2d(x, w, self.stride, transposed=True)
            if skip is not None:
                return bias_act_cat(y, self.bias, self.selu, top, top, size, size, skip, skip_in_cat)
            if out is not None:
                return bias_act_into(y, self.bias, self.selu, top, top, out)
            return bias_act(y, self.bias, self.selu, top, top, size, size)
        if out is not None:
            return out.copy_(self.forward(x, size))
        y = F.conv_transpose2d(x, self.weight, self.bias, stride=self.stride)  # (B, O, (m-1)*s+k, same)
        y = y[:, :, top:top + size, top:top + size]
        return F.selu(y) if self.selu else y

    def _subpixel(self, x: torch.Tensor, w: torch.Tensor) -> bool:
        """Whether this call takes the sub-pixel form (``ops.subpixel``): fused inference (no autograd) of an
        overlapping strided deconvolution (deconv2) in a reduced precision on the Triton path. float32 keeps cuDNN's
        transposed convolution (not measured in the sub-pixel form); MSCRED_SUBPIXEL_DECONV=0 too (A/B runs)."""
        return (subpixel.pays(self.kernel, self.stride) and w.dtype in (torch.bfloat16, torch.float16)
                and not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)) and runs_fused(x)
                and not switched_off("MSCRED_SUBPIXEL_DECONV"))


class Encoder(nn.Module):
    """conv1..conv4 of the table, applied to all B*T signature matrices at once."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        c1, c2, c3, c4 = cfg.channels
        k1, k2, k3, k4 = KERNELS
        s1, s2, s3, s4 = STRIDES
        # The fused backend runs the whole network channels-last (NHWC), the order cuDNN's tensor-core kernels and
        # the fused ConvLSTM use: the input is converted once here (K = 3 channels, the smallest tensor of the
        # step), and every later convolution, the ConvLSTM, the attention and the decoder keep that order, so no
        # per-op nchw <-> nhwc conversion is left (H200 profile of the bf16 step before: 1.4 ms of 7.6). The
        # reference backend stays plain NCHW PyTorch (the baseline). Same arithmetic either way.
        self.channels_last = cfg.backend == "fused"
        # With cuDNN convolutions, the cast autocast would do to the input happens in the same copy (one kernel).
        self.cast_input = self.channels_last and cfg.conv_backend == "torch"
        fa = cfg.backend == "fused"
        self.conv1 = SameConv(cfg.n_scales, c1, k1, s1, cfg.conv_backend, fa)  # 3x3, stride 1
        self.conv2 = SameConv(c1, c2, k2, s2, cfg.conv_backend, fa)            # 3x3, stride 2
        self.conv3 = SameConv(c2, c3, k3, s3, cfg.conv_backend, fa)            # 2x2, stride 2 (pad bottom/right)
        self.conv4 = SameConv(c3, c4, k4, s4, cfg.conv_backend, fa)            # 2x2, stride 2
        self.lstm_kernel = cfg.lstm_kernel

    def training_layout(self, x: torch.Tensor) -> tuple[int, int, int, int] | None:
        """The ConvLSTMs' TF padding (top, bottom, left, right) when this forward hands them their training layout
        (see ``forward``): fused training (autograd, cuDNN convolutions, the Triton ConvLSTM running); else None.
        MSCRED_TRAIN_LAYOUT=0 turns it off (A/B runs)."""
        if not (self.cast_input and torch.is_grad_enabled() and self.conv1.weight.requires_grad
                and runs_fused(x) and not switched_off("MSCRED_TRAIN_LAYOUT")):
            return None
        return same_padding(x.shape[-1], self.lstm_kernel, 1)

    def forward(self, x: torch.Tensor, lstm_pads: tuple[int, int, int, int] | None = None) -> list[torch.Tensor]:
        """(B, T, K, n, n) -> the four levels' ConvLSTM inputs, each (B, T, C_l, H_l, W_l). With ``lstm_pads``
        (``training_layout``) each is instead its zero-bordered copy (B, T, C_l, H_l + top + bottom, W_l + left +
        right), stored time-major (T*B images): see ``forward_training``, which also says which of them are the x
        half of their ConvLSTM's [x, h] buffer."""
        if lstm_pads is not None:
            return self.forward_training(x, lstm_pads)[0]
        B, T = x.shape[:2]
        f = x.reshape(B * T, *x.shape[2:])  # (B*T, K, n, n)
        if self.cast_input and torch.is_autocast_enabled(f.device.type):
            f = f.to(dtype=torch.get_autocast_dtype(f.device.type), memory_format=torch.channels_last)
        elif self.channels_last:
            f = f.contiguous(memory_format=torch.channels_last)
        f1 = self.conv1(f)                  # (B*T, 32, n, n)
        f2 = self.conv2(f1)                 # (B*T, 64, n2, n2)     n2 = ceil(n / 2)
        f3 = self.conv3(f2)                 # (B*T, 128, n3, n3)    n3 = ceil(n2 / 2)
        f4 = self.conv4(f3)                 # (B*T, 256, n4, n4)    n4 = ceil(n3 / 2)
        # Each (B, T, C, H, W); a view (channels-last levels become (B, T, H, W, C)-stored views, the layout the
        # fused ConvLSTM reads without a copy).
        return [f.reshape(B, T, *f.shape[1:]) for f in (f1, f2, f3, f4)]

    def forward_training(self, x: torch.Tensor, pads: tuple[int, int, int, int]
                         ) -> tuple[list[torch.Tensor], list[bool]]:
        """``training_levels`` collected: (levels, in_xh), one entry a level."""
        levels, in_xh = [], []
        for level, xh in self.training_levels(x, pads):
            levels.append(level)
            in_xh.append(xh)
        return levels, in_xh

    def training_levels(self, x: torch.Tensor, pads: tuple[int, int, int, int]
                        ) -> Iterator[tuple[torch.Tensor, bool]]:
        """The encoder for fused training: the images in time-major order (T*B), and each level's activation
        in a zero-bordered buffer with the ConvLSTM's padding, which the next strided convolution reads too where
        that gives its TF output (``_reads_padded``: conv2, conv3 and conv4 at 30 sensors) -- there the epilogue
        writes it straight into the buffer (``out_pads``: no copy); elsewhere the buffer is a padded copy of the
        plain activation the next convolution reads. So the ConvLSTM's input convolution gives its
        gates exactly (H, W), its gate gradients need no zeroed border and serve the per-step recurrent
        convolutions and the input convolution from one buffer (time-major), and the two input gradients of a
        shared buffer are summed contiguously, by autograd, before the epilogue's backward reads their interior.

        Yields (level, in_xh) a level at a time, level 1 first, each before the next convolution runs (so that a
        caller may run the level's ConvLSTM in between: ``interleaved_levels``); in_xh says that the level's input
        is the x half of its ConvLSTM's [x, h] buffer, written there by the epilogue as well (``ops.encoder_xh``: the
        large levels whose buffer the next convolution shares)."""
        B, T = x.shape[:2]
        dtype = torch.get_autocast_dtype(x.device.type) if torch.is_autocast_enabled(x.device.type) else x.dtype
        f = torch.empty(T * B, *x.shape[2:], device=x.device, dtype=dtype, memory_format=torch.channels_last)
        f.view(T, B, *x.shape[2:]).copy_(x.transpose(0, 1))  # the cast and the reorder in one copy
        convs = (self.conv1, self.conv2, self.conv3, self.conv4)
        src, src_padded, size = f, False, f.shape[-1]
        for conv, nxt in zip(convs, (*convs[1:], None)):
            size = -(-size // conv.stride)  # this level's TF "same" output size
            # Where the next convolution reads the bordered buffer too (or there is none), the epilogue writes the
            # activation straight into it; else plainly, for the next convolution, and the ConvLSTM gets a copy.
            # A buffer with two readers goes out as two outputs (ops/shared_output.py; MSCRED_SHARED_GRADS=0: one),
            # the ConvLSTM's the x half of its [x, h] buffer where the epilogue writes that too (ops/encoder_xh.py).
            shared = nxt is None or _reads_padded(nxt, size, pads)
            two = shared and nxt is not None and shared_output.enabled()
            xh = two and self._writes_xh(src, size)
            call = conv.forward_padded if src_padded else conv
            out = call(src, out_pads=pads if shared else (0, 0, 0, 0), two=two, xh_images=B if xh else 0)
            if two:
                out, for_next = (out[1], out[0]) if xh else out
            else:
                for_next = out
            padded = out if shared else pad_copy(out, pads)
            yield padded.view(T, B, *padded.shape[1:]).transpose(0, 1), xh
            src, src_padded = for_next, shared

    def _writes_xh(self, src: torch.Tensor, size: int) -> bool:
        """Whether the epilogue making a ``size`` x ``size`` level from ``src`` writes it into the level's [x, h]
        buffer too (``ops.encoder_xh``): switched on, where the epilogue's kernels run (as ``bias_act_shared`` and
        ``small_conv.conv_act_shared`` decide) and the level's training ConvLSTM takes the concatenated path. Not for
        1 x 1 maps: their activation is stored NCHW (as channels-last, the same bytes), and their ConvLSTM then
        takes its other path, which the level would change to by taking the buffer."""
        return (encoder_xh.enabled() and size > 1 and runs_fused(src) and src.dtype != torch.float64
                and convlstm_concat.runs(True, fused_convlstm.buffer_layout(), size, size))


def interleaved_levels(x: torch.Tensor) -> bool:
    """Whether the fused training forward runs each level's ConvLSTM right after the convolution that makes its
    input (conv1, ConvLSTM 1, conv2, ...) instead of the whole encoder first (opt-in, MSCRED_INTERLEAVED_LEVELS=1;
    not with MSCRED_LEVEL_STREAMS). The same ops on the same values; what changes is the backward's order.
    Autograd runs the ready backward nodes latest-created first, so with the encoder first the encoder's whole
    backward waits for level 1's ConvLSTM backward and runs at the step's end, where level 1's weight gradient
    (cuDNN, 110 blocks in clusters of 8, on the side stream) held the SMs that the chain's next clustered data
    gradient needed: it started 77 us late (results/next_1206/timeline/, results/step_launch_stats/).
    Interleaved, conv_l's backward runs right after ConvLSTM l's, and only conv1's is left after level 1's. On the
    H200 the graphed bf16 step 2.375 -> 2.368 ms alone on one host (results/defaults_1205/), but with deconv1 on
    its own weight on a second host no faster than both off (results/final_1205/): off until measured again."""
    return switched_on("MSCRED_INTERLEAVED_LEVELS") and not level_streams.enabled(x)


def _reads_padded(conv: SameConv, size: int, pads: tuple[int, int, int, int]) -> bool:
    """Whether ``conv`` (TF "same", stride s) of a ``size`` x ``size`` input gives its output from the input's
    zero-bordered copy with ``pads`` and no padding of its own: the same top/left padding, and the copy's
    extra bottom/right rows (zeros) cover its own bottom/right padding without adding an output row -- e.g.
    conv2 (3 x 3, stride 2) of 30 x 30 and conv3 (2 x 2, stride 2) of 15 x 15 pad bottom/right by one, as the
    ConvLSTM does; conv4 of 8 x 8 pads nothing and never reads the copy's extra row."""
    top, bottom, left, right = same_padding(size, conv.kernel, conv.stride)
    rows = (size + pads[0] + pads[1] - conv.kernel) // conv.stride + 1
    cols = (size + pads[2] + pads[3] - conv.kernel) // conv.stride + 1
    out = -(-size // conv.stride)
    return (top, left) == (pads[0], pads[2]) and bottom <= pads[1] and right <= pads[3] and rows == cols == out


class AttnConvLSTM(nn.Module):
    """One level's ConvLSTM over the T steps (hidden = input channels) followed by MSCRED's temporal attention."""

    def __init__(self, channels: int, cfg: ModelConfig):
        super().__init__()
        k = cfg.lstm_kernel
        self.forget_bias, self.backend = cfg.forget_bias, cfg.backend
        # One gate convolution over concat([x_t, h_{t-1}]); output blocks i, g, f, o (TensorFlow's order).
        self.weight = nn.Parameter(torch.empty(4 * channels, 2 * channels, k, k))
        self.bias = nn.Parameter(torch.zeros(4 * channels))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, x: torch.Tensor, padded: bool = False, in_xh: bool = False, into_cat: bool = False
                ) -> torch.Tensor:  # (B, T, C, H, W) -> (B, C, H, W)
        """``padded``: x is the encoder's training layout (``Encoder.training_layout``), zero-bordered; ``in_xh``:
        moreover the x half of the ConvLSTM's [x, h] buffer (``Encoder.forward_training``, ``ops.encoder_xh``);
        ``into_cat`` (with ``padded``): the output is the upper half of a buffer twice its channels, for the
        decoder's concatenation (``ops.attention_cat``)."""
        if padded:
            # where level 1's backward step kernel runs: one op with the attention, whose backward folds into the
            # ConvLSTM's (ops/triton/convlstm_attention.py)
            fold = self.backend == "fused" and convlstm_attention.folds(x, self.weight)
            if in_xh:  # the op fills the buffer the encoder wrote x into (ops/triton/convlstm_in_xh.py)
                y = convlstm_in_xh.train(x, self.weight, self.bias, self.forget_bias, fold, into_cat)
                return y if fold else self._attention(y, into_cat)
            if fold:
                return convlstm_attention.train_with_attention(x, self.weight, self.bias, self.forget_bias, True,
                                                               into_cat)
            h = fused_convlstm.train(x, self.weight, self.bias, self.forget_bias, padded=True)
            return self._attention(h, into_cat)
        if self.backend == "fused" and runs_fused(x):  # bf16 inference of levels 1-2: one kernel, where it runs
            one_kernel = resident_attention(x, self.weight, self.bias, self.forget_bias)
            if one_kernel is not None:
                return one_kernel
        h = ops.convlstm(x, self.weight, self.bias, self.forget_bias, backend=self.backend)  # (B, T, C, H, W)
        return ops.temporal_attention(h, backend=self.backend)                              # (B, C, H, W)

    def _attention(self, h: torch.Tensor, into_cat: bool) -> torch.Tensor:
        """The temporal attention of every h_t; ``into_cat`` as ``forward``'s (the fused op's)."""
        if into_cat:
            return fused_attention.temporal_attention(h, cat=True)
        return ops.temporal_attention(h, backend=self.backend)

    def forward_sliding(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """``forward`` for scoring consecutive windows (``MSCREDNet.forward_windows``), sliding windows (B, T, C, H,
        W) -> (B, C, H, W): the fused op shares its input convolutions between windows itself; elsewhere
        ``ops.convlstm_sliding`` does, in PyTorch ops. ``out``: where to write the attention output (the channel
        slice of the decoder's concatenation buffer); returned."""
        fused = self.backend == "fused" and runs_fused(x)
        if fused:  # bf16 levels 1-2: the ConvLSTM and the attention in one kernel, where it runs
            one_kernel = resident_attention(x, self.weight, self.bias, self.forget_bias, out)
            if one_kernel is not None:
                return one_kernel
            h = ops.convlstm(x, self.weight, self.bias, self.forget_bias, backend=self.backend)
        else:
            h = convlstm_sliding(x, self.weight, self.bias, self.forget_bias)
        if out is None:
            return ops.temporal_attention(h, backend=self.backend)
        if fused:
            return temporal_attention_into(h, out)
        return out.copy_(ops.temporal_attention(h, backend=self.backend))


class Decoder(nn.Module):
    """deconv4..deconv1 of the table; each level's output is concatenated with the attention output below it."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        c1, c2, c3, c4 = cfg.channels
        k1, k2, k3, k4 = KERNELS
        s1, s2, s3, s4 = STRIDES
        fa = cfg.backend == "fused"  # crop + bias + SELU fused (SameDeconv)
        self.fused = fa  # and the skip concatenations copied in words (ops/concat.py)
        self.deconv4 = SameDeconv(c4, c3, k4, s4, True, fa)              # 256 -> 128, 2x2, stride 2
        self.deconv3 = SameDeconv(2 * c3, c2, k3, s3, True, fa)          # 256 -> 64,  2x2, stride 2
        self.deconv2 = SameDeconv(2 * c2, c1, k2, s2, True, fa)          # 128 -> 32,  3x3, stride 2
        self.deconv1 = SameDeconv(2 * c1, cfg.n_scales, k1, s1, False, fa)  # 64 -> 3, 3x3, stride 1, linear

    def forward(self, a1: torch.Tensor, a2: torch.Tensor, a3: torch.Tensor, a4: torch.Tensor,
                skips_in_cat: tuple[bool, bool, bool] = (False, False, False)) -> torch.Tensor:
        """The reconstruction (B, K, n, n) from the four levels' attention outputs. ``skips_in_cat``: which of a1,
        a2, a3 are the upper half of their concatenation buffer already (``ops.attention_cat``; where
        ``writes_into_cat``)."""
        cat = cat_channels if self.fused else lambda d, a: torch.cat([d, a], dim=1)  # the reference: plain cat
        into = self.writes_into_cat()

        def up(deconv: SameDeconv, x: torch.Tensor, skip: torch.Tensor, in_cat: bool) -> torch.Tensor:
            if into:
                return deconv(x, skip.shape[-1], skip=skip, skip_in_cat=in_cat)
            return cat(deconv(x, skip.shape[-1]), skip)
        d4 = up(self.deconv4, a4, a3, skips_in_cat[2])  # (B, 128 + 128, n3, n3)
        d3 = up(self.deconv3, d4, a2, skips_in_cat[1])  # (B, 64 + 64, n2, n2)
        d2 = up(self.deconv2, d3, a1, skips_in_cat[0])  # (B, 32 + 32, n, n)
        return self.deconv1(d2, a1.shape[-1])           # (B, K, n, n)

    def writes_into_cat(self) -> bool:
        """Whether ``forward`` writes each level's bias + SELU into its skip concatenation (fused training, unless
        MSCRED_DECODER_CAT_EPILOGUE=0: ops/triton/bias_act_cat.py); else the level's output, then the
        concatenation."""
        return self.fused and bias_act_cat_enabled() and torch.is_grad_enabled()

    def skip_buffers(self, batch: int, sizes, like: torch.Tensor, dtype: torch.dtype) -> list[torch.Tensor]:
        """The three concatenations of ``forward`` as empty channels-last buffers, for ``forward_into``: (batch,
        2 * C_l, n_l, n_l) for levels 1-3, ``sizes`` = (n1, n2, n3). The attention output of level l goes into the
        upper half of buffer l (``skip_half(buf, 'attention')``), the decoder's output below it into the lower."""
        return [torch.empty(batch, 2 * deconv.weight.shape[1], n, n, device=like.device, dtype=dtype,
                            memory_format=torch.channels_last)
                for deconv, n in zip((self.deconv2, self.deconv3, self.deconv4), sizes)]

    @staticmethod
    def skip_half(buffer: torch.Tensor, which: str) -> torch.Tensor:
        """The "decoder" (lower) or "attention" (upper) channel half of a ``skip_buffers`` buffer, as ``torch.cat``
        in ``forward`` orders them."""
        half = buffer.shape[1] // 2
        return buffer[:, :half] if which == "decoder" else buffer[:, half:]

    def forward_into(self, a4: torch.Tensor, skips: list[torch.Tensor]) -> torch.Tensor:
        """``forward`` for inference with the attention outputs of levels 1-3 already in ``skips``
        (``skip_buffers``): each deconvolution writes its output into the other half of the buffer above it, so
        nothing is concatenated (on the H200, bf16 scoring of 3,591 windows: 1.02x graphed, 1.05x eager,
        benchmarks/results/window_model_final/)."""
        cat1, cat2, cat3 = skips
        self.deconv4(a4, cat3.shape[-1], out=self.skip_half(cat3, "decoder"))
        self.deconv3(cat3, cat2.shape[-1], out=self.skip_half(cat2, "decoder"))
        self.deconv2(cat2, cat1.shape[-1], out=self.skip_half(cat1, "decoder"))
        return self.deconv1(cat1, cat1.shape[-1])


class MSCREDNet(nn.Module):
    """MSCRED: (B, T, K, n, n) signature matrices -> (B, K, n, n) reconstruction of the last step.

    Parameters
    ----------
    cfg : ModelConfig
        ``n_scales`` (K), ``channels`` (4 levels), ``lstm_kernel``, ``forget_bias``, ``backend`` (ConvLSTM and
        attention), ``conv_backend`` (encoder). The network is fully convolutional: any n >= 4 works without
        ``cfg.n_sensors``.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if len(cfg.channels) != 4:
            raise ValueError(f"ModelConfig.channels must have 4 levels, got {cfg.channels}")
        if cfg.lstm_kernel not in (2, 3):
            raise ValueError(f"ModelConfig.lstm_kernel must be 2 or 3, got {cfg.lstm_kernel}")
        if cfg.backend == AUTO:
            # A bare network does not know its device: "auto" is resolved by whoever trains it (MSCRED.fit, the DDP
            # ranks: ops.resolve_model_backend); built directly, the network is the reference.
            cfg = dataclasses.replace(cfg, backend="reference")
        self.cfg = cfg
        self._weight_plan: weight_cache.Plan | None = None  # the training step's weight casts (forward)
        self.encoder = Encoder(cfg)
        self.lstms = nn.ModuleList(AttnConvLSTM(c, cfg) for c in cfg.channels)
        self.decoder = Decoder(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 5 or x.shape[2] != self.cfg.n_scales or x.shape[-1] != x.shape[-2] or x.shape[-1] < 4:
            raise ValueError(f"MSCREDNet expects (B, T, {self.cfg.n_scales}, n, n) with n >= 4, "
                             f"got {tuple(x.shape)}")
        lstm_pads = self.encoder.training_layout(x)  # fused training: zero-bordered, time-major level inputs
        if lstm_pads is not None and torch.is_autocast_enabled(x.device.type) \
                and not switched_off("MSCRED_WEIGHT_CACHE"):  # every weight cast at once, each way
            targets = self._cast_targets()
            self._weight_plan = weight_cache.plan_for(targets, self._weight_plan)
            with weight_cache.cast_once(targets, self._weight_plan, torch.get_autocast_dtype(x.device.type)):
                return self._forward(x, lstm_pads)
        return self._forward(x, lstm_pads)

    def _cast_targets(self) -> list[weight_cache.Target]:
        """Every convolution weight of the fused model as its kernel reads it under autocast (``weight_cache``):
        the encoder's and decoder's whole, each ConvLSTM's input and recurrent halves."""
        convs = (self.encoder.conv1, self.encoder.conv2, self.encoder.conv3, self.encoder.conv4,
                 self.decoder.deconv4, self.decoder.deconv3, self.decoder.deconv2, self.decoder.deconv1)
        targets = [(conv.weight, "all", 0) for conv in convs]
        for lstm in self.lstms:
            C = lstm.weight.shape[1] // 2
            targets += [(lstm.weight, "x", C), (lstm.weight, "h", C)]
        return targets

    def _forward(self, x: torch.Tensor, lstm_pads: tuple[int, int, int, int] | None) -> torch.Tensor:
        # levels 1-3's attention outputs as halves of the decoder's concatenations (ops/attention_cat.py)
        into_cat = (lstm_pads is not None and self.cfg.backend == "fused" and self.decoder.writes_into_cat()
                    and attention_cat.enabled())
        cats = (into_cat, into_cat, into_cat, False)
        if lstm_pads is not None and interleaved_levels(x):  # conv1, ConvLSTM 1, conv2, ConvLSTM 2, ...
            a1, a2, a3, a4 = (lstm(level, padded=True, in_xh=xh, into_cat=cat) for lstm, (level, xh), cat
                              in zip(self.lstms, self.encoder.training_levels(x, lstm_pads), cats))
            return self.decoder(a1, a2, a3, a4, cats[:3])
        if lstm_pads is None:
            levels, in_xh = self.encoder(x), [False] * 4                 # 4 x (B, T, C_l, H_l, W_l)
        else:  # zero-bordered, some of them x halves of their ConvLSTM's [x, h] buffers
            levels, in_xh = self.encoder.forward_training(x, lstm_pads)
        if self.cfg.backend == "fused":  # opt-in: the levels side by side on CUDA streams (level_streams.py)
            lstms = [functools.partial(lstm, padded=lstm_pads is not None, in_xh=xh, into_cat=cat)
                     for lstm, xh, cat in zip(self.lstms, in_xh, cats)]
            a1, a2, a3, a4 = level_streams.run_levels(lstms, levels)
        else:  # the reference stays the plain one-stream baseline
            a1, a2, a3, a4 = (lstm(f) for lstm, f in zip(self.lstms, levels))  # 4 x (B, C_l, H_l, W_l)
        return self.decoder(a1, a2, a3, a4, cats[:3])                    # (B, K, n, n)

    def forward_windows(self, segments: torch.Tensor, steps: int) -> torch.Tensor:
        """Every window of consecutive signature matrices at once: (S, K, n, n) -> (S - steps + 1, K, n, n), row k
        the reconstruction of window k (segments k .. k + steps - 1), as ``forward`` of the stacked windows.

        Consecutive windows share all but one segment, so the encoder runs once per segment (S images instead of
        steps x (S - steps + 1)), and each level's ConvLSTM gets its windows as sliding views of the per-segment
        features (no copy), whose input convolutions then also run once per segment, not at all for h = 0 at the
        first step (``AttnConvLSTM.forward_sliding``: the fused op's ``step_gates``, else
        ``ops.convlstm_sliding``): inference only. The recurrent convolutions, the cell updates, the attention and
        the decoder run per window: each window starts from h = c = 0. On the fused backend the attention outputs
        and the decoder's outputs are written into the skip connections' buffers (``Decoder.forward_into``) instead
        of being concatenated. On a CPU without autograd the reference backend's windows run through
        ``ops.cpu_inference`` instead (chunks of windows, channels-last, worker threads; the same function up to
        float32 rounding: 1.9x at 30 sensors, 3.6x at 80 on a 2-core VM, benchmarks/results/cpu_forward/).
        """
        if segments.ndim != 4 or segments.shape[0] < steps or steps < 1:
            raise ValueError(f"forward_windows expects (S, {self.cfg.n_scales}, n, n) with S >= steps = {steps}, "
                             f"got {tuple(segments.shape)}")
        if cpu_inference.applies(self, segments):  # CPU scoring of the reference backend: in chunks, NHWC
            return cpu_inference.forward_windows(self, segments, steps)
        n_windows = segments.shape[0] - steps + 1
        levels = self.encoder(segments[None])                            # 4 x (1, S, C_l, H_l, W_l)
        windows = [f[0].as_strided((n_windows, steps, *f.shape[2:]), (f.stride(1), *f.stride()[1:]),
                                   f.storage_offset()) for f in levels]  # 4 x (W, steps, C_l, H_l, W_l) views
        if self.cfg.backend != "fused" or not runs_fused(segments) or switched_off("MSCRED_SKIP_BUFFERS"):
            a1, a2, a3, a4 = (lstm.forward_sliding(x) for lstm, x in zip(self.lstms, windows))
            return self.decoder(a1, a2, a3, a4)                          # (W, K, n, n)
        # Fused: the attention outputs of levels 1-3 are written straight into the decoder's concatenation
        # buffers, in the dtype the ConvLSTM computes in (the autocast dtype under autocast).
        # MSCRED_SKIP_BUFFERS=0 concatenates as forward does (A/B runs).
        device = segments.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else segments.dtype
        skips = self.decoder.skip_buffers(n_windows, [f.shape[-1] for f in levels[:3]], segments, dtype)
        for lstm, x, buf in zip(self.lstms, windows, skips):
            lstm.forward_sliding(x, out=self.decoder.skip_half(buf, "attention"))
        return self.decoder.forward_into(self.lstms[3].forward_sliding(windows[3]), skips)
