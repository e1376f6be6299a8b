"""The test helper itself: a real Prometheus scrapes a real prometheus_client server."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindwatch.exporter import PrometheusMetrics
from tests.prometheus_server import PrometheusServer, Pushgateway, free_port

pytestmark = pytest.mark.slow


def test_prometheus_scrapes_a_registry_and_answers_promql(
    prometheus_bin: str, tmp_path: Path
) -> None:
    from prometheus_client import start_http_server

    metrics = PrometheusMetrics(labels={"job": "llama"})
    metrics.run("exp").observe_step(12, [("train/loss", 0.5)], 1.0)
    port = free_port()
    server, thread = start_http_server(port, "127.0.0.1", metrics.registry)
    try:
        with PrometheusServer(prometheus_bin, tmp_path, [f"127.0.0.1:{port}"]) as prom:
            result = prom.wait_for('mindwatch_step{run="exp"}')
            assert result[0][1] == 12
            assert result[0][0]["job"] == "llama"  # honor_labels: the job's own label
            assert prom.value('mindwatch_loss{run="exp"}') == 0.5
            assert prom.scraped_up(f"127.0.0.1:{port}")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert prom.process is not None
    assert prom.process.returncode == 0


def test_the_pushgateway_keeps_what_a_registry_pushed(pushgateway_bin: str, tmp_path: Path) -> None:
    from prometheus_client import push_to_gateway

    metrics = PrometheusMetrics()
    metrics.run("short").observe_step(3, [("train/loss", 0.25)], 1.0)
    with Pushgateway(pushgateway_bin, tmp_path) as gateway:
        push_to_gateway(gateway.url, job="mindwatch", registry=metrics.registry)
        assert 'mindwatch_step{instance="",job="mindwatch",run="short"} 3' in gateway.metrics()
        (group,) = gateway.groups()
        assert group["labels"] == {"job": "mindwatch"}
        assert "mindwatch_loss" in group
