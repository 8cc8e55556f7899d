"""Audit of the HTML report as a reader meets it: names that are not plain words, events the page mislabelled or
left out, a model whose sensors come in another order or as an array, and the cost of long series."""
import re

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="the report needs matplotlib (extra 'report')")
matplotlib.use("Agg")

from mscred import report  # noqa: E402
from mscred.cli.main import main  # noqa: E402
from mscred.errors import InputError  # noqa: E402
from mscred.evaluation import compute_metrics, read_ground_truth, read_scores  # noqa: E402


from test_report_figures import figures  # noqa: E402,F401 (the fixture, shared)


def _files(tmp_path, names, labels, flags, causes=None):
    """test.csv (sensors + label) and scores.csv; ``causes`` per row (default: the first 3 names on flagged rows)."""
    T = len(labels)
    rng = np.random.default_rng(0)
    data = pd.DataFrame(rng.standard_normal((T, len(names))), columns=names)
    data.insert(0, "timestamp", np.arange(T))
    data["label"] = labels
    data.to_csv(tmp_path / "test.csv", index=False)
    causes = [";".join(names[:3]) if f else "" for f in flags] if causes is None else causes
    pd.DataFrame({"timestamp": np.arange(T), "score": rng.random(T) + flags, "is_anomaly": flags,
                  "root_causes": causes}).to_csv(tmp_path / "scores.csv", index=False)
    return tmp_path / "scores.csv", tmp_path / "test.csv"


def _report(tmp_path, names, labels, flags, causes=None, pred=None):
    scores_path, labels_path = _files(tmp_path, names, labels, flags, causes)
    scores = read_scores(scores_path)
    truth = read_ground_truth(labels_path, scores)
    report.build_report(tmp_path / "report", scores, truth, compute_metrics(scores, truth, pred=pred), pred=pred)
    return (tmp_path / "report" / "index.html").read_text(encoding="utf-8")


def _one_event(T=300, a=100, b=130):
    labels = np.zeros(T, int)
    labels[a:b] = 1
    return labels


def test_sensor_names_are_text_not_tex(tmp_path):
    """'$\\foo$' as a sensor name was parsed as mathtext when the figure was saved: ParseFatalException, exit 1."""
    labels = _one_event()
    page = _report(tmp_path, ["$\\foo$", "$\\alpha$", "c"], labels, labels.copy())
    assert "$\\foo$" in page


def test_sensor_names_keep_their_dollars_in_figures(tmp_path, figures):
    labels = _one_event()
    _report(tmp_path, ["$\\alpha$", "b", "c"], labels, labels.copy())
    label = next(ax.yaxis.label for ax in figures[1].axes if ax.get_ylabel() == "$\\alpha$")
    assert not label.get_parse_math()                       # drawn as written, not as a Greek letter
    # the rc setting is the report's own: the caller's matplotlib is left as it was
    assert matplotlib.rcParams["text.parse_math"] is True


def test_long_sensor_names_are_shortened_in_figures_only(tmp_path, figures):
    """A 300-character name as a y label (kept whole by bbox_inches="tight") squeezed the plots into a sliver."""
    long = "reactor_" + "x" * 280 + "_temperature"
    labels = _one_event()
    page = _report(tmp_path, [long, "b", "c"], labels, labels.copy())
    shown = next(ax.get_ylabel() for ax in figures[1].axes if ax.get_ylabel().startswith("reactor_"))
    assert len(shown) <= 32 and shown.startswith("reactor_") and shown.endswith("temperature")
    assert long in page   # the page's text keeps the full name


def test_found_event_without_root_causes_is_not_called_undetected(tmp_path, figures):
    """Flagged rows in an event but no root_causes written: 'not detected' beside 'events found (1/1)'."""
    labels = _one_event()
    page = _report(tmp_path, ["a", "b", "c"], labels, labels.copy(), causes=[""] * len(labels))
    assert "events found (1/1)" in page
    assert "<li>event 1: detected, no root causes written on its rows</li>" in page
    assert "not detected" not in figures[-1].axes[0].get_title()


def test_refit_threshold_ranks_causes_as_recall_does(tmp_path):
    """Under a refit threshold the page ranked the causes of the refit rows, recall@3 those of is_anomaly's rows."""
    labels = _one_event()
    flags = labels.copy()
    causes = ["c;b;a" if 100 <= t < 110 else "a;b;c" if f else "" for t, f in enumerate(flags)]
    pred = np.zeros(len(labels), np.int8)
    pred[100:110] = 1                                       # a higher refit threshold: the first 10 rows only
    page = _report(tmp_path, ["a", "b", "c"], labels, flags, causes=causes, pred=pred)
    assert "<li>event 1: a, b, c</li>" in page


def test_zoom_says_which_events_it_leaves_out(tmp_path):
    labels = np.zeros(700, int)
    for start in (100, 220, 340, 460, 580):
        labels[start:start + 10] = 1
    page = _report(tmp_path, ["a", "b", "c"], labels, labels.copy())
    assert "Zoomed: the first 4 of 5 true events." in page


def test_events_outside_the_scores_are_noted_in_the_page(tmp_path):
    """evaluate prints a note under its table for events it left out; the page said nothing."""
    labels = _one_event()
    scores_path, _ = _files(tmp_path, ["a", "b", "c"], labels, labels.copy())
    pd.DataFrame({"start": [100, 5000], "end": [130, 5010], "root_causes": ["a;b;c", "a;b;c"]}).to_csv(
        tmp_path / "anomalies.csv", index=False)
    assert main(["evaluate", str(scores_path), "--labels", str(tmp_path / "anomalies.csv"),
                 "--report", str(tmp_path / "r")]) == 0
    assert "1 event(s) of the anomalies table lie outside the scored timestamps" in \
        (tmp_path / "r" / "index.html").read_text()


def test_intervals_are_one_collection_and_the_last_row_shows(tmp_path):
    """One axvspan per flagged run: 30 s of a 31 s report at 100,000 rows (each zoom panel drew every run);
    a flag on the last row ran from x[-1] to x[-1] and was not drawn."""
    import matplotlib.pyplot as plt

    T = 4000
    pred = np.zeros(T, np.int8)
    pred[1:-1:4] = 1                                        # ~1,000 one-row runs
    pred[-1] = 1
    labels = _one_event(T)
    scores_path, labels_path = _files(tmp_path, ["a", "b", "c"], labels, pred)
    scores = read_scores(scores_path)
    truth = read_ground_truth(labels_path, scores)
    fig, ax = plt.subplots()
    x = np.arange(T, dtype=np.float64)
    ax.plot(x, x)
    report._mark(ax, truth, pred, x)
    assert len(ax.patches) == 0 and len(ax.collections) == 2
    last = ax.collections[0].get_paths()[-1].vertices[:, 0]
    assert last.min() == T - 1 and last.max() > T - 1
    plt.close(fig)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny model on 5 sensors, its test data and scores."""
    from mscred.data.synthetic import write_synthetic
    from mscred.detector import MSCRED

    root = tmp_path_factory.mktemp("model")
    data = write_synthetic(root / "data", n_sensors=5, length=1600, seed=4)
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False).fit(data.train)
    model.save(root / "model")
    model.detect(data.test.drop(columns=["label"])).to_csv(root / "scores.csv", index=False)
    return root, model, data.test


def test_residuals_name_the_model_order_when_columns_are_reordered(trained, tmp_path, figures):
    """The residuals come in the model's sensor order (``_aligned``): they were labelled in the data's order."""
    root, model, test = trained
    reordered = test[["timestamp"] + model.sensors_[::-1] + ["label"]]
    reordered.to_csv(tmp_path / "test.csv", index=False)
    assert main(["evaluate", str(root / "scores.csv"), "--labels", str(tmp_path / "test.csv"),
                 "--model", str(root / "model"), "--report", str(tmp_path / "r")]) == 0
    panel = next(ax for fig in figures for ax in fig.axes if ax.images)
    assert [t.get_text() for t in panel.get_yticklabels()] == model.sensors_


def test_array_data_takes_the_model_sensors(trained, tmp_path, capsys):
    """--data x.npy with --model: an array is the training sensors in order (as at detect); it was refused as
    'missing sensor(s) ...; unknown sensor(s) sensor_0'."""
    root, model, test = trained
    np.save(tmp_path / "x.npy", test[model.sensors_].to_numpy())
    labels = root / "data" / "test.csv"
    assert main(["evaluate", str(root / "scores.csv"), "--labels", str(labels), "--data", str(tmp_path / "x.npy"),
                 "--model", str(root / "model"), "--report", str(tmp_path / "r")]) == 0
    np.save(tmp_path / "y.npy", test[model.sensors_[:4]].to_numpy())
    assert main(["evaluate", str(root / "scores.csv"), "--labels", str(labels), "--data", str(tmp_path / "y.npy"),
                 "--model", str(root / "model"), "--report", str(tmp_path / "r2")]) == 2
    assert "an array of 4 column(s)" in capsys.readouterr().err
    assert not (tmp_path / "r2").exists()


def test_other_sensors_than_the_model_are_refused_before_any_figure(trained, tmp_path, figures):
    root, model, test = trained
    test.rename(columns={model.sensors_[0]: "other"}).to_csv(tmp_path / "test.csv", index=False)
    scores = read_scores(root / "scores.csv")
    truth = read_ground_truth(tmp_path / "test.csv", scores, anomalies="none")
    with pytest.raises(InputError, match=re.escape("the model's sensors differ")):
        report.build_report(tmp_path / "r", scores, truth, compute_metrics(scores, truth),
                            model_dir=root / "model")
    assert figures == [] and not (tmp_path / "r").exists()


def test_the_header_names_the_anomalies_table_the_events_came_from(tmp_path):
    """The header named only the labels file, while the anomalies.csv beside it set every event and cause shown."""
    labels = _one_event()
    (tmp_path / "anomalies.csv").write_text("start,end,root_causes\n100,130,b\n")
    page = _report(tmp_path, ["a", "b", "c"], labels, labels.copy())
    assert f"(events and root causes: {tmp_path / 'anomalies.csv'})" in page
    (tmp_path / "anomalies.csv").unlink()   # events from the label column: nothing more to name
    assert "events and root causes:" not in _report(tmp_path, ["a", "b", "c"], labels, labels.copy())
