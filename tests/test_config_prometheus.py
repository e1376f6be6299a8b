"""The ``prometheus`` config section: off by default, and each mistake named with its fix."""

from __future__ import annotations

from typing import Any

import pytest

from mindwatch.config import ConfigError, MonitorConfig, PrometheusSettings
from mindwatch.config.prometheus import RESERVED_LABELS
from mindwatch.exporter import push_url
from mindwatch.exporter.families import OWN_LABELS


def prometheus(**fields: Any) -> PrometheusSettings:
    settings = MonitorConfig.from_dict({"prometheus": fields}).prometheus
    assert settings is not None
    return settings


def refused(**fields: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        MonitorConfig.from_dict({"prometheus": fields})
    return str(caught.value)


def test_off_by_default_and_loopback_when_on() -> None:
    assert MonitorConfig().prometheus is None
    settings = prometheus(port=9410)
    assert (settings.host, settings.prefix, settings.labels) == ("127.0.0.1", "mindwatch", {})
    assert settings.per_rank is False
    assert settings.push is None


def test_label_names_are_checked_with_a_fix() -> None:
    message = refused(port=9410, labels={"team-name": "nlp"})
    assert "prometheus.labels" in message
    assert "'team-name' is not a Prometheus label name" in message
    assert "rename it, e.g. 'team_name'" in message
    assert "e.g. '_1st'" in refused(port=9410, labels={"1st": "x"})
    assert "not starting with a digit or '__'" in refused(port=9410, labels={"__x": "y"})
    reserved = refused(port=9410, labels={"run": "a"})
    assert "'run' is a label mindwatch or Prometheus sets itself" in reserved
    assert prometheus(port=1, labels={"job": "llama", "team_2": "nlp"}).labels["team_2"] == "nlp"


def test_reserved_labels_cover_the_exporters_own() -> None:
    assert set(OWN_LABELS) <= set(RESERVED_LABELS)


def test_prefix_port_and_where_the_metrics_go() -> None:
    assert "is not a Prometheus metric name" in refused(port=9410, prefix="my-prefix")
    assert prometheus(port=9410, prefix="team_a:mw").prefix == "team_a:mw"
    assert "less than or equal to 65535" in refused(port=70000)
    assert "needs port" in refused(host="0.0.0.0")
    assert "did you mean 'port'?" in refused(prot=9410)
    assert prometheus(port=0).rank_port(3) == 0  # any free port, on every rank
    assert prometheus(port=9410).rank_port(0) == 9410
    assert prometheus(port=9410, per_rank=True).rank_port(3) == 9413
    assert prometheus(push={"url": "http://gw:9091"}).rank_port(0) is None


def test_push_settings() -> None:
    assert "push needs url" in refused(push={})
    message = refused(push={"url_env": "http://gw:9091"})
    assert "must be the NAME of an environment variable" in message
    assert "gw:9091" not in message  # a URL is not repeated in errors
    settings = prometheus(push={"url": "http://gw:9091"})
    assert settings.push is not None
    assert settings.push.every_secs == 30.0
    assert settings.push_job() == "mindwatch"
    assert prometheus(labels={"job": "llama"}, push={"url": "u"}).push_job() == "llama"
    assert prometheus(push={"url": "u", "job": "nightly"}).push_job() == "nightly"
    conflict = refused(labels={"job": "llama"}, push={"url": "u", "job": "nightly"})
    assert "differs from the constant label job 'llama'" in conflict
    assert "greater than 0" in refused(push={"url": "u", "every_secs": 0})
    assert prometheus(push={"url": "u", "every_secs": None}).push is not None


def test_the_push_address_comes_from_the_environment_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MW_GW", raising=False)
    assert push_url("http://config:9091", "MW_GW") == "http://config:9091"
    assert push_url(None, "MW_GW") is None
    monkeypatch.setenv("MW_GW", "http://env:9091")
    assert push_url("http://config:9091", "MW_GW") == "http://env:9091"
    assert push_url("http://config:9091", None) == "http://config:9091"
