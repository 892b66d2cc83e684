"""Drift-detection measures (spec checks C7, C8, C9) and their bad input."""

from __future__ import annotations

import pytest

from torchstream.evaluate.measures import (
    detected_change_rate,
    detection_delays,
    detection_measures,
    false_discovery_rate,
    mean_detection_delay,
    mean_time_between_false_alarms,
    mean_time_ratio,
    missed_detection_rate,
    observation_index,
    observation_indices,
    step_index,
)

KNOWN = [100, 300]
FOUND = [110, 150, 250, 420]
KW = {"window": 50, "n_total": 500}


def test_hand_example_closed_windows_c7() -> None:
    m = detection_measures(KNOWN, FOUND, **KW)
    assert m["detected_change_rate"] == 0.5
    assert m["missed_detection_rate"] == 0.5
    assert m["false_discovery_rate"] == 0.5  # 110 and 150 lie in [100, 150]
    assert detection_delays(KNOWN, FOUND, n_total=500) == [10, 120]
    assert m["mean_detection_delay"] == 65.0
    assert m["mean_time_between_false_alarms"] == 170.0  # false alarms 250 and 420
    assert m["mean_time_ratio"] == pytest.approx(170 / 65 * 0.5)
    assert round(m["mean_time_ratio"], 4) == 1.3077


def test_hand_example_half_open_windows_c7() -> None:
    kw = {**KW, "convention": "half_open"}
    # [100, 150) leaves 150 out: it becomes a false alarm
    assert detected_change_rate(KNOWN, FOUND, **kw) == 0.5
    assert false_discovery_rate(KNOWN, FOUND, **kw) == 0.75
    assert mean_time_between_false_alarms(KNOWN, FOUND, **kw) == 135.0  # (100 + 170) / 2
    assert mean_detection_delay(KNOWN, FOUND, **kw) == 65.0  # the delay has no window
    assert mean_time_ratio(KNOWN, FOUND, **kw) == pytest.approx(135 / 65 * 0.5)


def test_half_open_window_stops_at_next_drift() -> None:
    # 140 lies in the closed windows of both drifts (counted once in FDR), but float's half-open
    # window of drift 100 ends at the next drift, 130.
    assert detected_change_rate([100, 130], [140], window=50, n_total=500) == 1.0
    assert false_discovery_rate([100, 130], [140], window=50, n_total=500) == 0.0
    assert (
        detected_change_rate([100, 130], [140], window=50, n_total=500, convention="half_open")
        == 0.5
    )


def test_gradual_drift_window_runs_from_end() -> None:
    kw = {"window": 10, "n_total": 1000}
    assert detected_change_rate([(100, 200)], [205], **kw) == 1.0
    assert detected_change_rate([(100, 200)], [211], **kw) == 0.0
    assert mean_detection_delay([(100, 200)], [205], **kw) == 105.0  # from the start


def test_detector_alarming_every_step_c8() -> None:
    for n in (500, 5000):
        every = list(range(n))
        assert detected_change_rate(KNOWN, every, window=50, n_total=n) == 1.0
        # 51 + 51 detections lie in the two closed windows
        assert false_discovery_rate(KNOWN, every, window=50, n_total=n) == pytest.approx(
            1 - 102 / n
        )
        assert mean_detection_delay(KNOWN, every, window=50, n_total=n) == 0.0
        assert mean_time_ratio(KNOWN, every, window=50, n_total=n) == float("inf")
    assert false_discovery_rate(KNOWN, list(range(5000)), window=50, n_total=5000) > 0.97


def test_detector_never_alarming_c8() -> None:
    m = detection_measures(KNOWN, [], **KW)
    assert m["detected_change_rate"] == 0.0
    assert m["missed_detection_rate"] == 1.0
    assert m["false_discovery_rate"] == 0.0
    assert m["mean_time_between_false_alarms"] == 500.0  # fallback: the stream length
    assert m["mean_detection_delay"] == 200.0  # (300 - 100 + 500 - 300) / 2
    assert m["mean_time_ratio"] == 0.0


def test_single_false_alarm_falls_back_to_length() -> None:
    assert mean_time_between_false_alarms(KNOWN, [250], **KW) == 500.0


def test_unit_conversion_c9() -> None:
    assert observation_index(40, n_pretrain=100, batch_size=10) == 500  # not 400
    assert observation_indices([0, 40], n_pretrain=100, batch_size=10) == [100, 500]
    assert step_index(500, n_pretrain=100, batch_size=10) == 40
    assert step_index(509, n_pretrain=100, batch_size=10) == 40
    found = observation_indices([40], n_pretrain=100, batch_size=10)
    assert mean_detection_delay([500], found, window=50, n_total=1000) == 0.0
    with pytest.raises(ValueError, match="pre-training"):
        step_index(99, n_pretrain=100, batch_size=10)


def test_warm_up_detections_are_left_out_everywhere() -> None:
    # float would divide by both detections (FDR 0.5); here the warm-up alarm is not counted
    assert false_discovery_rate(KNOWN, [5, 110], **KW, n_init_tolerance=50) == 0.0
    assert false_discovery_rate(KNOWN, [5, 110], **KW) == 0.5


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: detected_change_rate(KNOWN, FOUND, window=0, n_total=500), "window"),
        (lambda: detected_change_rate(KNOWN, FOUND, window=-5, n_total=500), "window"),
        (lambda: detected_change_rate([100, 600], FOUND, **KW), r"known_drifts\[1\]"),
        (lambda: detected_change_rate([-1], FOUND, **KW), r"known_drifts\[0\]"),
        (lambda: detected_change_rate([300, 100], FOUND, **KW), "sorted"),
        (lambda: detected_change_rate([(200, 100)], FOUND, **KW), "ends before"),
        (lambda: detected_change_rate([], FOUND, **KW), "empty"),
        (lambda: detected_change_rate(KNOWN, [10, 700], **KW), r"detections\[1\]"),
        (lambda: detected_change_rate(KNOWN, [10, 10], **KW), "more than once"),
        (lambda: detected_change_rate(KNOWN, FOUND, window=50, n_total=0), "n_total"),
        (lambda: detected_change_rate(KNOWN, FOUND, **KW, convention="open"), "convention"),
        (lambda: detected_change_rate(KNOWN, [1.5], **KW), "detections"),
        (lambda: detected_change_rate(100, FOUND, **KW), "known_drifts"),
        (lambda: missed_detection_rate(KNOWN, FOUND, window=50), "n_total"),
        (lambda: observation_index(-1, 100, 10), "step"),
        (lambda: observation_index(3, 100, 0), "batch_size"),
    ],
)
def test_bad_input(call, match) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        call()
