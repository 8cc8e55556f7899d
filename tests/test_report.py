"""The HTML report: rendered on small data, then checked part by part (sections, embedded images, metrics)."""
import base64
import json
import re

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib", reason="the report needs matplotlib (extra 'report')")

from mscred.cli.main import main  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def _images(page: str) -> dict[str, bytes]:
    return {alt: base64.b64decode(data)
            for alt, data in re.findall(r'alt="([^"]+)" src="data:image/png;base64,([^"]+)"', page)}


def _self_contained(page: str) -> None:
    assert "<script" not in page.lower()
    # no resource is fetched: every src is inline data, no stylesheet link, no url(...)
    assert all(src.startswith("data:image/png;base64,") for src in re.findall(r'src="([^"]*)"', page))
    assert "<link" not in page.lower() and "url(" not in page.lower()


@pytest.fixture
def evaluated(tmp_path):
    from mscred.data.synthetic import write_synthetic

    data = write_synthetic(tmp_path / "data", n_sensors=5, length=2000, seed=3)
    test = data.test
    rng = np.random.default_rng(1)
    flags = ((rng.random(len(test)) < 0.02) | (test["label"].to_numpy() == 1) & (rng.random(len(test)) < 0.7))
    causes = ["sensor_1;sensor_2;sensor_3" if f else "" for f in flags]
    pd.DataFrame({"timestamp": test["timestamp"], "score": rng.random(len(test)) + flags,
                  "is_anomaly": flags.astype(int), "root_causes": causes}).to_csv(tmp_path / "scores.csv",
                                                                                   index=False)
    return tmp_path


def test_report_without_model(evaluated, capsys):
    out = evaluated / "report"
    code = main(["evaluate", str(evaluated / "scores.csv"), "--labels", str(evaluated / "data" / "test.csv"),
                 "--report", str(out), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    page = (out / "index.html").read_text()
    _self_contained(page)
    for section in ("sec-metrics", "sec-score", "sec-series", "sec-residuals", "sec-causes"):
        assert f'id="{section}"' in page
    images = _images(page)
    assert set(images) == {"score", "series", "series zoomed", "root causes"}
    assert all(png.startswith(PNG) and len(png) > 5000 for png in images.values())
    # the metrics table shows the same numbers as --json, beside the random baseline
    table = page[page.index('<table id="metrics"'):page.index("</table>")]
    assert f"{result['f1']:.3f}" in table and f"{result['random_baseline']['auc_pr']:.3f}" in table
    assert "best F1 (threshold chosen WITH labels)" in table
    # the VUS rows say the window their figures were measured at, as evaluate's printed table does
    assert table.count(f"range-based, L = {result['vus_sliding_window']}<") == 2
    assert "Residual matrices not available" in page
    assert "Sensor scores not in the SCORES file: `mscred detect --sensor-scores` writes them." in page
    assert json.loads((out / "metrics.json").read_text()) == result
    # no temporary directory is left beside the report
    assert sorted(p.name for p in evaluated.iterdir()) == ["data", "report", "scores.csv"]


def test_report_labels_only_says_series_missing(evaluated, capsys):
    pd.read_csv(evaluated / "data" / "test.csv")[["timestamp", "label"]].to_csv(evaluated / "labels.csv",
                                                                                index=False)
    out = evaluated / "r2"
    assert main(["evaluate", str(evaluated / "scores.csv"), "--labels", str(evaluated / "labels.csv"),
                 "--report", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "Sensor series not available" in page
    assert set(_images(page)) == {"score", "root causes"}
    # with --data the series come back
    assert main(["evaluate", str(evaluated / "scores.csv"), "--labels", str(evaluated / "labels.csv"),
                 "--data", str(evaluated / "data" / "test.csv"), "--report", str(out)]) == 0
    assert {"series", "series zoomed"} <= set(_images((out / "index.html").read_text()))


def test_report_with_model_has_residual_heatmaps(tmp_path, capsys):
    from mscred.data.synthetic import write_synthetic
    from mscred.detector import MSCRED

    data = write_synthetic(tmp_path / "data", n_sensors=5, length=1600, seed=4)
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False).fit(data.train)
    model.save(tmp_path / "model")
    model.detect(data.test.drop(columns=["label"])).to_csv(tmp_path / "scores.csv", index=False)
    out = tmp_path / "report"
    assert main(["evaluate", str(tmp_path / "scores.csv"), "--labels", str(tmp_path / "data" / "test.csv"),
                 "--model", str(tmp_path / "model"), "--report", str(out)]) == 0
    page = (out / "index.html").read_text()
    _self_contained(page)
    images = _images(page)
    assert "residuals" in images and images["residuals"].startswith(PNG)
    assert "Residual matrices not available" not in page
    # the heatmaps' windows: the highest-scoring ones, residuals equal to a full-batch reconstruction's
    from mscred.data.io import load_table
    from mscred.detect import residuals
    from mscred.evaluation import read_scores
    from mscred.report import worst_residuals

    table = load_table(tmp_path / "data" / "test.csv")
    row_scores = read_scores(tmp_path / "scores.csv").score
    items = worst_residuals(model, table.values, table.sensors, row_scores, 2)
    segments = model._segments(model._aligned(table))
    recon = model._reconstruct(segments)                   # every window at once
    steps = model.config_.signature.steps
    window_of_row = model.window_of_row(len(row_scores))
    assert items[0][0] == window_of_row[int(np.argmax(np.where(window_of_row >= 0, row_scores, -np.inf)))]
    for w, last, res in items:
        assert window_of_row[last] == w
        np.testing.assert_allclose(res, residuals(segments[w + steps - 1:w + steps], recon[w:w + 1])[0],
                                   rtol=1e-4, atol=1e-6)


def test_sensor_names_the_font_lacks_draw_no_warnings(tmp_path, capsys):
    """CJK sensor names: matplotlib's "Glyph ... missing" warnings (one per character and figure) no longer reach
    stderr; the names are in the page's text."""
    import warnings

    from mscred.evaluation import compute_metrics, read_ground_truth, read_scores
    from mscred.report import build_report

    T, names = 300, ["温度", "压力", "流量"]
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.random((T, 3)), columns=names)
    frame.insert(0, "timestamp", np.arange(T))
    frame["label"] = (np.arange(T) // 100 == 1).astype(int)
    frame.to_csv(tmp_path / "data.csv", index=False)
    pd.DataFrame({"timestamp": np.arange(T), "score": rng.random(T), "is_anomaly": (rng.random(T) > 0.9).astype(int),
                  "root_causes": "温度;压力"}).to_csv(tmp_path / "scores.csv", index=False)
    scores = read_scores(tmp_path / "scores.csv")
    truth = read_ground_truth(tmp_path / "data.csv", scores)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_report(tmp_path / "report", scores, truth, compute_metrics(scores, truth))
    assert [str(w.message) for w in caught if "Glyph" in str(w.message) or "layout" in str(w.message)] == []
    assert "温度" in (tmp_path / "report" / "index.html").read_text()


def test_report_draws_the_sensor_scores(evaluated, capsys):
    """score_<sensor> columns (detect --sensor-scores): a heat map of the sensors with the largest scores, largest
    first, its own section; empty cells (rows no window covers) are allowed, text is refused in one line."""
    from mscred.evaluation import read_scores
    from mscred.report import sensor_score_figure

    frame = pd.read_csv(evaluated / "scores.csv")
    rng = np.random.default_rng(2)
    per_sensor = rng.random((len(frame), 25))
    per_sensor[:90] = np.nan
    per_sensor[:, 7] += 5.0   # the largest: drawn first
    for j in range(25):
        frame[f"score_s{j}"] = per_sensor[:, j]
    frame.to_csv(evaluated / "wide.csv", index=False)
    scores = read_scores(evaluated / "wide.csv")
    assert scores.scored_sensors == [f"s{j}" for j in range(25)]
    np.testing.assert_array_equal(scores.sensor_scores, per_sensor)
    from mscred.evaluation import read_ground_truth

    truth = read_ground_truth(evaluated / "data" / "test.csv", scores)
    png, drawn = sensor_score_figure(scores, truth, scores.is_anomaly)
    assert len(drawn) == 20 and drawn[0] == "s7"
    peaks = np.nanmax(per_sensor, axis=0)
    assert set(drawn) == {f"s{j}" for j in np.argsort(-peaks)[:20]}
    out = evaluated / "report"
    assert main(["evaluate", str(evaluated / "wide.csv"), "--labels", str(evaluated / "data" / "test.csv"),
                 "--report", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert 'id="sec-sensor-scores"' in page and "the 20 with the largest first, 5 more not drawn" in page
    assert _images(page)["sensor scores"].startswith(PNG)
    frame["score_s3"] = frame["score_s3"].astype(object)
    frame.loc[200, "score_s3"] = "abc"
    frame.to_csv(evaluated / "bad.csv", index=False)
    code = main(["evaluate", str(evaluated / "bad.csv"), "--labels", str(evaluated / "data" / "test.csv")])
    err = capsys.readouterr().err
    assert code == 2 and "column 'score_s3' row 201: value 'abc' is not a finite number or empty" in err
