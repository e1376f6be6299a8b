"""The in-job exporter through ``Monitor`` (no framework): the HTTP server, a port in
use, per-rank serving, and pushes to a real ``prometheus-pushgateway``."""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from mindwatch import Monitor
from tests.ports import free_ports
from tests.prometheus_server import PrometheusServer, Pushgateway, free_port, http_get


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


# Where the process runs, on every series of a rank's own (docs/prometheus.md): this
# host, and no device id outside msrun.
PLACE = {"node": socket.gethostname(), "device_id": os.environ.get("DEVICE_ID", "")}


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, frozenset(labels.items()))]


def own(text: str, name: str, **labels: str) -> float:
    """A series of this process's own run: ``labels`` and its place."""
    return value(text, name, **PLACE, **labels)


def here() -> dict[str, str]:
    """The node and device labels of this process's own series (``DEVICE_ID``: msrun's)."""
    return {"node": socket.gethostname(), "device_id": os.environ.get("DEVICE_ID", "")}


def config(**prometheus: Any) -> dict[str, Any]:
    return {"print_every": 0, "prometheus": prometheus}


def test_the_server_serves_the_steps_and_stops_at_close(tmp_path: Path) -> None:
    port = free_port()
    mon = Monitor(tmp_path / "exp", config(port=port, labels={"team": "nlp"}))
    for step in range(1, 4):
        mon.log_step(step, loss=1.0 / step, lr=0.1, samples=4)
    mon.log_eval(3, accuracy=0.5)
    mon.flush()
    text = http_get(f"http://127.0.0.1:{port}/metrics")
    own = {"run": "exp", "team": "nlp", **here()}  # one process: its node and device
    assert value(text, "mindwatch_step", **own) == 3
    assert value(text, "mindwatch_loss", **own) == pytest.approx(1 / 3)
    assert value(text, "mindwatch_eval", **own, metric="accuracy") == 0.5
    running = value(text, "mindwatch_run_status", **own, status="running")
    assert running == 1
    mon.close()
    with pytest.raises(urllib.error.URLError):
        http_get(f"http://127.0.0.1:{port}/metrics", timeout=1)
    info = json.loads((mon.logdir / "run.json").read_text())
    assert info["prometheus"] == {"url": f"http://127.0.0.1:{port}/metrics"}


def test_linger_lets_prometheus_scrape_the_final_status(
    prometheus_bin: str, tmp_path: Path
) -> None:
    """With linger_secs the server stays up until one more scrape, so Prometheus keeps
    'finished' as the run's last status; without it the last scrape said 'running'."""
    port = free_port()
    target = f"127.0.0.1:{port}"
    with PrometheusServer(prometheus_bin, tmp_path / "prom", [target]) as prom:
        for run, linger in (("quick", 0.0), ("lingering", 30.0)):
            mon = Monitor(tmp_path / run, config(port=port, linger_secs=linger))
            mon.log_step(1, loss=1.0)
            mon.flush()
            prom.wait_for(f'mindwatch_step{{run="{run}"}}')
            mon.close()
        last = 'last_over_time(mindwatch_run_status{{run="{run}",status="{status}"}}[5m])'
        finished = prom.wait_for(last.format(run="lingering", status="finished"))
        assert finished[0][1] == 1
        assert prom.value(last.format(run="lingering", status="running")) == 0
        assert prom.value(last.format(run="quick", status="running")) == 1


def test_a_port_in_use_is_one_warning_and_training_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.WARNING, logger="mindwatch"):
            mon = Monitor(tmp_path / "exp", config(port=port))
            for step in range(1, 50):
                mon.log_step(step, loss=1.0)
            mon.close()
    warnings = [r.getMessage() for r in caplog.records if "Prometheus" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert f"127.0.0.1:{port}" in warnings[0]
    assert "prometheus.port" in warnings[0]
    info = json.loads((mon.logdir / "run.json").read_text())
    assert info["status"] == "finished"
    assert info["last_step"] == 49
    assert info["prometheus"] == {"url": None}


def test_per_rank_without_reduction_serves_a_rank_on_port_plus_rank(tmp_path: Path) -> None:
    port = free_ports(2)  # rank 1 serves on port + 1
    settings = {"port": port, "per_rank": True}
    with Monitor(tmp_path / "exp", config(**settings), rank=1, world_size=2) as mon:
        mon.log_step(5, loss=2.0)
        mon.flush()
        text = http_get(f"http://127.0.0.1:{port + 1}/metrics")
    assert value(text, "mindwatch_loss", run=mon.logdir.name, rank="1", **here()) == 2.0
    # Rank 0 without reduction: the run it serves holds its own values, so they carry
    # its node and device too.
    with Monitor(tmp_path / "zero", config(port=port), rank=0, world_size=2) as mon:
        mon.log_step(5, loss=3.0)
        mon.flush()
        text = http_get(f"http://127.0.0.1:{port}/metrics")
    assert value(text, "mindwatch_loss", run=mon.logdir.name, **here()) == 3.0
    # Without per_rank, rank 1 serves nothing.
    with Monitor(tmp_path / "other", config(port=port), rank=1, world_size=2) as mon:
        mon.log_step(5, loss=2.0)
        mon.flush()
        assert mon._session.outputs.exporter is None


def gateway_text(gateway: Pushgateway) -> str:
    return "\n".join(line for line in gateway.metrics().splitlines() if "mindwatch_" in line)


def test_a_short_job_pushes_as_it_goes_and_its_final_values(
    pushgateway_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Pushgateway(pushgateway_bin, tmp_path / "gw") as gateway:
        monkeypatch.setenv("MW_TEST_PUSHGATEWAY", gateway.url)
        push = {"url_env": "MW_TEST_PUSHGATEWAY", "every_secs": 0.2}
        mon = Monitor(tmp_path / "short", config(labels={"job": "ci-push"}, push=push))
        mon.log_step(1, loss=3.0)
        mon.flush()
        deadline = time.monotonic() + 30
        while "mindwatch_step" not in gateway_text(gateway) and time.monotonic() < deadline:
            time.sleep(0.1)
        during = gateway_text(gateway)
        for step in range(2, 8):
            mon.log_step(step, loss=1.0 / step, lr=0.01)
        mon.log_step(8, loss=math.nan)
        mon.close()
        final = gateway_text(gateway)
        (group,) = gateway.groups()
    grouping = {"job": "ci-push", "run": "short"}
    assert own(during, "mindwatch_step", instance="", **grouping) == 1
    assert own(final, "mindwatch_step", instance="", **grouping) == 8
    assert math.isnan(own(final, "mindwatch_loss", instance="", **grouping))
    assert own(final, "mindwatch_learning_rate", instance="", **grouping) == 0.01
    status = {"instance": "", **grouping}
    assert own(final, "mindwatch_run_status", status="finished", **status) == 1
    assert own(final, "mindwatch_run_status", status="running", **status) == 0
    nonfinite = {"rule": "nonfinite", "severity": "critical", "instance": "", **grouping}
    assert own(final, "mindwatch_alerts_total", **nonfinite) == 1
    assert group["labels"] == grouping
    info = json.loads((mon.logdir / "run.json").read_text())
    assert info["prometheus"]["pushes"] >= 2
    assert info["prometheus"]["push_failures"] == 0


def test_a_failed_run_pushes_failed(pushgateway_bin: str, tmp_path: Path) -> None:
    with Pushgateway(pushgateway_bin, tmp_path / "gw") as gateway:
        push = {"url": gateway.url, "every_secs": None}
        mon = Monitor(tmp_path / "bad", config(push=push))
        mon.log_step(1, loss=1.0)
        mon.abort(RuntimeError("out of memory"))
        final = gateway_text(gateway)
    labels = {"job": "mindwatch", "run": "bad", "instance": ""}
    assert own(final, "mindwatch_run_status", status="failed", **labels) == 1


def test_a_failing_push_is_one_warning_and_training_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    push = {"url": nobody, "every_secs": 0.05, "timeout": 1.0}
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        mon = Monitor(tmp_path / "exp", config(push=push))
        for step in range(1, 20):
            mon.log_step(step, loss=1.0)
            time.sleep(0.01)
        mon.close()
    warnings = [r.getMessage() for r in caplog.records if "push" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert nobody in warnings[0]
    info = json.loads((mon.logdir / "run.json").read_text())
    assert info["status"] == "finished"
    assert info["prometheus"]["push_failures"] >= 1
    assert info["prometheus"]["pushes"] == 0


def test_a_gateway_behind_basic_auth_gets_the_credentials_of_the_url(
    pushgateway_bin: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``http://user:password@host`` is basic auth (urllib alone takes it for part of the
    host name), and neither a wrong password nor an address without a scheme ever shows
    in a warning."""
    with Pushgateway(pushgateway_bin, tmp_path / "gw", basic_auth=("alice", "s3cr:et")) as gw:
        host = gw.url.split("://", 1)[1]
        good = {"url": f"http://alice:s3cr%3Aet@{host}", "every_secs": None}
        mon = Monitor(tmp_path / "auth", config(push=good))
        mon.log_step(1, loss=2.5)
        mon.close()
        assert (
            own(gateway_text(gw), "mindwatch_loss", job="mindwatch", run="auth", instance="") == 2.5
        )
        info = json.loads((mon.logdir / "run.json").read_text())
        assert info["prometheus"] == {"pushes": 1, "push_failures": 0}
        for url in (f"http://alice:wr0ng-pw@{host}", f"alice:wr0ng-pw@{host}"):
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="mindwatch"):
                mon = Monitor(tmp_path / "wrong", config(push={"url": url, "every_secs": None}))
                mon.log_step(1, loss=1.0)
                mon.close()
            text = "\n".join(r.getMessage() for r in caplog.records)
            assert "pushing the Prometheus metrics to http://***@127.0.0.1" in text, text
            assert "wr0ng-pw" not in text, text
            assert "alice" not in text, text
            assert "wr0ng-pw" not in (mon.logdir / "run.json").read_text()


def test_a_rank_port_past_65535_is_the_same_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    """per_rank on port 65534 with 4 ranks: rank 3 would serve on 65537. bind() raises
    OverflowError there, not OSError; it must warn like a port in use, not raise."""
    from mindwatch.exporter.families import PrometheusMetrics
    from mindwatch.exporter.serving import MetricsServer

    server = MetricsServer(PrometheusMetrics(), host="127.0.0.1", port=65537)
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        assert server.start() is False
    assert "cannot listen on 127.0.0.1:65537" in caplog.text
    assert "prometheus.port" in caplog.text


def test_close_does_not_wait_out_a_push_that_hangs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A gateway that accepts and never answers: close(1 s) gives up on the push under
    way (30 s timeout) instead of waiting for it before the last one, and says so."""
    from mindwatch.exporter.families import PrometheusMetrics
    from mindwatch.exporter.serving import Pusher

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        pusher = Pusher(
            PrometheusMetrics(prefix="mindwatch", labels={}),
            url=url,
            job="mindwatch",
            grouping={"run": "slow"},
            every_secs=0.05,
            timeout=30.0,
        )
        silent.settimeout(60)
        with caplog.at_level(logging.WARNING, logger="mindwatch"):
            pusher.start()
            # A periodic push is under way, waiting for an answer: its connection is
            # here (waited for, not slept for: a busy machine starts threads late).
            connection, _ = silent.accept()
            with connection:
                pusher.close(timeout=1.0)
                # Counted while the push under way still hangs (the connection is open
                # and its timeout 30 s): once the connection closes, that push fails
                # too, on the pusher's thread, at a moment a busy machine decides.
                pushed, failed = pusher.pushed, pusher.failed
    assert pushed == 0
    assert failed == 1
    assert "the previous push is still under way" in caplog.text


def test_simulated_ranks_per_rank_serve_the_job_and_their_own(tmp_path: Path) -> None:
    """Two ranks reducing through mindwatch.testing.LocalGroup (the msrun path without
    MindSpore): rank 0 serves the job's values and its own, rank 1 its own on port + 1."""
    from tests.aggregate.test_multirank import local_loss, run_ranks

    port = free_ports(2)  # rank 1 serves on port + 1
    scraped: dict[int, str] = {}

    def body(mon: Monitor, rank: int) -> None:
        with mon:
            for step in range(1, 11):  # two intervals of 5: reduced before close()
                mon.log_step(step, loss=local_loss(rank, step), lr=0.1, samples=8)
            mon.flush()
            scraped[rank] = http_get(f"http://127.0.0.1:{port + rank}/metrics")

    config = {"aggregate_every": 5, "prometheus": {"port": port, "per_rank": True}}
    run_ranks(2, tmp_path, body, config=config)
    run = tmp_path.name
    job, mine = scraped[0], scraped[1]
    losses = [local_loss(0, 10), local_loss(1, 10)]
    assert value(job, "mindwatch_step", run=run) == 10
    assert value(job, "mindwatch_loss", run=run) == pytest.approx(sum(losses) / 2, rel=1e-6)
    assert value(job, "mindwatch_rank_argmax", run=run, metric="loss") == 1
    high = value(job, "mindwatch_rank_spread", run=run, metric="loss", stat="max")
    assert high == pytest.approx(losses[1], rel=1e-6)
    # a rank's own series carry its node and device; the job's reduced ones neither
    rank0, rank1 = {"rank": "0", **here()}, {"rank": "1", **here()}
    assert value(job, "mindwatch_loss", run=run, **rank0) == pytest.approx(losses[0], rel=1e-6)
    assert value(mine, "mindwatch_loss", run=run, **rank1) == pytest.approx(losses[1], rel=1e-6)
    assert ("mindwatch_loss", frozenset({"run": run}.items())) not in samples(mine)


def test_simulated_ranks_serve_their_hardware_under_their_node_and_device(
    tmp_path: Path,
) -> None:
    """The sampler's values of each rank, as the rank's own series (with node and
    device_id, the labels a query joins NPU-Exporter's series on) and as the job's
    spread with the hottest rank: real sampler threads, a probe per simulated rank."""
    from prometheus_client.parser import text_string_to_metric_families

    from tests.aggregate.test_multirank import run_ranks

    port = free_ports(2)
    scraped: dict[int, str] = {}

    def body(mon: Monitor, rank: int) -> None:
        assert mon.telemetry is not None
        mon.telemetry.add_probe("card", lambda: {"hw/npu_temp_c": 40.0 + 25.0 * rank}, "test")
        with mon:
            for step in range(1, 121):  # as tests/hardware/test_telemetry.py: 1.2 s or more
                mon.log_step(step, loss=1.0, samples=8)
                time.sleep(0.01)
            mon.flush()
            scraped[rank] = http_get(f"http://127.0.0.1:{port + rank}/metrics")

    config = {
        "aggregate_every": 20,
        "hardware": {"period_s": 0.5},
        "prometheus": {"port": port, "per_rank": True},
    }
    run_ranks(2, tmp_path, body, config=config)
    run = tmp_path.name
    job, mine = scraped[0], scraped[1]
    hot = {"run": run, "metric": "npu_temp_c"}
    assert value(job, "mindwatch_hardware", **hot) == 65  # the job's: the hottest rank
    assert value(job, "mindwatch_rank_argmax", **hot) == 1
    assert value(job, "mindwatch_rank_spread", **hot, stat="min") == 40
    assert value(job, "mindwatch_hardware", **hot, rank="0", **here()) == 40
    assert value(mine, "mindwatch_hardware", **hot, rank="1", **here()) == 65
    assert value(mine, "mindwatch_hardware", run=run, metric="rss_mb", rank="1", **here()) > 0
    # The job's reduced series are no one device's: no node, no device_id.
    job_series = [
        sample.labels
        for family in text_string_to_metric_families(job)
        for sample in family.samples
        if "rank" not in sample.labels
    ]
    assert job_series
    assert not any("node" in one or "device_id" in one for one in job_series)


def test_summarywriter_scalars_reach_the_exporter_as_monitor_values(tmp_path: Path) -> None:
    """torch's add_scalar("loss", ...) is the exporter's mindwatch_loss, as log_step's."""
    from mindwatch import SummaryWriter

    port = free_port()
    with SummaryWriter(tmp_path / "exp", config=config(port=port)) as w:
        for step in range(1, 4):
            w.add_scalar("loss", 1.0 / step, step)
            w.add_scalar("lr", 0.1, step)
        w.add_scalar("loss", 0.125, 4)  # step 4 begins: step 3 is handed on
        w.flush()
        text = http_get(f"http://127.0.0.1:{port}/metrics")
    own = {"run": "exp", **here()}
    assert value(text, "mindwatch_step", **own) == 4
    assert value(text, "mindwatch_loss", **own) == 0.125
    assert value(text, "mindwatch_learning_rate", **own) == pytest.approx(0.1)
