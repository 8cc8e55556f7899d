"""Screenshots of `mscred demo`'s HTML report for the README: docs/report_top.png and docs/report_bottom.png,
docs/report_tep11.png (`--dataset tep:11 --names report_tep11.png`, with the `datasets` extra), and the page of
`mscred detect --report` on the demo's test data, no labels (`--detect --names report_detect.png`).

    python3 benchmarks/report_screenshots.py [--demo-out DIR | --dataset NAME] [--names A.png[,B.png]] [--width 900]

Renders DIR/report/index.html (by default: a fresh `mscred demo --out demo_out [--dataset NAME]`, run in a temporary
folder so that the report names its files as a user's would) in a headless Chromium (Debian's `chromium` package, or
CHROMIUM=path) and trims the white below the last section. Two names: the page cut in two at the section gap nearest
its middle; one: the page's top, down to the section gap nearest --first-screen rows. What the screenshots show is
the report of that run: the demo is seeded (seed 0), so its metrics are the README's.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
WHITE = 250          # a pixel at least this bright in every channel counts as background
MIN_BAND = 28        # rows of background a cut may fall in: the gap before a section's heading (31-35 rows at
                     # 900 pixels wide; the gaps under a heading and between panels are 14-20)


def chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        sys.exit("no chromium: apt-get install chromium (or set CHROMIUM)")
    return found


def screenshot(html: Path, width: int, out: Path, height: int = 12000) -> Image.Image:
    """The page at ``width`` pixels wide, ``height`` tall (longer than the report), trimmed below its content."""
    subprocess.run([chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},{height}", f"--screenshot={out}", html.resolve().as_uri()],
                   check=True, capture_output=True, timeout=300)
    image = Image.open(out).convert("RGB")
    ink = np.flatnonzero((np.asarray(image) < WHITE).any(axis=(1, 2)))
    return image.crop((0, 0, image.width, int(ink.max()) + 20))


def cut_row(image: Image.Image, near: int) -> int:
    """The middle of the blank band of MIN_BAND rows or more (the gap before a section) nearest row ``near``."""
    blank = (np.asarray(image) >= WHITE).all(axis=(1, 2))
    bands, start = [], None
    for row, empty in enumerate(np.append(blank, False)):
        if empty and start is None:
            start = row
        elif not empty and start is not None:
            if row - start >= MIN_BAND:
                bands.append((start + row) // 2)
            start = None
    if not bands:
        return min(near, image.height)
    return min(bands, key=lambda r: abs(r - near))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo-out", type=Path, default=None, help="a demo's output folder (default: run one)")
    parser.add_argument("--dataset", default=None, help="the demo's --dataset, when it is run here")
    parser.add_argument("--detect", action="store_true",
                        help="the page of `mscred detect MODEL TEST --report` on the demo's model and test data")
    parser.add_argument("--names", default="report_top.png,report_bottom.png",
                        help="one or two file names written under --docs")
    parser.add_argument("--first-screen", type=int, default=1400, help="rows of a one-name screenshot, about")
    parser.add_argument("--width", type=int, default=900)
    parser.add_argument("--docs", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mscred-shots-") as tmp:
        demo_out = args.demo_out
        if demo_out is None:
            dataset = ["--dataset", args.dataset] if args.dataset else []
            subprocess.run([sys.executable, "-m", "mscred", "demo", "--out", "demo_out", *dataset], cwd=tmp,
                           check=True)
            demo_out = Path(tmp) / "demo_out"
        html = demo_out / "report" / "index.html"
        if args.detect:   # (run where the demo is, so that the page names demo_out/ as a user's would)
            subprocess.run([sys.executable, "-m", "mscred", "detect", f"{demo_out.name}/model",
                            f"{demo_out.name}/data/test.csv",
                            "--out", str(Path(tmp) / "scores.csv"), "--report", str(Path(tmp) / "detect")],
                           cwd=demo_out.parent, check=True)
            html = Path(tmp) / "detect" / "index.html"
        if not html.is_file():
            sys.exit(f"{html}: no report there (a `mscred demo --out DIR` folder has one)")
        page = screenshot(html, args.width, Path(tmp) / "page.png")
    names = args.names.split(",")
    if len(names) not in (1, 2):
        sys.exit(f"--names {args.names}: one or two file names")
    row = cut_row(page, page.height // 2 if len(names) == 2 else args.first_screen)
    boxes = [(0, 0, page.width, row), (0, row, page.width, page.height)]
    args.docs.mkdir(parents=True, exist_ok=True)
    for name, box in zip(names, boxes):
        part = page.crop(box)
        part.save(args.docs / name, optimize=True)
        print(f"wrote {args.docs / name} ({part.width} x {part.height})")


if __name__ == "__main__":
    main()
