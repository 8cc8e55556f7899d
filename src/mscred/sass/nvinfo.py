"""The ``.nv.info`` and ``.nv.info.<kernel>`` sections of a cubin: per-kernel attributes the driver reads at load.

Each record is ``u8 format, u8 attribute`` followed by, for the formats:
  1 EIFMT_NVAL  no value (2 bytes of padding)
  2 EIFMT_BVAL  one byte value (+1 pad)
  3 EIFMT_HVAL  one 16-bit value
  4 EIFMT_SVAL  a 16-bit size, then that many bytes
Records in the global ``.nv.info`` refer to a kernel by its symbol index in their first 32-bit word
(EIATTR_REGCOUNT, EIATTR_FRAME_SIZE, EIATTR_MIN_STACK_SIZE, EIATTR_MAX_STACK_SIZE).
The attribute numbers are the ones ``cuobjdump -elf`` names.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

ATTRIBUTE_NAMES = {
    0x01: "PAD", 0x02: "IMAGE_SLOT", 0x03: "JUMPTABLE_RELOCS", 0x04: "CTAIDZ_USED", 0x05: "MAX_THREADS",
    0x06: "IMAGE_OFFSET", 0x07: "IMAGE_SIZE", 0x08: "TEXTURE_NORMALIZED", 0x09: "SAMPLER_INIT",
    0x0a: "PARAM_CBANK", 0x0b: "SMEM_PARAM_OFFSETS", 0x0c: "CBANK_PARAM_OFFSETS", 0x0d: "SYNC_STACK",
    0x0e: "TEXID_SAMPID_MAP", 0x0f: "EXTERNS", 0x10: "REQNTID", 0x11: "FRAME_SIZE", 0x12: "MIN_STACK_SIZE",
    0x13: "SAMPLER_FORCE_UNNORMALIZED", 0x14: "BINDLESS_IMAGE_OFFSETS", 0x15: "BINDLESS_TEXTURE_BANK",
    0x16: "BINDLESS_SURFACE_BANK", 0x17: "KPARAM_INFO", 0x18: "SMEM_PARAM_SIZE", 0x19: "CBANK_PARAM_SIZE",
    0x1a: "QUERY_NUMATTRIB", 0x1b: "MAXREG_COUNT", 0x1c: "EXIT_INSTR_OFFSETS", 0x1d: "S2RCTAID_INSTR_OFFSETS",
    0x1e: "CRS_STACK_SIZE", 0x1f: "NEED_CNP_WRAPPER", 0x20: "NEED_CNP_PATCH", 0x21: "EXPLICIT_CACHING",
    0x22: "ISTYPEP_USED", 0x23: "MAX_STACK_SIZE", 0x24: "SUQ_USED", 0x25: "LD_CACHEMOD_INSTR_OFFSETS",
    0x26: "LOAD_CACHE_REQUEST", 0x27: "ATOM_SYS_INSTR_OFFSETS", 0x28: "COOP_GROUP_INSTR_OFFSETS",
    0x29: "COOP_GROUP_MASK_REGIDS", 0x2a: "SW1850030_WAR", 0x2b: "WMMA_USED", 0x2c: "HAS_PRE_V10_OBJECT",
    0x2d: "ATOMF16_EMUL_INSTR_OFFSETS", 0x2e: "ATOM16_EMUL_INSTR_REG_MAP", 0x2f: "REGCOUNT",
    0x30: "SW2393858_WAR", 0x31: "INT_WARP_WIDE_INSTR_OFFSETS", 0x32: "SHARED_SCRATCH", 0x33: "STATISTICS",
    0x34: "INDIRECT_BRANCH_TARGETS", 0x35: "SW2861232_WAR", 0x36: "SW_WAR", 0x37: "CUDA_API_VERSION",
    0x38: "NUM_MBARRIERS", 0x39: "MBARRIER_INSTR_OFFSETS", 0x3a: "COROUTINE_RESUME_ID_OFFSETS",
    0x3b: "SAM_REGION_STACK_SIZE", 0x3c: "PER_REG_TARGET_PERF_STATS", 0x3d: "CTA_PER_CLUSTER",
    0x3e: "EXPLICIT_CLUSTER", 0x3f: "MAX_CLUSTER_RANK", 0x40: "INSTR_REG_MAP", 0x41: "RESERVED_SMEM_USED",
    0x42: "RESERVED_SMEM_0_SIZE", 0x43: "UCODE_SECTION_DATA", 0x44: "UNUSED_LOAD_BYTE_OFFSET",
    0x45: "KPARAM_INFO_V2", 0x46: "SYSCALL_OFFSETS", 0x47: "SW_WAR_MEMBAR_SYS_INSTR_OFFSETS",
    0x48: "GRAPHICS_GLOBAL_CBANK", 0x49: "SHADER_TYPE", 0x4a: "VRC_CTA_INIT_COUNT", 0x4b: "TOOLS_PATCH_FUNC",
    0x4c: "NUM_BARRIERS", 0x4d: "TEXMODE_INDEPENDENT", 0x4e: "PERF_STATISTICS", 0x4f: "AT_ENTRY_FRAGMENTS",
    0x50: "SPARSE_MMA_MASK", 0x51: "TCGEN05_1CTA_USED", 0x52: "TCGEN05_2CTA_USED", 0x53: "GEN_ERRBAR_AT_EXIT",
    0x54: "REG_RECONFIG", 0x55: "ANNOTATIONS", 0x56: "SANITIZE", 0x57: "STACK_CANARY_TRAP_OFFSETS",
    0x58: "STUB_FUNCTION_KIND", 0x59: "LOCAL_CTA_ASYNC_STORE_OFFSETS", 0x5a: "MERCURY_FINALIZER_OPTIONS",
    0x5f: "MERCURY_ISA_VERSION",
}
# Global records whose payload starts with the symbol index of the kernel they describe.
PER_SYMBOL = {"REGCOUNT", "FRAME_SIZE", "MIN_STACK_SIZE", "MAX_STACK_SIZE", "CRS_STACK_SIZE"}


@dataclass(frozen=True)
class Attribute:
    """One ``.nv.info`` record: ``name`` (without the EIATTR_ prefix), its format code and raw ``value``.

    ``value`` is an int for BVAL/HVAL records, the payload bytes for SVAL, and None for NVAL.
    """

    name: str
    fmt: int
    value: int | bytes | None

    def words(self) -> tuple[int, ...]:
        """The SVAL payload as little-endian 32-bit words (trailing bytes ignored)."""
        if not isinstance(self.value, bytes):
            return ()
        n = len(self.value) // 4
        return struct.unpack_from(f"<{n}I", self.value)


class NvInfoError(ValueError):
    """A ``.nv.info*`` section whose records do not parse: the cubin is damaged (the reader reports it as such)."""


def parse_nvinfo(data: bytes, where: str = ".nv.info") -> list[Attribute]:
    """Parse the records of one ``.nv.info*`` section; ``where`` names it in error messages.

    Raises
    ------
    NvInfoError
        A record of an unknown format, or one cut short by the section end (a damaged file).
    """
    out: list[Attribute] = []
    pos = 0
    while pos + 2 <= len(data):
        fmt, code = data[pos], data[pos + 1]
        name = ATTRIBUTE_NAMES.get(code, f"0x{code:02x}")
        if fmt not in (1, 2, 3, 4):
            raise NvInfoError(f"{where}: unknown record format {fmt} at byte {pos}")
        # Every format has 2 more bytes (padding, a value or a size) before any payload: a record cut short
        # there would otherwise fail as an IndexError or struct.error, not as the damaged section it is.
        if pos + 4 > len(data):
            raise NvInfoError(f"{where}: record {name} at byte {pos} runs past the section end")
        if fmt == 1:
            out.append(Attribute(name, fmt, None))
            pos += 4
        elif fmt == 2:
            out.append(Attribute(name, fmt, data[pos + 2]))
            pos += 4
        elif fmt == 3:
            out.append(Attribute(name, fmt, struct.unpack_from("<H", data, pos + 2)[0]))
            pos += 4
        else:
            (size,) = struct.unpack_from("<H", data, pos + 2)
            if pos + 4 + size > len(data):
                raise NvInfoError(f"{where}: record {name} at byte {pos} runs past the section end")
            out.append(Attribute(name, fmt, bytes(data[pos + 4:pos + 4 + size])))
            pos += 4 + size
    return out


@dataclass(frozen=True)
class Param:
    """A kernel parameter from EIATTR_KPARAM_INFO: ordinal, byte offset in the parameter bank, size in bytes."""

    ordinal: int
    offset: int
    size: int


def kernel_params(attrs: list[Attribute]) -> list[Param]:
    """Parameters of a kernel from its ``.nv.info.<kernel>`` records, in ordinal order.

    KPARAM_INFO payload: u32 index, u16 ordinal, u16 offset, u32 flags whose bits 18..31 hold the size in bytes.
    """
    params = []
    for attr in attrs:
        if attr.name == "KPARAM_INFO" and isinstance(attr.value, bytes) and len(attr.value) >= 12:
            _, ordinal, offset, flags = struct.unpack_from("<IHHI", attr.value)
            params.append(Param(ordinal, offset, (flags >> 18) & 0x3fff))
    return sorted(params, key=lambda p: p.ordinal)
