"""How long making a long table wide takes (``mscred.data.reading.widened``, what ``--long`` runs on every table and
every ``watch`` poll of a long feed), against the pivot it replaced (``DataFrame.pivot`` then ``reindex``, as
reading.py did up to 2026-12-06): a historian's export of TIMES times x SENSORS sensors, its ISO time and tag text
as pandas reads them from a CSV (pandas 3's str columns), values float64. Both results are checked equal; the best
of REPEATS runs each, on one process, interleaved. One run:
    PYTHONPATH=src python3 benchmarks/bench_long_widen.py [TIMES] [SENSORS] [REPEATS]   (results/long_widen/)"""
import datetime
import platform
import sys
import time

import numpy as np
import pandas as pd

from mscred.data.io import ROW_TIME, TIMESTAMP
from mscred.data.reading import _time_order, widened

TIMES = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
SENSORS = int(sys.argv[2]) if len(sys.argv) > 2 else 100
REPEATS = int(sys.argv[3]) if len(sys.argv) > 3 else 5


def pivoted(df: pd.DataFrame) -> pd.DataFrame:
    """The wide table as the pivot made it (the old code's steps, without its checks)."""
    sensors, times = df["Tag"].astype(str).str.strip(), df[TIMESTAMP]
    pd.DataFrame({"t": times.to_numpy(), "s": sensors.to_numpy()}).duplicated()   # (its repeat check)
    distinct = pd.unique(times.to_numpy())
    order = distinct[_time_order(distinct)]
    columns = list(pd.unique(sensors.to_numpy()))
    wide = (pd.DataFrame({"t": times.to_numpy(), "s": sensors.to_numpy(), "v": df["Value"].to_numpy()})
            .pivot(index="t", columns="s", values="v").reindex(index=order, columns=columns))
    return pd.DataFrame({TIMESTAMP: order, **{name: wide[name].to_numpy() for name in columns}},
                        index=pd.Index(order, name=ROW_TIME))


def main() -> None:
    stamps = pd.date_range("2026-01-01", periods=TIMES, freq="s").strftime("%Y-%m-%d %H:%M:%S").to_numpy()
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({TIMESTAMP: np.repeat(stamps, SENSORS),
                          "Tag": np.tile([f"FIC-{i:03d}.PV" for i in range(SENSORS)], TIMES),
                          "Value": rng.standard_normal(TIMES * SENSORS)})
    frame = pd.read_csv(pd.io.common.StringIO(frame.to_csv(index=False)))   # (the dtypes a CSV gives)
    pd.testing.assert_frame_equal(widened(frame, "Tag", "Value", "bench"), pivoted(frame), check_dtype=False)
    best = {"pivot (before)": np.inf, "factorized (widened)": np.inf}
    for _ in range(REPEATS):
        for name, run in (("pivot (before)", pivoted), ("factorized (widened)",
                                                        lambda f: widened(f, "Tag", "Value", "bench"))):
            start = time.perf_counter()
            run(frame)
            best[name] = min(best[name], time.perf_counter() - start)
    print(f"# {TIMES:,} times x {SENSORS} sensors = {TIMES * SENSORS:,} lines; best of {REPEATS}; "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, pandas {pd.__version__}, numpy {np.__version__}")
    print(f"dtypes as read: {dict(frame.dtypes.astype(str))}")
    for name, seconds in best.items():
        print(f"{name:22s} {seconds:7.3f} s")
    print(f"speed-up {best['pivot (before)'] / best['factorized (widened)']:.1f}x")


if __name__ == "__main__":
    main()
