"""`mscred sass`: -k NAME#N, the kernel in the file's cubin number N, in every command that takes -k.

1. `inspect` and `diff` took NAME#N as a piece of a kernel name ("no kernel matching 'k#2'"): they pick cubin N as
   dump, run and patch do (one helper, ``fatbin.numbered_cubin``); a bare name still lists every match, and rows of
   one kernel from several cubins say their numbers. diff applies the number on each side that holds the name in
   several cubins.
2. The numbers counted only the cubins that could be read and held the kernel: a zstd cubin without the
   ``zstandard`` module dropped out, so ``k#1`` picked another cubin on such a machine. Every cubin entry of the
   file is numbered in file order, readable or not; a picked cubin that cannot be read is one line saying why.
"""
from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

pytest.importorskip("elftools", reason="pyelftools (the `sass` extra) is not installed")

from mscred.errors import InputError  # noqa: E402
from mscred.sass.fatbin import FATBIN_MAGIC, FLAG_ZSTD, Image, cubins, find_images, numbered_cubin  # noqa: E402
from mscred.sass.toolchain import find_tool  # noqa: E402

from test_audit_sass_cli import one_line_error  # noqa: E402
from test_sass_audit import run_cli  # noqa: E402

STATIC = "static __global__ void k(int* a) {{ {body} }}\nvoid launch_{name}(int* p) {{ k<<<1, 1>>>(p); }}\n"
EXTERN = "__global__ void k(int* a) {{ {body} }}\n"
ZSTD_NOTE = "compressed with zstd; install the 'zstandard' package to read it"


def _nvcc(*args) -> None:
    if find_tool("nvcc") is None:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    proc = subprocess.run([find_tool("nvcc"), *map(str, args)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"nvcc could not build the input: {proc.stderr.strip()[:200]}")


def _entry(kind: int, payload: bytes, flags: int = 0x11, arch: int = 90) -> bytes:
    """A fatbin entry (header as ``fatbin.parse_fatbin`` reads it) with its payload."""
    header = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, 64, len(payload), len(payload) if flags & FLAG_ZSTD else 0,
                         0, 0, 8, arch, 0, 0, flags, 0, 4 * len(payload))
    return header + payload


def _fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


@pytest.fixture
def unreadable_fatbin(tmp_path, monkeypatch):
    """A .fatbin of a zstd cubin entry (read without the zstandard module), a PTX entry and a cubin entry whose
    payload is no cubin: two cubins, neither readable."""
    monkeypatch.setitem(sys.modules, "zstandard", None)   # `import zstandard` raises ImportError
    path = tmp_path / "x.fatbin"
    path.write_bytes(_fatbin(_entry(2, b"\x28\xb5\x2f\xfd" + bytes(60), 0x11 | FLAG_ZSTD),
                             _entry(1, b".version 8.8\n.target sm_90\n\0"), _entry(2, b"not a cubin" + bytes(53))))
    return path


# --- 2: every cubin numbered, readable or not (hand-made fatbin, no nvcc) -----------------------------------------

def test_every_cubin_entry_is_numbered_in_file_order_readable_or_not(unreadable_fatbin):
    images = find_images(unreadable_fatbin.read_bytes(), "x.fatbin")
    assert [(image.kind, image.number) for image in images] == [("cubin", 1), ("ptx", None), ("cubin", 2)]
    assert [image.note for image in images if image.kind == "cubin"] == [ZSTD_NOTE, "payload is not a cubin"]


PATCH = ["patch", "--old", "0xcc", "--new", "0xdd"]
COMPRESSED = "the cubin is stored compressed (zstd), which cannot be patched in place; rebuild with nvcc --no-compress"


@pytest.mark.parametrize("command", [["dump"], ["run"], ["inspect"], PATCH, ["diff", "SAME"]])
def test_a_picked_cubin_that_cannot_be_read_is_one_line_saying_why(unreadable_fatbin, command, capsys):
    def refused(selector: str) -> str:
        extra = [unreadable_fatbin] if command[1:] == ["SAME"] else command[1:]
        return one_line_error(capsys, command[0], unreadable_fatbin, *extra, "-k", selector)

    path = unreadable_fatbin
    at = 16 + 64   # the first entry's payload
    if command == PATCH:   # (zstandard would not help: a compressed cubin cannot be patched)
        assert refused("test#1").startswith(f"mscred: error: {path}[cubin sm_90 @ {at:#x}]: {COMPRESSED} ")
    else:
        assert refused("test#1") == (f"mscred: error: {path}: -k 'test#1': cubin #1 ({path}[cubin sm_90 @ "
                                     f"{at:#x}]) could not be read: {ZSTD_NOTE}")
    line = refused("test#2")
    assert f"-k 'test#2': cubin #2 ({path}[cubin sm_90 @ " in line, line
    assert line.endswith("]) could not be read: payload is not a cubin"), line
    assert refused("test#3") == (f"mscred: error: {path}: -k 'test#3': no cubin #3 (the file has 2 cubins, #1 to #2 "
                                 f"in file order)")


def _image(number: int, arch: str) -> Image:
    return Image("cubin", arch, 0, b"", f"app[cubin {arch} #{number}]", number=number)


def test_arch_keeps_the_files_numbers():
    """--arch sm_90 of a file with sm_80 and sm_90 cubins of two units: the sm_90 ones stay #2 and #4."""
    images = [_image(1, "sm_80"), _image(2, "sm_90"), _image(3, "sm_80"), _image(4, "sm_90")]
    sm90 = [image for image in images if image.arch == "sm_90"]
    assert numbered_cubin(sm90, "k#4", "app", sm90, "sm_90") is sm90[1]
    assert numbered_cubin(sm90, "k", "app", sm90, "sm_90") is None
    with pytest.raises(InputError) as err:
        numbered_cubin(sm90, "k#3", "app", sm90, "sm_90")
    assert str(err.value) == ("app: -k 'k#3': no cubin #3 for sm_90 (sm_90's cubins are #2 and #4, numbered among "
                              "all of the file's in file order; 'k' is in #2 and #4)")
    with pytest.raises(InputError, match=r"^app: -k 'k#2': cubin #2 \(app\[cubin sm_90 #2\]\) holds no kernel 'k'; "
                                         r"'k' is in #4$"):
        numbered_cubin(sm90, "k#2", "app", sm90[1:], "sm_90")


# --- 1: inspect and diff take NAME#N (two units' static kernels in one executable) ---------------------------------

@pytest.fixture(scope="module")
def statics(tmp_path_factory):
    """``app``: a.cu and b.cu each with a `static __global__ void k(int*)` (both _Z1kPi; b.cu's stores twice), and
    ``b.cubin``: b.cu alone."""
    folder = tmp_path_factory.mktemp("numbers")
    (folder / "a.cu").write_text(STATIC.format(name="a", body="a[0] = 0xcc;"))
    (folder / "b.cu").write_text(STATIC.format(name="b", body="a[0] = 0xcc; a[1] = 0xee;"))
    (folder / "main.cu").write_text("void launch_a(int*); void launch_b(int*);\n"
                                    "int main() { launch_a(nullptr); launch_b(nullptr); }\n")
    _nvcc("-arch=sm_90", "-o", folder / "app", folder / "a.cu", folder / "b.cu", folder / "main.cu")
    _nvcc("-arch=sm_90", "-cubin", "-o", folder / "b.cubin", folder / "b.cu")
    return folder


def _holders(path):
    """(cubin number, image, kernel) of each cubin of ``path`` holding _Z1kPi, in file order."""
    return [(image.number, image, cubin.kernels["_Z1kPi"]) for image, cubin in cubins(path.read_bytes(), str(path))
            if "_Z1kPi" in cubin.kernels]


def test_inspect_picks_the_cubin_dump_picks(statics, capsys):
    app = statics / "app"
    holders = _holders(app)
    assert len(holders) == 2 and holders[0][2].registers != holders[1][2].registers   # (told apart below)
    for number, image, kernel in holders:
        code, text, err = run_cli(capsys, "inspect", app, "-k", f"k#{number}", "--json")
        assert code == 0, err
        (row,) = json.loads(text)
        assert (row["cubin"], row["image"], row["kernel"], row["registers"]) == (number, image.where, "_Z1kPi",
                                                                                 kernel.registers)
        code, text, err = run_cli(capsys, "inspect", app, "-k", f"k#{number}")
        assert code == 0 and len([ln for ln in text.splitlines() if ln.startswith("sm_90")]) == 1, err
        assert "(cubin #" not in text   # (one row: nothing to tell apart)
        code, text, err = run_cli(capsys, "dump", app, "-k", f"k#{number}")
        assert code == 0 and text.startswith(f"sm_90 _Z1kPi: code at file byte "
                                             f"{image.file_offset + kernel.code_offset:#x}\n"), err


def test_inspect_of_a_bare_name_still_lists_every_match_with_its_cubin(statics, capsys):
    (a, *_), (b, *_) = _holders(statics / "app")
    code, text, err = run_cli(capsys, "inspect", statics / "app", "-k", "k")
    assert code == 0, err
    rows = [ln for ln in text.splitlines() if ln.startswith("sm_90")]
    assert len(rows) == 2 and rows[0].endswith(f"k(int*)  (cubin #{a})") and rows[1].endswith(f"(cubin #{b})"), text


def test_inspect_refuses_a_number_that_picks_no_kernel(statics, capsys):
    app = statics / "app"
    (a, *_), (b, *_) = _holders(app)
    empty = next(image.number for image in find_images(app.read_bytes(), "app")
                 if image.kind == "cubin" and image.number not in (a, b))
    line = one_line_error(capsys, "inspect", app, "-k", f"k#{empty}")
    assert f"-k 'k#{empty}': cubin #{empty} (" in line and line.endswith(f"holds no kernel 'k'; 'k' is in #{a} and "
                                                                        f"#{b}"), line
    assert f"-k 'k#9': no cubin #9 (the file has " in one_line_error(capsys, "inspect", app, "-k", "k#9")
    assert "after '#' give the number" in one_line_error(capsys, "inspect", app, "-k", "k#0")


def _diff(capsys, *args) -> list[dict]:
    code, text, err = run_cli(capsys, "diff", *args, "--json")
    assert code == 0, err
    return json.loads(text)


def test_diff_takes_the_number_on_both_sides(statics, capsys, tmp_path):
    app = statics / "app"
    (a, *_), (b, *_) = _holders(app)
    registers = {number: kernel.registers for number, _, kernel in _holders(app)}
    assert len(_diff(capsys, app, app, "-k", "k")) == 2   # (a bare name: every match, paired in file order)
    patched = tmp_path / "app.dd"
    code, _, err = run_cli(capsys, "patch", app, "-k", f"k#{b}", "--old", "0xee", "--new", "0xdd", "-o", patched)
    assert code == 0, err
    disassembled = find_tool("nvdisasm") is not None
    for number, changed in ((a, False), (b, True)):
        (row,) = _diff(capsys, app, patched, "-k", f"k#{number}")
        assert row["kernel"] == "_Z1kPi" and row["status"] == "same", row   # (the same counts: one immediate)
        if disassembled and row["identical"] is not None:
            assert row["identical"] is not changed, row
        assert row["old"]["registers"] == row["new"]["registers"] == registers[number], row


def test_diff_reads_a_side_holding_the_name_in_one_cubin_whole(statics, capsys):
    """b.cu built alone against the executable linking it with a.cu: the number picks the executable's side."""
    app, lone = statics / "app", statics / "b.cubin"
    (a, *_), (b, *_) = _holders(app)
    (row,) = _diff(capsys, lone, app, "-k", f"k#{b}")
    assert row["status"] == "same" and row["identical"] in (True, None), row
    (row,) = _diff(capsys, app, lone, "-k", f"k#{a}")   # (old: a.cu's; new: b.cu's, which stores twice)
    assert row["status"] == "changed", row
    line = one_line_error(capsys, "diff", lone, lone, "-k", "k#2")
    assert line == (f"mscred: error: -k 'k#2': neither {lone} nor {lone} holds 'k' in cubin #2, and no side holds it "
                    f"in several cubins (it is in {lone}: #1; {lone}: #1)")
    assert f"{app}: -k 'k#9': no cubin #9 (" in one_line_error(capsys, "diff", lone, app, "-k", "k#9")


# --- 2: the same numbers with and without zstandard ---------------------------------------------------------------

@pytest.fixture(scope="module")
def zstd_first(tmp_path_factory):
    """A static library of two objects each with `__global__ void k(int*)`: ea.o built with -rdc=true (CUDA 13
    stores its cubin zstd-compressed), eb.o without (a plain cubin): k is in cubins #1 (zstd) and #2."""
    folder = tmp_path_factory.mktemp("zstdfirst")
    (folder / "ea.cu").write_text(EXTERN.format(body="a[0] = 0xcc;"))
    (folder / "eb.cu").write_text(EXTERN.format(body="a[0] = 0xcc; a[1] = 0xee;"))
    _nvcc("-arch=sm_90", "-rdc=true", "-c", "-o", folder / "ea.o", folder / "ea.cu")
    _nvcc("-arch=sm_90", "-c", "-o", folder / "eb.o", folder / "eb.cu")
    _nvcc("-lib", "-o", folder / "lib.a", folder / "ea.o", folder / "eb.o")
    lib = folder / "lib.a"
    numbered = [image for image in find_images(lib.read_bytes(), "lib.a") if image.kind == "cubin"]
    if [image.compression for image in numbered] != ["zstd", ""]:
        pytest.skip(f"this nvcc's cubins are not one zstd then one plain: {[i.compression for i in numbered]}")
    return lib


def test_numbers_do_not_shift_without_zstandard(zstd_first, capsys, monkeypatch):
    lib = zstd_first
    plain = next(image for image in find_images(lib.read_bytes(), "lib.a") if image.number == 2)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    code, text, err = run_cli(capsys, "kernels", lib)
    assert code == 0, err
    assert [ln.split(" (")[0] for ln in text.splitlines() if "cubin" in ln] == ["#1 cubin sm_90", "#2 cubin sm_90"]
    code, text, err = run_cli(capsys, "dump", lib, "-k", "k#2")   # eb.o's, as with zstandard
    assert code == 0 and text.startswith("sm_90 _Z1kPi: code at file byte "), err
    assert int(text.split("file byte ")[1].split()[0], 16) > plain.file_offset
    code, text, err = run_cli(capsys, "inspect", lib, "-k", "k#2", "--json")
    assert code == 0 and [row["cubin"] for row in json.loads(text)] == [2], err
    for command in (["dump"], ["run"], ["inspect"], ["diff", lib]):
        line = one_line_error(capsys, command[0], lib, *command[1:], "-k", "k#1")
        assert line.startswith(f"mscred: error: {lib}: -k 'k#1': cubin #1 ({lib}(ea.o):__nv_relfatbin[cubin "
                               f"sm_90 @ "), line
        assert line.endswith(f"]) could not be read: {ZSTD_NOTE}"), line
    line = one_line_error(capsys, "patch", lib, *PATCH[1:], "-k", "k#1")
    assert line.startswith(f"mscred: error: {lib}(ea.o):__nv_relfatbin[cubin sm_90 @ ") and COMPRESSED in line, line
    code, text, err = run_cli(capsys, "patch", lib, "-k", "k#2", "--old", "0xee", "--new", "0xdd", "-o",
                              lib.with_name("lib.dd.a"))   # (eb.o's plain cubin: patched without zstandard)
    assert code == 0 and "wrote " in text, err


def test_with_zstandard_the_first_number_is_the_compressed_cubin(zstd_first, capsys):
    pytest.importorskip("zstandard")
    line = one_line_error(capsys, "dump", zstd_first, "-k", "k")
    assert line.endswith("-k 'k#1' or -k 'k#2'") and "#1 " + f"{zstd_first}(ea.o)" in line, line
    code, text, err = run_cli(capsys, "dump", zstd_first, "-k", "k#1")
    assert code == 0 and text.splitlines()[0] == "sm_90 _Z1kPi", err   # (compressed: no file byte)
    code, text, err = run_cli(capsys, "inspect", zstd_first, "-k", "k#1", "--json")
    assert code == 0 and [(row["cubin"], "(ea.o)" in row["image"]) for row in json.loads(text)] == [(1, True)], err
