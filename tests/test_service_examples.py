"""The files of examples/service/ say what the commands do: the systemd unit's command line is one `mscred watch`
accepts (parsed by the command's own options), and every metric the alert rules name is one the watches,
fleet-detect or detect write."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from mscred.cli.watch import watch
from mscred.cli.prometheus import _DETECT_FAMILIES, _FLEET_DETECT_FAMILIES, _WATCH_FAMILIES

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "service"


def test_the_units_command_line_is_a_watch():
    unit = (EXAMPLES / "mscred-watch@.service").read_text()
    line = re.search(r"^ExecStart=(.*?)(?<!\\)$", unit.replace("\\\n", " "), re.M).group(1)
    words = shlex.split(line.replace("%i", "line3"))
    assert Path(words[0]).name == "mscred" and words[1] == "watch"
    context = watch.make_context("watch", words[2:], resilient_parsing=True)
    assert context.params["metrics"] == "/var/lib/node_exporter/textfile/mscred_line3.prom"
    assert context.params["resume"] and context.params["data"] == "/var/log/line3"
    assert "RestartPreventExitStatus=2" in unit and "SuccessExitStatus=143" in unit


def test_the_alert_rules_name_metrics_the_watches_write():
    rules = (EXAMPLES / "mscred_alerts.yml").read_text()
    named = set(re.findall(r"\bmscred_[a-z_]+", re.sub(r"#.*", "", rules)))
    written = {family for family, _, _ in _WATCH_FAMILIES + _FLEET_DETECT_FAMILIES + _DETECT_FAMILIES}
    assert named and named <= written, named - written
    assert named >= {"mscred_anomalous", "mscred_watch_last_poll_timestamp_seconds", "mscred_stopped"}
