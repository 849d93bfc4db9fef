"""The demo's closing table: one simulated incident under LiteLLM alone and the outlier profile (with and
without a prober). Deterministic (seeded arrivals, the pure engine): the orderings are the claims the table makes."""

from __future__ import annotations

from coolant.sim.incident import compare


def test_the_profile_spares_the_dead_primary_and_the_prober_brings_it_back() -> None:
    alone, no_prober, probed = compare()
    assert alone.decider == "LiteLLM alone" and probed.probes > 0 and no_prober.probes == 0
    # every request is answered (the fallback serves) under all three; the profile tries the dead primary less
    assert alone.failed == no_prober.failed == probed.failed == 0
    assert probed.primary_attempts_in_outage <= no_prober.primary_attempts_in_outage
    assert no_prober.primary_attempts_in_outage < alone.primary_attempts_in_outage
    assert probed.primary_attempts_in_outage <= 4  # the streak that cools it (X12: 3), and one in flight at most
    # probes release the primary as it heals: the first request after the heal is the primary's, as alone
    # (its completion time differs by the latency drawn)
    assert probed.back_on_primary_s is not None and alone.back_on_primary_s is not None
    assert probed.back_on_primary_s <= alone.back_on_primary_s + 1.0


def test_the_ordering_holds_for_other_arrivals() -> None:
    for seed in (2, 3, 4):
        alone, no_prober, probed = compare(seed=seed)
        assert probed.primary_attempts_in_outage <= no_prober.primary_attempts_in_outage
        assert no_prober.primary_attempts_in_outage < alone.primary_attempts_in_outage, seed
