"""Sampler: its own thread, probes isolated from each other, RSS growth statistics."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from mindwatch.hardware.growth import MAX_PAIRWISE_POINTS, MIN_SAMPLES, growth_stats
from mindwatch.hardware.host import HostProbe
from mindwatch.hardware.sampler import HardwareSample, Sampler

GROWTH = "hw/rss_growth_mb_per_min"
RISING = "hw/rss_rising_share"
LIMIT_S = 60.0  # for what must happen at all; reaching it is the failure, not slowness


def wait_for(
    sampler: Sampler, done: Callable[[HardwareSample], bool], limit_s: float = 20.0
) -> HardwareSample:
    """The first sample for which ``done`` holds (a generous limit, never asserted on)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        sample = sampler.latest()
        if sample is not None and done(sample):
            return sample
        time.sleep(0.01)
    raise AssertionError(f"no such sample within {limit_s} s; latest: {sampler.latest()}")


@pytest.fixture
def counter() -> Callable[[], dict[str, float]]:
    numbers = itertools.count(1)

    def good() -> dict[str, float]:
        return {"hw/good": float(next(numbers))}

    return good


def test_probes_run_on_the_samplers_thread_not_the_callers(
    counter: Callable[[], dict[str, float]],
) -> None:
    threads: list[str] = []

    def where() -> dict[str, float]:
        threads.append(threading.current_thread().name)
        return {}

    with Sampler({"good": counter, "where": where}, 0.02) as sampler:
        sample = wait_for(sampler, lambda s: s.seq >= 3)
    assert threading.current_thread().name not in threads
    assert sample.values["hw/good"] >= 3
    assert sample.wall_time == pytest.approx(time.time(), abs=60)
    with pytest.raises(TypeError):
        sample.values["hw/good"] = 0.0  # type: ignore[index]


def test_a_failing_and_a_slow_probe_cost_one_warning_each(
    counter: Callable[[], dict[str, float]], caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    def broken() -> dict[str, float]:
        raise RuntimeError("no device")

    def slow() -> dict[str, float]:  # like npu-smi hanging, against a shorter period
        release.wait()
        return {"hw/slow": 1.0}

    with caplog.at_level(logging.WARNING, logger="mindwatch.hardware.sampler"):
        sampler = Sampler([counter, broken, slow], 0.05)
        try:
            first = wait_for(sampler, lambda s: s.seq >= 3)
            later = wait_for(sampler, lambda s: s.seq >= first.seq + 10)
            closed_while_stuck = returns_while_blocked(sampler.close, release)
        finally:
            release.set()
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "'broken' failed" in m]) == 1, messages
    assert len([m for m in messages if "'slow' took longer" in m]) == 1, messages
    assert "no device" in "\n".join(messages)
    assert later.values["hw/good"] > first.values["hw/good"]
    assert "hw/slow" not in later.values
    assert sampler.warnings["error:broken"] >= 10
    assert sampler.warnings["slow:slow"] >= 1
    assert closed_while_stuck  # close() did not wait for the slow probe's call


def test_close_returns_promptly_with_a_probe_stuck_in_a_call() -> None:
    stuck, called = threading.Event(), threading.Event()

    def hung() -> dict[str, float]:
        called.set()
        stuck.wait()
        return {}

    sampler = Sampler({"hung": hung}, 0.05)
    try:
        assert called.wait(LIMIT_S)
        assert returns_while_blocked(lambda: sampler.close(timeout=0.5), stuck)
    finally:
        stuck.set()


def returns_while_blocked(call: Callable[[], None], blocker: threading.Event) -> bool:
    """Whether ``call`` returns while a probe is still blocked on ``blocker`` (never set
    here). Not a time limit: a close() that waited for the probe would wait forever, and
    the generous limit only turns that hang into a failure."""
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(LIMIT_S)
    return not thread.is_alive() and not blocker.is_set()


def test_keys_without_the_prefix_get_it_and_non_numbers_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def device() -> dict[str, float]:
        return {"device_mem_allocated_mb": 12, "hw/x": "n/a"}  # type: ignore[dict-item]

    with caplog.at_level(logging.WARNING), Sampler([device], 0.02) as sampler:
        sample = wait_for(sampler, lambda s: s.seq >= 3)
    assert dict(sample.values) == {"hw/device_mem_allocated_mb": 12.0}
    assert len([r for r in caplog.records if "not a number" in r.getMessage()]) == 1


def test_the_sample_is_replaced_whole_not_changed(
    counter: Callable[[], dict[str, float]],
) -> None:
    with Sampler([counter], 0.02) as sampler:
        first = wait_for(sampler, lambda s: s.seq >= 1)
        seen = first.values["hw/good"]
        wait_for(sampler, lambda s: s.seq > first.seq + 2)
    assert first.values["hw/good"] == seen


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_a_period_that_is_no_duration_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="period_s"):
        Sampler([], bad)


# -- growth statistics on synthetic series -------------------------------------------------


def test_a_steady_growth_has_its_slope_and_rises_every_step() -> None:
    times = [5.0 * i for i in range(20)]
    stats = growth_stats(times, [100 + 0.5 * t for t in times])  # 0.5 MB/s
    assert stats is not None
    assert stats.per_minute == pytest.approx(30.0)
    assert stats.rising_share == 1.0


def test_a_flat_series_has_no_growth() -> None:
    stats = growth_stats([float(i) for i in range(10)], [500.0] * 10)
    assert stats == (0.0, 0.0)


def test_noise_around_a_level_has_a_small_slope_and_rises_about_half_the_time() -> None:
    rng = np.random.default_rng(7)
    times = [5.0 * i for i in range(60)]
    stats = growth_stats(times, list(800 + rng.normal(0, 20, len(times))))
    assert stats is not None
    assert abs(stats.per_minute) < 5  # vs a noise of 20 MB on each sample
    assert 0.3 < stats.rising_share < 0.75


def test_one_jump_does_not_make_a_flat_series_grow() -> None:
    values = [300.0] * 30
    values[12] = 5000.0  # one spike: a least-squares line would tilt
    stats = growth_stats([float(i) for i in range(30)], values)
    assert stats is not None
    assert stats.per_minute == 0.0


def test_fewer_than_six_samples_give_nothing() -> None:
    assert MIN_SAMPLES == 6
    assert growth_stats([0.0, 1, 2, 3, 4], [1.0, 2, 3, 4, 5]) is None
    assert growth_stats([0.0, 1, 2, 3, 4, 5], [1.0, 2, 3, 4, 5, 6]) is not None


def test_a_long_window_is_thinned_and_keeps_its_slope() -> None:
    times = [0.1 * i for i in range(5 * MAX_PAIRWISE_POINTS)]
    stats = growth_stats(times, [2.0 * t for t in times])
    assert stats is not None
    assert stats.per_minute == pytest.approx(120.0)


def test_the_sampler_gives_growth_only_once_the_window_holds_six_samples() -> None:
    rss = itertools.count(100)
    seen: list[HardwareSample] = []

    def fake_rss() -> dict[str, float]:
        return {"hw/rss_mb": float(next(rss))}

    with Sampler([fake_rss], 0.02, growth_window_s=30) as sampler:
        while len(seen) < 8:
            sample = wait_for(sampler, lambda s: not seen or s.seq > seen[-1].seq)
            seen.append(sample)
    for sample in seen:
        assert (GROWTH in sample.values) == (sample.seq >= MIN_SAMPLES), sample
    assert seen[-1].values[GROWTH] > 0
    assert seen[-1].values[RISING] == 1.0


def test_a_process_holding_more_and_more_arrays_shows_a_leak(tmp_path: Path) -> None:
    held: list[np.ndarray[Any, Any]] = []
    with Sampler([HostProbe(tmp_path)], 0.1, growth_window_s=1.5) as sampler:
        first = wait_for(sampler, lambda s: s.seq >= 1)
        deadline = time.monotonic() + 20  # a bound on memory, never asserted on
        sample = first
        while time.monotonic() < deadline and len(held) < 800:
            held.append(np.ones(1 << 17))  # 1 MB, written: resident
            time.sleep(0.01)
            latest = sampler.latest()
            if latest is not None and latest.seq >= first.seq + 12 and GROWTH in latest.values:
                sample = latest
                break
    assert GROWTH in sample.values, sample
    assert sample.values[GROWTH] > 0
    assert sample.values[RISING] >= 0.8


# -- promises of the module docs that only show over several ticks -------------------------


def test_a_late_result_is_dropped_not_put_in_a_later_sample() -> None:
    # "late" blocks on its first call; "gate" lets it return *while* tick 3 is
    # collecting, then holds tick 4 back, so the test reads tick 3's sample at leisure.
    release, returned, proceed = threading.Event(), threading.Event(), threading.Event()
    late_calls = itertools.count(1)
    gate_calls = itertools.count(1)

    def late() -> dict[str, float]:
        n = next(late_calls)
        if n == 1:
            release.wait(20)
            returned.set()
        return {"hw/late": float(n)}

    def gate() -> dict[str, float]:
        n = next(gate_calls)
        if n == 3:
            release.set()
            returned.wait(20)
            time.sleep(0.2)  # the late outcome is handed over on its own thread
        elif n > 3:
            proceed.wait(20)
        return {"hw/gate": float(min(n, 4))}

    with Sampler({"late": late, "gate": gate}, 0.02, budget_s=1.5) as sampler:
        third = wait_for(sampler, lambda s: s.values.get("hw/gate") == 3.0)
        assert "hw/late" not in third.values  # from tick 1, not tick 3's moment
        proceed.set()
        after = wait_for(sampler, lambda s: "hw/late" in s.values)
    assert after.values["hw/late"] == 2.0  # started afresh once it had returned


def test_growth_covers_only_the_last_window() -> None:
    # RSS rises for 10 samples, then stays flat: once the rise has left the window the
    # rising share is 0 (a history kept whole would keep some rising steps).
    calls = itertools.count(0)

    def fake_rss() -> dict[str, float]:
        return {"hw/rss_mb": 100.0 + 10.0 * min(next(calls), 10)}

    with Sampler([fake_rss], 0.02, growth_window_s=0.3) as sampler:
        rising = wait_for(sampler, lambda s: s.values.get(RISING, 0.0) > 0.0)
        flat = wait_for(sampler, lambda s: s.seq > 40 and s.values.get(RISING) == 0.0)
    assert rising.values[GROWTH] > 0
    assert flat.values[GROWTH] == 0.0


def test_probes_with_the_same_name_are_both_read() -> None:
    def one() -> dict[str, float]:
        return {"hw/one": 1.0}

    def two() -> dict[str, float]:
        return {"hw/two": 2.0}

    one.name = two.name = "card"  # type: ignore[attr-defined]
    with Sampler([one, two], 0.02) as sampler:
        sample = wait_for(sampler, lambda s: s.seq >= 3, limit_s=10)
    assert dict(sample.values) == {"hw/one": 1.0, "hw/two": 2.0}


# -- what the sampler says, and what it keeps, when something is wrong ---------------------


def test_a_probe_that_is_not_callable_is_refused_naming_its_type() -> None:
    with pytest.raises(TypeError, match=r"^probe 'card' must be callable, got int$"):
        Sampler({"card": 3}, 1.0)  # type: ignore[dict-item]


def test_a_probe_without_a_name_is_named_by_its_type(caplog: pytest.LogCaptureFixture) -> None:
    class Reader:  # a callable instance: no ``name``, no ``__name__``
        def __call__(self) -> dict[str, float]:
            raise RuntimeError("no device")

    warnings = caplog.at_level(logging.WARNING, logger="mindwatch.hardware.sampler")
    with warnings, Sampler([Reader()], 0.02) as sampler:
        wait_for(sampler, lambda s: s.seq >= 3)
    assert "error:Reader" in sampler.warnings
    assert [r.getMessage() for r in caplog.records] == [
        "mindwatch: hardware probe 'Reader' failed (RuntimeError: no device); it is "
        "skipped for this sample and tried again at the next"
    ]


def test_a_probe_that_returns_no_mapping_is_named_and_the_others_go_on(
    counter: Callable[[], dict[str, float]], caplog: pytest.LogCaptureFixture
) -> None:
    def listing() -> dict[str, float]:
        return [1.0, 2.0]  # type: ignore[return-value]

    warnings = caplog.at_level(logging.WARNING, logger="mindwatch.hardware.sampler")
    with warnings, Sampler({"good": counter, "listing": listing}, 0.02) as sampler:
        sample = wait_for(sampler, lambda s: s.seq >= 3)
    assert set(sample.values) == {"hw/good"}
    assert [r.getMessage() for r in caplog.records] == [
        "mindwatch: hardware probe 'listing' returned list, not a {tag: number} mapping"
    ]


def test_a_failing_sample_is_warned_once_and_sampling_goes_on(
    counter: Callable[[], dict[str, float]],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mindwatch.hardware.sampler as sampler_module

    failures = itertools.count(1)

    def broken_stats(times: Any, values: Any) -> Any:
        if next(failures) <= 4:  # a bug in the sampler's own work, for four ticks
            raise ZeroDivisionError("boom")
        return growth_stats(times, values)

    monkeypatch.setattr(sampler_module, "growth_stats", broken_stats)
    warnings = caplog.at_level(logging.WARNING, logger="mindwatch.hardware.sampler")
    with warnings, Sampler([counter], 0.02) as sampler:
        sample = wait_for(sampler, lambda s: s.seq >= 6)
    assert sample.values["hw/good"] >= 6  # the probe was read at every tick
    assert sampler.warnings["sampler"] == 4
    assert [r.getMessage() for r in caplog.records] == [
        "mindwatch: hardware sampling failed: ZeroDivisionError: boom"
    ]


def test_the_sampler_and_its_probes_run_on_daemon_threads(
    counter: Callable[[], dict[str, float]],
) -> None:
    # A program that never closes its sampler still exits.
    before = set(threading.enumerate())
    with Sampler({"good": counter}, 0.02) as sampler:
        wait_for(sampler, lambda s: s.seq >= 2)
        ours = [t for t in set(threading.enumerate()) - before if t.name.startswith("mindwatch-hw")]
        assert sorted(t.name for t in ours) == ["mindwatch-hw", "mindwatch-hw-good"]
        assert all(t.daemon for t in ours)


def test_an_added_probe_joins_the_others_and_one_of_the_same_name_replaces_it(
    counter: Callable[[], dict[str, float]],
) -> None:
    def device() -> dict[str, float]:
        return {"hw/device_mb": 1.0}

    def moved() -> dict[str, float]:
        return {"hw/device_mb": 2.0}

    with Sampler({"good": counter}, 0.02) as sampler:
        sampler.add_probe("device", device)
        both = wait_for(sampler, lambda s: s.values.get("hw/device_mb") == 1.0)
        sampler.add_probe("device", moved)  # the adapter's device changed
        after = wait_for(sampler, lambda s: s.values.get("hw/device_mb") == 2.0)
        later = wait_for(sampler, lambda s: s.seq >= after.seq + 3)
    assert set(both.values) == {"hw/good", "hw/device_mb"}
    assert set(after.values) == {"hw/good", "hw/device_mb"}
    assert later.values["hw/device_mb"] == 2.0  # the replaced probe is read no more


def test_the_rising_share_counts_small_rises_too() -> None:
    # RSS moving by half a MB per sample rises at every step; a share that counted only
    # rises above 1 MB would read this leak as flat.
    times = [10.0 * i for i in range(12)]
    stats = growth_stats(times, [400.0 + 0.5 * i for i in range(12)])
    assert stats is not None
    assert stats.rising_share == 1.0
    assert stats.per_minute == pytest.approx(3.0)
    falling = growth_stats(times, [400.0 - 0.5 * i for i in range(12)])
    assert falling is not None
    assert falling.rising_share == 0.0


def test_a_long_window_is_thinned_evenly_over_all_of_it() -> None:
    # y = t**2: the slope between two samples is t_i + t_j, and the median of those sums
    # over the whole window [0, T] is T. Points from only part of the window would give
    # another median (from [0.2 T, T]: 1.2 T).
    n = 5 * MAX_PAIRWISE_POINTS
    times = [0.1 * i for i in range(n)]
    stats = growth_stats(times, [t * t for t in times])
    assert stats is not None
    assert stats.per_minute == pytest.approx(60.0 * times[-1], rel=0.01)


def test_a_value_float_cannot_hold_is_dropped_and_the_rest_of_the_sample_kept(
    counter: Callable[[], dict[str, float]], caplog: pytest.LogCaptureFixture
) -> None:
    # float() of an int beyond its range raises OverflowError, and a value's own
    # __float__ may raise anything; either used to end the whole tick (every probe's
    # values lost, at every tick), not just the one value.
    class Unreadable:
        def __float__(self) -> float:
            raise RuntimeError("device lost")

    def odd() -> dict[str, float]:
        return {"hw/huge": 10**400, "hw/kept": 2.0}  # type: ignore[dict-item]

    def device() -> dict[str, float]:
        return {"hw/gone": Unreadable(), "hw/mem": 3.0}  # type: ignore[dict-item]

    warnings = caplog.at_level(logging.WARNING, logger="mindwatch.hardware.sampler")
    with warnings, Sampler({"good": counter, "odd": odd, "device": device}, 0.02) as sampler:
        sample = wait_for(sampler, lambda s: s.seq >= 3)
    assert set(sample.values) == {"hw/good", "hw/kept", "hw/mem"}
    assert (sample.values["hw/kept"], sample.values["hw/mem"]) == (2.0, 3.0)
    assert "sampler" not in sampler.warnings
    messages = sorted(r.getMessage() for r in caplog.records)
    assert len(messages) == 2, messages
    assert messages[0].startswith("mindwatch: hardware probe 'device' gave hw/gone = <")
    assert messages[1] == (
        f"mindwatch: hardware probe 'odd' gave hw/huge = {10**400!r}, not a number; it is left out"
    )
