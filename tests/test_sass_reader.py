"""Cubin reader, .nv.info records, instruction layouts and fatbin extraction (mscred.sass)."""
from __future__ import annotations

import re
import struct
import subprocess

import pytest

pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")

from mscred.errors import InputError  # noqa: E402
from mscred.sass.cubin import Cubin, _plain_name  # noqa: E402
from mscred.sass.fatbin import FATBIN_MAGIC, cubins, find_images, lz_decompress, parse_fatbin  # noqa: E402
from mscred.sass.isa import instruction_bits, set_field, split_instructions  # noqa: E402
from mscred.sass.nvinfo import kernel_params, parse_nvinfo  # noqa: E402
from mscred.sass.probe import template_path  # noqa: E402
from mscred.sass.toolchain import compile_cubin, find_tool  # noqa: E402

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc not found (CUDA toolkit not installed)")
needs_ptxas12 = pytest.mark.skipif(find_tool("nvcc") is None or find_tool("ptxas12") is None,
                                   reason="sm_50 needs nvcc plus a CUDA 12 ptxas (pip install nvidia-cuda-nvcc-cu12)")

KERNELS = r"""
__global__ void fill(int *a) { a[0] = VALUE; }
__global__ void staged(float *out, const float *in, int n) {
    __shared__ float tile[256];
    tile[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    if (threadIdx.x < n) out[threadIdx.x] = tile[255 - threadIdx.x] * 2.0f + 1.0f;
}
__global__ void local_array(int *out, int i) {  // scattered dynamic indexing keeps buf in local memory
    int buf[64];
    for (int k = 0; k < 64; ++k) buf[(k * i) & 63] = out[k + 2];
    out[0] = buf[out[1] & 63];
}
"""


# --- pure-Python parts: hand-made bytes --------------------------------------------------------------------------

def test_split_64bit_skips_control_words():
    words = [0xC0, 0x11, 0x22, 0x33, 0xC1, 0x44, 0x55, 0x66]
    code = b"".join(w.to_bytes(8, "little") for w in words)
    insns = split_instructions(code, 50)
    assert [i.word for i in insns] == [0x11, 0x22, 0x33, 0x44, 0x55, 0x66]
    assert [i.offset for i in insns] == [8, 16, 24, 40, 48, 56]
    assert [i.control for i in insns] == [0xC0] * 3 + [0xC1] * 3


def test_split_128bit_and_field_helpers():
    word = (0x000FE200000001FF << 64) | 0x000000CCFF057435
    insns = split_instructions(word.to_bytes(16, "little") * 2, 90)
    assert len(insns) == 2 and insns[1].offset == 16
    assert insns[0].field(32, 64) == 0xCC and insns[0].field(16, 24) == 5
    assert insns[0].hex() == "000fe200000001ff 000000ccff057435"
    assert set_field(word, 32, 64, 0xDD) == word + ((0xDD - 0xCC) << 32)
    with pytest.raises(ValueError):
        set_field(word, 0, 8, 256)
    assert instruction_bits(61) == 64 and instruction_bits(75) == 128
    with pytest.raises(ValueError):
        instruction_bits(35)


def test_nvinfo_records_and_params():
    # REGCOUNT (SVAL: symbol 3, 24 registers), MAXREG_COUNT (HVAL 255), CTAIDZ_USED (NVAL),
    # KPARAM_INFO for a 4-byte parameter at offset 8, ordinal 1.
    data = (bytes([4, 0x2F]) + struct.pack("<HII", 8, 3, 24) + bytes([3, 0x1B]) + struct.pack("<H", 255)
            + bytes([1, 0x04, 0, 0]) + bytes([4, 0x17]) + struct.pack("<HIHHI", 12, 0, 1, 8, 4 << 18))
    attrs = parse_nvinfo(data)
    assert [a.name for a in attrs] == ["REGCOUNT", "MAXREG_COUNT", "CTAIDZ_USED", "KPARAM_INFO"]
    assert attrs[0].words() == (3, 24) and attrs[1].value == 255 and attrs[2].value is None
    (param,) = kernel_params(attrs)
    assert (param.ordinal, param.offset, param.size) == (1, 8, 4)
    with pytest.raises(ValueError, match="runs past"):
        parse_nvinfo(bytes([4, 0x2F, 40, 0]) + bytes(8))


def test_lz_decompress_literals_and_overlapping_match():
    # token 0x31: 3 literals "abc", then a match of 1+4 = 5 bytes at distance 3 -> "abcabcab"; then "Z".
    stream = bytes([0x31]) + b"abc" + struct.pack("<H", 3) + bytes([0x10]) + b"Z"
    assert lz_decompress(stream, 9) == b"abcabcabZ"


def test_fatbin_container_by_hand():
    payload = b"PTX text\0"
    entry = struct.pack("<HHIQIIHHIIIQQQ", 1, 0x101, 64, len(payload), 0, 0, 0, 8, 90, 0, 0, 0x11, 0, 0)
    blob = struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(entry) + len(payload)) + entry + payload
    (image,) = parse_fatbin(blob, 100, "x.fatbin")
    assert (image.kind, image.arch, image.file_offset, image.data) == ("ptx", "sm_90", 100 + 16 + 64, payload)
    with pytest.raises(InputError, match="claims"):
        parse_fatbin(blob[:-4], 0, "x.fatbin")


def test_not_an_elf_and_demangling():
    with pytest.raises(InputError, match="not an ELF"):
        Cubin(b"hello world", "hello.txt")
    with pytest.raises(InputError, match="not an ELF"):
        find_images(b"just text", "t.txt")
    assert _plain_name("_Z4testPi") == "test" and _plain_name("_ZN2ns3fooEv") == "foo"
    assert _plain_name("my_c_kernel") == "my_c_kernel"


# --- with nvcc: real cubins --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kernels_cu(tmp_path_factory):
    path = tmp_path_factory.mktemp("sass") / "kernels.cu"
    path.write_text(KERNELS)
    return path


@needs_nvcc
def test_reader_on_sm90_cubin(kernels_cu):
    cubin = Cubin(compile_cubin(kernels_cu, "sm_90", {"VALUE": "0xcc"}), "kernels.cubin")
    assert cubin.arch == "sm_90" and set(cubin.kernels) == {"_Z4fillPi", "_Z6stagedPfPKfi", "_Z11local_arrayPii"}
    fill, staged = cubin.kernel("fill"), cubin.kernel("staged")
    assert fill.instruction_bits == 128 and len(fill.code) % 16 == 0
    assert [p.size for p in fill.params] == [8] and [p.size for p in staged.params] == [8, 8, 4]
    assert [p.offset for p in staged.params] == [0, 8, 16]
    # 1 KiB of tile; sm_90's section also counts the 1 KiB the system reserves per block, as cuobjdump does.
    assert staged.shared_bytes >= 256 * 4 and fill.shared_bytes == 0
    assert 0 < fill.registers <= staged.registers <= 255
    assert fill.attribute("EXIT_INSTR_OFFSETS") is not None
    assert cubin.kernel("local_array").frame_bytes == 64 * 4 and fill.frame_bytes == 0
    # the constant sits in exactly one instruction word
    assert sum(1 for i in fill.instructions if i.field(32, 64) == 0xCC) == 1
    with pytest.raises(InputError, match="no kernel 'nope'.*fill"):
        cubin.kernel("nope")


@needs_nvcc
@pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump not found (the oracle of this test)")
def test_resources_agree_with_cuobjdump(kernels_cu, tmp_path):
    data = compile_cubin(kernels_cu, "sm_90", {"VALUE": "7"})
    (tmp_path / "k.cubin").write_bytes(data)
    text = subprocess.run([find_tool("cuobjdump"), "-res-usage", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True, check=True).stdout
    usage = dict(re.findall(r"Function (\S+):\s*\n\s*(REG:.*)", text))
    cubin = Cubin(data)
    assert set(usage) == set(cubin.kernels)
    for name, line in usage.items():
        fields = dict(kv.split(":") for kv in line.split() if ":" in kv)
        k = cubin.kernels[name]
        # cuobjdump's STACK is the cumulative stack (EIATTR_MIN_STACK_SIZE), which holds the local frame.
        assert (k.registers, k.shared_bytes, k.min_stack_bytes, k.const_bytes) == (
            int(fields["REG"]), int(fields["SHARED"]), int(fields["STACK"]), int(fields["CONSTANT[0]"]))


@needs_ptxas12
def test_reader_on_sm50_cubin_reproduces_the_article_word():
    cubin = Cubin(compile_cubin(template_path("value"), "sm_50", {"VALUE": "0xcc"}), "value.sm_50.cubin")
    assert cubin.arch == "sm_50"
    k = cubin.kernel("test")
    assert k.instruction_bits == 64 and len(k.code) % 32 == 0
    # The first article's dump: `f000 0cc7 0000 0100` = 0x010000000cc7f000 (MOV32I R0, 0xcc).
    assert "010000000cc7f000" in [i.hex() for i in k.instructions]


@pytest.fixture(scope="module")
def executables(tmp_path_factory):
    """The article's test program built plainly and with compressed cubins (LZ and zstd)."""
    if find_tool("nvcc") is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    out = tmp_path_factory.mktemp("exe")
    built = {}
    for name, flags in {"plain": [], "lz": ["-Xfatbin", "-compress-all", "-Xfatbin", "--compress-mode=speed"],
                        "zstd": ["-Xfatbin", "-compress-all", "-Xfatbin", "--compress-mode=size"]}.items():
        exe = out / f"test_{name}"
        proc = subprocess.run([find_tool("nvcc"), "-arch=sm_90", *flags, "-o", str(exe),
                               str(template_path("article"))], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"nvcc could not link a host program: {proc.stderr.strip()[:200]}")
        built[name] = exe.read_bytes()
    return built


def test_cubins_in_executable_fatbin(executables):
    found = cubins(executables["plain"], "test")
    with_kernel = [(im, c) for im, c in found if c.kernels]
    assert len(with_kernel) == 1
    image, cubin = with_kernel[0]
    assert image.arch == "sm_90" and image.file_offset is not None and not image.compression
    # the image's bytes really are at that file offset
    assert executables["plain"][image.file_offset:image.file_offset + len(image.data)] == image.data
    assert "_Z4testPi" in cubin.kernels


def test_compressed_entries_decompress_to_the_same_cubin(executables):
    plain = {im.arch: im.data for im, c in cubins(executables["plain"], "plain") if c.kernels}
    lz_images = [im for im in find_images(executables["lz"], "lz") if im.kind == "cubin"]
    assert lz_images and all(im.compression == "lz" and im.file_offset is None for im in lz_images)
    assert any(im.data == plain["sm_90"] for im in lz_images)
    zstd_images = [im for im in find_images(executables["zstd"], "zstd") if im.kind == "cubin"]
    assert zstd_images and all(im.compression == "zstd" for im in zstd_images)
    try:
        import zstandard  # noqa: F401
    except ImportError:
        assert all(im.data is None and "zstandard" in im.note for im in zstd_images)
    else:
        assert any(im.data == plain["sm_90"] for im in zstd_images)


def test_16_byte_loads_counted_in_every_form():
    """The LDG128 column counts 16-byte global loads whatever follows .128 (the read-only path of __ldg and
    const __restrict__ ends in .CONSTANT; cp.async's LDGSTS carries .ZFILL / .BYPASS), and nothing narrower."""
    from collections import Counter

    from mscred.sass.inspect import _count_groups
    mix = Counter({"LDG.E.128": 3, "LDG.E.128.CONSTANT": 20, "LDGSTS.E.BYPASS.128.ZFILL": 2, "LDG.E.64": 5,
                   "LDG.E.CONSTANT": 7, "STG.E.128": 4})
    groups = _count_groups(mix)
    assert groups["ldg128"] == 25
    assert groups["global"] == 3 + 20 + 5 + 7 + 4  # LDGSTS (cp.async) is not in the global ld/st group
