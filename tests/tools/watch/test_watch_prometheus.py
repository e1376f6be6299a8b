"""``mindwatch watch ROOT --prometheus HOST:PORT``: runs written by other tools (and a
crashed mindwatch run) reach a real Prometheus server with the values their event files
hold; a taken port is exit 2 naming the option; Ctrl-C stops serving."""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mindwatch.events.writer import EventFileWriter
from mindwatch.run.rank_file import write_rank_file
from mindwatch.tools.watch.prometheus import parse_address, series_name
from tests.deploy import test_grafana_dashboard as dashboard
from tests.prometheus_server import PrometheusServer, free_port, http_get
from tests.tbread import scalars

SRC = str(Path(__file__).resolve().parents[3] / "src")


def test_addresses() -> None:
    assert parse_address("127.0.0.1:9400") == ("127.0.0.1", 9400)
    assert parse_address("[::1]:9400") == ("::1", 9400)
    assert parse_address("9400") == ("127.0.0.1", 9400)
    assert parse_address(":9400") == ("127.0.0.1", 9400)
    for bad in ("host", "host:0", "host:70000", "host:x", ""):
        with pytest.raises(ValueError, match="is not HOST:PORT"):
            parse_address(bad)


def test_series_names_split_a_ranks_folder_into_run_and_rank() -> None:
    assert series_name("exp", "runs") == ("exp", None)
    assert series_name(".", "runs") == ("runs", None)
    assert series_name("team/exp/rank_3", "runs") == ("team/exp", 3)
    assert series_name("rank_1", "job") == ("job", 1)  # ROOT is the job's folder


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": SRC + (os.pathsep + path if path else "")}


@contextmanager
def watching(root: Path, port: int, *extra: str) -> Iterator[subprocess.Popen[str]]:
    """``mindwatch watch ROOT --prometheus 127.0.0.1:PORT`` until the block ends (Ctrl-C)."""
    command = [sys.executable, "-m", "mindwatch", "watch", str(root), "--interval", "0.3"]
    process = subprocess.Popen(
        [*command, "--prometheus", f"127.0.0.1:{port}", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # said once the port is bound
        assert f"serving Prometheus metrics at http://127.0.0.1:{port}/metrics" in line, line
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)


def _tensorboardx_run(folder: Path, steps: int) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step in range(1, steps + 1):
        writer.add_scalar("train/loss", 3.0 / step, step)
        writer.add_scalar("train/lr", 0.001 * step, step)
        writer.add_scalar("my/own_metric", 42.0, step)  # no Prometheus metric of its own
    writer.close()


def _own_writer_run(folder: Path, steps: int, *, spread: bool = False) -> None:
    """mindwatch's own event writer, no Monitor: no run.json (``spread``: with the
    ``ranks/`` tags of a job's reduced values)."""
    folder.mkdir(parents=True, exist_ok=True)
    with EventFileWriter(folder) as writer:
        for step in range(1, steps + 1):
            writer.add_scalar("train/loss", 1.0 + 1.0 / step, step)
            writer.add_scalar("perf/samples_per_s", 100.0 + step, step)
            if spread:
                for stat, value in (("min", 10.0), ("max", 12.5), ("mean", 11.0), ("argmax", 1)):
                    writer.add_scalar(f"ranks/step_time_ms_{stat}", value, step)


_KILLED_MONITOR = textwrap.dedent(
    """
    import os, signal, sys, time
    import mindwatch
    mon = mindwatch.Monitor(sys.argv[1], {"print_every": 0, "flush_secs": 0.1})
    for step in range(1, 21):
        mon.log_step(step, loss=1.0 / step)
    mon.flush()
    os.kill(os.getpid(), signal.SIGKILL)  # no close(): run.json still says running
    """
)


def _last(events: dict[str, list[tuple[int, float]]], tag: str) -> tuple[int, float]:
    return events[tag][-1]


@pytest.mark.slow
def test_runs_of_other_tools_and_a_crashed_run_reach_prometheus(
    tmp_path: Path, prometheus_bin: str
) -> None:
    root = tmp_path / "runs"
    _tensorboardx_run(root / "tbx", 30)
    _own_writer_run(root / "job" / "rank_1", 12)  # a rank's own folder, inside job/
    hardware = {"node": "node-1", "device_id": 5, "sources": {"device": "Ascend"}}
    write_rank_file(root / "job" / "rank_1", rank=1, hardware=hardware)
    _own_writer_run(root / "job", 25, spread=True)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_MONITOR, str(root / "crashed")], env=_env(), timeout=120
    )
    assert killed.returncode == -signal.SIGKILL
    port = free_port()
    prom_dir = tmp_path / "prom"
    with (
        watching(root, port),
        PrometheusServer(prometheus_bin, prom_dir, [f"127.0.0.1:{port}"]) as prom,
    ):
        prom.wait_for('mindwatch_step{run="crashed"}')
        for run, tags in (("tbx", ("train/loss", "train/lr")), ("job", ("train/loss",))):
            events = scalars(root / run)
            step, loss = _last(events, "train/loss")
            assert prom.value(f'mindwatch_step{{run="{run}", rank=""}}') == step
            assert prom.value(f'mindwatch_loss{{run="{run}", rank=""}}') == loss
            if "train/lr" in tags:
                assert (
                    prom.value(f'mindwatch_learning_rate{{run="{run}"}}')
                    == _last(events, "train/lr")[1]
                )
        rank_events = scalars(root / "job" / "rank_1")
        assert prom.value('mindwatch_step{run="job", rank="1"}') == 12
        # The rank's place, as the in-job exporter labels it (a join with NPU-Exporter);
        # the job's reduced values have none.
        assert prom.value('mindwatch_step{run="job", rank="1", node="node-1", device_id="5"}') == 12
        assert prom.query('mindwatch_step{run="job", rank="", node!=""}') == []
        assert (
            prom.value('mindwatch_loss{run="job", rank="1"}') == _last(rank_events, "train/loss")[1]
        )
        assert prom.value('mindwatch_samples_per_second{run="job", rank=""}') == 125.0
        # No run.json: no status; a mindwatch run killed on this host: crashed.
        assert prom.query('mindwatch_run_status{run=~"tbx|job"}') == []
        status = prom.query('mindwatch_run_status{run="crashed"} == 1')
        assert [labels["status"] for labels, _ in status] == ["crashed"]
        assert prom.value('mindwatch_step{run="crashed"}') == 20
        # Tags without a metric of their own are not served under some other name.
        names = {labels["__name__"] for labels, _ in prom.query('{run="tbx"}')}
        assert names == {
            "mindwatch_step",
            "mindwatch_loss",
            "mindwatch_learning_rate",
            "mindwatch_last_step_timestamp_seconds",
            "mindwatch_seconds_since_last_step",
            "mindwatch_nonfinite_total",
            "mindwatch_info",
        }
        age = prom.value('mindwatch_seconds_since_last_step{run="tbx"}')
        assert age is not None
        assert 0 <= age < 600
        assert prom.value(
            'mindwatch_rank_spread{run="job", metric="step_time_ms", stat="max"}'
        ) == (12.5)
        assert prom.value('mindwatch_rank_argmax{run="job", metric="step_time_ms"}') == 1

        # Every query of the shipped Grafana dashboard is valid PromQL, and the panels
        # whose metrics these runs have show data.
        with_data = ("loss", "learning_rate", "samples_per_second", "rank_spread", "rank_argmax")
        for expr in dashboard.queries(dashboard.load()):
            promql = (
                expr.replace("$job", ".*")
                .replace('run=~"$run"', 'run=~".*"')
                .replace("$run", "job")
                .replace("$metric", "step_time_ms")
                .replace("$__rate_interval", "1m")
            )
            result = prom.query(promql)  # an invalid query raises
            if any(f"mindwatch_{name}{{" in expr for name in with_data):
                assert result, promql


@pytest.mark.slow
def test_a_taken_port_is_exit_2_naming_the_option_and_ctrl_c_stops_serving(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    _own_writer_run(root / "exp", 3)
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        done = subprocess.run(
            [sys.executable, "-m", "mindwatch", "watch", str(root), "--prometheus",
             f"127.0.0.1:{port}"],
            capture_output=True, text=True, env=_env(), timeout=120,
        )  # fmt: skip
    assert done.returncode == 2
    assert f"--prometheus 127.0.0.1:{port}: cannot serve there (Address already in use)" in (
        done.stderr
    )
    once = subprocess.run(
        [sys.executable, "-m", "mindwatch", "watch", str(root), "--once", "--prometheus",
         str(port)],
        capture_output=True, text=True, env=_env(), timeout=120,
    )  # fmt: skip
    assert once.returncode == 2
    assert "drop --once" in once.stderr

    with watching(root, port) as process:
        deadline = time.monotonic() + 60  # served from the first poll on
        url = f"http://127.0.0.1:{port}/metrics"
        while 'mindwatch_step{run="exp"} 3.0' not in http_get(url):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0  # stopped cleanly: no traceback, no alert
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read()
    with socket.socket() as again:  # nothing listens there any more (Linux refuses a
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # bind next to a listener
        again.bind(("127.0.0.1", port))


def test_a_nan_in_a_run_is_counted_and_served_as_nan(tmp_path: Path) -> None:
    from mindwatch.tools.watch import Watcher, WatchExporter

    root = tmp_path / "runs"
    folder = root / "exp"
    folder.mkdir(parents=True)
    exporter = WatchExporter(root)
    watcher = Watcher(root, observer=exporter)
    with EventFileWriter(folder) as writer:
        for step in range(1, 11):
            writer.add_scalar("train/loss", math.nan if step == 7 else 1.0, step)
            writer.add_scalar("eval/accuracy", 0.5 + step / 100, step)
    alerts = watcher.poll(now=time.time())
    assert [(a.rule, a.step) for a in alerts] == [("nonfinite", 7)]
    text = exporter.metrics.text()
    assert 'mindwatch_alerts_total{rule="nonfinite",run="exp",severity="critical"} 1.0' in text
    assert 'mindwatch_nonfinite_total{run="exp"} 1.0' in text
    assert 'mindwatch_eval{metric="accuracy",run="exp"} 0.6' in text
    assert 'mindwatch_loss{run="exp"} 1.0' in text
    # A restarted watch (a new exporter, the reader's offsets from the state) serves the
    # runs' last values before anything new is written.
    state = tmp_path / "state.json"
    first = Watcher(root, state_path=state)
    first.poll()
    first.save()
    restarted = WatchExporter(root)
    watcher = Watcher(root, state_path=state, observer=restarted)
    assert watcher.poll() == []
    assert 'mindwatch_step{run="exp"} 10.0' in restarted.metrics.text()


def test_a_restarted_watch_serves_a_resumed_runs_last_step_not_its_largest(
    tmp_path: Path,
) -> None:
    """Session 1 reached step 100; the resumed session 2 wrote steps 50-60. A restarted
    watch serves step 60 with session 2's loss, as the live read did."""
    from mindwatch.tools.watch import Watcher, WatchExporter

    root = tmp_path / "runs"
    folder = root / "exp"
    with EventFileWriter(folder) as writer:
        for step in range(1, 101):
            writer.add_scalar("train/loss", 1.0, step)
    with EventFileWriter(folder, purge_step=50) as writer:
        for step in range(50, 61):
            writer.add_scalar("train/loss", 9.0, step)
    state = tmp_path / "state.json"
    first = Watcher(root, state_path=state)
    first.poll()
    first.save()
    restarted = WatchExporter(root)
    Watcher(root, state_path=state, observer=restarted).poll()
    text = restarted.metrics.text()
    assert 'mindwatch_step{run="exp"} 60.0' in text, text
    assert 'mindwatch_loss{run="exp"} 9.0' in text, text
