"""bf16 <-> float32 conversions as integer arithmetic, for kernels that CI checks bit for bit on Triton's CPU
interpreter: the GPU's conversions round float32 -> bf16 to nearest even and keep bf16 subnormals, but the
interpreter truncates and flushes them. These give the GPU's (and PyTorch's) bits on both."""
from __future__ import annotations

from mscred.ops.triton.runtime import tl, triton

if triton is not None:

    @triton.jit
    def bf16_bits(value):
        """float32 ``value`` -> its bf16 bits (int16), rounded to nearest even; NaN stays NaN (quieted), not
        carried into the sign bit by the rounding add."""
        bits = value.to(tl.int32, bitcast=True)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        nan = (bits & 0x7FFFFFFF) > 0x7F800000
        return tl.where(nan, (bits >> 16) | 0x40, rounded).to(tl.int16)

    @triton.jit
    def bf16_value(bits):
        """bf16 bits (int16) -> float32: the upper half of the word, subnormals kept."""
        return (bits.to(tl.int32) << 16).to(tl.float32, bitcast=True)
