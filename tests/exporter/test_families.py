"""The metric model: what a scrape of :class:`PrometheusMetrics` holds, read back with
prometheus_client's own text parser."""

from __future__ import annotations

import math

import pytest

from mindwatch.exporter import METRIC_NAMES, PrometheusMetrics, metric_names


def scrape(metrics: PrometheusMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(metrics.text())
        for sample in family.samples
    }


def labels(**pairs: str) -> frozenset[tuple[str, str]]:
    return frozenset(pairs.items())


def test_a_step_maps_tags_to_metrics_and_ignores_the_others() -> None:
    metrics = PrometheusMetrics(labels={"job": "llama", "team": "nlp"}, clock=lambda: 1010.0)
    run = metrics.run("exp1")
    values = [
        ("train/loss", 2.5),
        ("train/lr", 1e-3),
        ("train/grad_norm", 0.75),
        ("perf/samples_per_s", 640.0),
        ("perf/tokens_per_s", 1e5),
        ("perf/step_time_ms", 250.0),
        ("perf/mfu", 0.41),
        ("layers/grad_norm/w", 9.0),  # not served
        ("train/my_metric", 3.0),  # not served
    ]
    run.observe_step(7, values, 1000.0)
    got = scrape(metrics)
    own = labels(run="exp1", job="llama", team="nlp")
    assert got[("mindwatch_step", own)] == 7
    assert got[("mindwatch_loss", own)] == 2.5
    assert got[("mindwatch_learning_rate", own)] == 1e-3
    assert got[("mindwatch_grad_norm", own)] == 0.75
    assert got[("mindwatch_samples_per_second", own)] == 640
    assert got[("mindwatch_tokens_per_second", own)] == 1e5
    assert got[("mindwatch_step_seconds", own)] == 0.25
    assert got[("mindwatch_mfu_ratio", own)] == 0.41
    assert got[("mindwatch_last_step_timestamp_seconds", own)] == 1000
    assert got[("mindwatch_seconds_since_last_step", own)] == 10
    assert got[("mindwatch_nonfinite_total", own)] == 0
    served = {name for name, _ in got}
    assert served <= set(METRIC_NAMES)
    assert not any("my_metric" in name or "layers" in name for name in served)


def test_spread_eval_alerts_status_and_nonfinite() -> None:
    metrics = PrometheusMetrics()
    run = metrics.run("r")
    run.set_world_size(2)
    run.set_status("running")
    spread = [("ranks/loss_min", 1.0), ("ranks/loss_max", 3.0), ("ranks/loss_mean", 2.0)]
    spread += [("ranks/loss_std", 1.0), ("ranks/loss_argmax", 1.0), ("ranks/x_y_max", 5.0)]
    run.observe_step(3, [("train/loss", math.nan), *spread], 1.0)
    run.observe_step(4, [("train/loss", math.inf), ("ranks/loss_max", math.inf)], 2.0)
    run.observe_eval([("eval/accuracy", 0.9), ("eval/loss", 0.3), ("other", 1.0)])
    run.count_alert("nonfinite", "critical")
    run.count_alert("nonfinite", "critical")
    run.count_alert("spike", "warning")
    run.set_status("finished")
    got = scrape(metrics)
    own = labels(run="r")
    assert got[("mindwatch_loss", own)] == math.inf
    assert got[("mindwatch_nonfinite_total", own)] == 2  # the ranks/ copy is not counted
    assert got[("mindwatch_rank_spread", labels(run="r", metric="loss", stat="max"))] == math.inf
    assert got[("mindwatch_rank_spread", labels(run="r", metric="loss", stat="std"))] == 1
    assert got[("mindwatch_rank_spread", labels(run="r", metric="x_y", stat="max"))] == 5
    assert got[("mindwatch_rank_argmax", labels(run="r", metric="loss"))] == 1
    assert got[("mindwatch_eval", labels(run="r", metric="accuracy"))] == 0.9
    assert got[("mindwatch_eval", labels(run="r", metric="loss"))] == 0.3
    nonfinite = labels(run="r", rule="nonfinite", severity="critical")
    assert got[("mindwatch_alerts_total", nonfinite)] == 2
    assert got[("mindwatch_alerts_total", labels(run="r", rule="spike", severity="warning"))] == 1
    status = {dict(key)["status"]: v for (name, key), v in got.items() if name.endswith("status")}
    assert status == {"running": 0, "finished": 1, "failed": 0, "terminated": 0, "crashed": 0}
    info = [dict(key) for name, key in got if name == "mindwatch_info"]
    assert info[0]["world_size"] == "2"
    assert info[0]["version"]


def test_runs_and_ranks_are_separate_series_and_can_be_forgotten() -> None:
    metrics = PrometheusMetrics(prefix="team_a")
    metrics.run("a").observe_step(1, [("train/loss", 1.0)], 1.0)
    metrics.run("a", rank=1).observe_step(1, [("train/loss", 1.5)], 1.0)
    metrics.run("b").observe_step(9, [("train/loss", 2.0)], 1.0)
    got = scrape(metrics)
    assert got[("team_a_loss", labels(run="a"))] == 1.0
    assert got[("team_a_loss", labels(run="a", rank="1"))] == 1.5
    assert got[("team_a_step", labels(run="b"))] == 9
    assert metrics.names == metric_names("team_a")
    metrics.forget("b")
    assert ("team_a_step", labels(run="b")) not in scrape(metrics)


def test_hardware_and_straggler_values_are_served_with_the_rank_s_node_and_device() -> None:
    """A rank's own series carry node and device_id, the job's reduced ones do not: a
    query joins the rank's series with NPU-Exporter's per-chip series on them."""
    metrics = PrometheusMetrics(labels={"job": "llama"})
    job, rank1 = metrics.run("exp"), metrics.run("exp", rank=1)
    rank1.set_place("trainer-02", 5)
    own = [("hw/npu_temp_c", 61.0), ("hw/rss_mb", 2048.0), ("hw/rss_growth_mb_per_min", 1.5)]
    own += [("straggler/input_wait_ms", 12.5), ("straggler/step_ms", 80.0)]
    rank1.observe_step(10, [("train/loss", 0.5), *own], 1.0)
    reduced = [("hw/npu_temp_c", 61.0), ("ranks/npu_temp_c_max", 61.0)]
    reduced += [("ranks/npu_temp_c_argmax", 1.0), ("ranks/input_wait_ms_argmax", 1.0)]
    job.observe_step(10, [("train/loss", 0.4), *reduced], 1.0)
    got = scrape(metrics)
    place = {"run": "exp", "job": "llama", "rank": "1", "node": "trainer-02", "device_id": "5"}
    assert got[("mindwatch_hardware", labels(**place, metric="npu_temp_c"))] == 61
    assert got[("mindwatch_hardware", labels(**place, metric="rss_mb"))] == 2048
    assert got[("mindwatch_hardware", labels(**place, metric="rss_growth_mb_per_min"))] == 1.5
    assert got[("mindwatch_straggler", labels(**place, metric="input_wait_ms"))] == 12.5
    assert got[("mindwatch_straggler", labels(**place, metric="step_ms"))] == 80
    assert got[("mindwatch_loss", labels(**place))] == 0.5
    info = [dict(key) for name, key in got if name == "mindwatch_info"]
    assert [key["node"] for key in info if key.get("rank") == "1"] == ["trainer-02"]
    job_labels = {"run": "exp", "job": "llama"}
    assert got[("mindwatch_hardware", labels(**job_labels, metric="npu_temp_c"))] == 61
    argmax = labels(**job_labels, metric="input_wait_ms")
    assert got[("mindwatch_rank_argmax", argmax)] == 1
    job_series = [dict(key) for name, key in got if dict(key).get("rank") is None]
    assert job_series
    assert not any("node" in key or "device_id" in key for key in job_series)
    assert {name for name, _ in got} <= set(METRIC_NAMES)


def test_an_unknown_device_is_an_empty_label() -> None:
    """Prometheus stores an empty label as no label: a CPU rank has a node, no device."""
    metrics = PrometheusMetrics()
    series = metrics.run("cpu", rank=0)
    series.set_place("host-a", None)
    series.observe_step(1, [("hw/cpu_percent", 50.0)], 1.0)
    text = metrics.text()
    assert (
        'mindwatch_hardware{device_id="",metric="cpu_percent",node="host-a",rank="0",run="cpu"}'
        in text
    )


def test_a_run_with_no_step_yet_serves_its_status_only() -> None:
    metrics = PrometheusMetrics()
    metrics.run("new").set_status("running")
    got = scrape(metrics)
    assert ("mindwatch_step", labels(run="new")) not in got
    assert got[("mindwatch_run_status", labels(run="new", status="running"))] == 1
    with pytest.raises(ValueError, match="unknown run status"):
        metrics.run("new").set_status("done")


def test_an_evaluation_before_any_training_step_is_served() -> None:
    """An evaluation-only run (Model.eval, or log_eval before the first log_step)."""
    metrics = PrometheusMetrics()
    metrics.run("evalonly").observe_eval([("eval/accuracy", 0.91)])
    got = scrape(metrics)
    assert got[("mindwatch_eval", labels(run="evalonly", metric="accuracy"))] == 0.91
    assert ("mindwatch_step", labels(run="evalonly")) not in got


def test_metric_names_are_the_agreed_ones() -> None:
    assert METRIC_NAMES == (
        "mindwatch_step",
        "mindwatch_loss",
        "mindwatch_learning_rate",
        "mindwatch_grad_norm",
        "mindwatch_samples_per_second",
        "mindwatch_tokens_per_second",
        "mindwatch_step_seconds",
        "mindwatch_mfu_ratio",
        "mindwatch_eval",
        "mindwatch_last_step_timestamp_seconds",
        "mindwatch_seconds_since_last_step",
        "mindwatch_alerts_total",
        "mindwatch_run_status",
        "mindwatch_rank_spread",
        "mindwatch_rank_argmax",
        "mindwatch_hardware",
        "mindwatch_straggler",
        "mindwatch_nonfinite_total",
        "mindwatch_info",
    )
