"""How `make bench`'s sharing section states the thesis's latency goal (bench/sharing_bench.py)."""
from bench.sharing_bench import ON_TIME, latency_ratio


def test_both_on_time_is_no_ratio():
    assert latency_ratio(0.0, 0.0) == (1.0, "both on time (neither overloaded)")
    assert latency_ratio(None, ON_TIME / 2)[1] == "both on time (neither overloaded)"


def test_a_mode_later_than_its_baseline_is_higher_not_lower():
    ratio, shown = latency_ratio(0.0, 2.0)
    assert ratio == 0.0 and shown.startswith("higher") and "lower" not in shown
    ratio, shown = latency_ratio(1.0, 4.0)
    assert ratio == 0.25 and shown == "4.0x higher"


def test_a_mode_on_time_beside_a_late_baseline_is_lower():
    assert latency_ratio(5.44, 0.0) == (float("inf"), "lower (0.0 against 5.44 slides late)")
    assert latency_ratio(5.0, 0.5) == (10.0, "10.0x lower")
