"""The value model of the unbounded number classes: spellings, interval masses, class rules.

Each check enumerates what the closed forms sum: the spellings of an interval tile it, a
class's rule keeps a mass its normaliser names, and the whole is one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from nslm.data.numbers import can_be
from nslm.micro.number_spellings import (
    CAP,
    EXPONENTS,
    MAX_DECIMALS,
    Precision,
    class_rule,
    parse,
    round_strings,
    spell,
)
from nslm.micro.open_values import log_kept_mass, spelling_grid
from nslm.micro.value_density import LogMixture, log_gaussian_interval


@given(st.floats(-30, 30), st.floats(1e-6, 30))
def test_a_gaussian_interval_matches_the_cdf_difference(za: float, width: float) -> None:
    zb = za + width
    # the reference from whichever tail keeps its own difference precise
    exact = norm.sf(za) - norm.sf(zb) if za > 0 else norm.cdf(zb) - norm.cdf(za)
    got = log_gaussian_interval(np.array(za), np.array(zb))
    if exact > 1e-300:
        # log Φ differs by ~1e-14 at |z| ≈ 16: a width of 1e-6 keeps ~8 digits
        assert np.exp(got) == pytest.approx(exact, rel=1e-7, abs=1e-300)
    assert got <= 0


def test_a_tiny_interval_far_in_a_tail_keeps_a_finite_log() -> None:
    got = log_gaussian_interval(np.array(9.0), np.array(9.0 + 1e-9))
    assert np.isfinite(got)
    assert got == pytest.approx(np.log(1e-9 * norm.pdf(9.0)), rel=1e-6)


@given(st.text(alphabet="0123456789,.", min_size=1, max_size=12))
def test_a_parsed_spelling_spells_back_to_itself(token: str) -> None:
    sp = parse(token)
    if sp is not None:
        assert spell(sp.value, sp.decimals, sp.comma) == token
        assert len(sp.exponents) >= 1


def test_round_strings_are_every_round_shaped_spelling_up_to_four_digits() -> None:
    listed = {s for s in round_strings() if float(s.replace(",", "")) < 10_000}
    brute = {
        spell(float(x), 0, comma)
        for x in range(10_000)
        for comma in (False, True)
        if (x >= 1000 or not comma) and _is_round(x)
    }
    assert listed == brute


def _is_round(x: float) -> bool:
    digits = str(int(x))
    return x >= 10 and digits.endswith("0") and len(digits.rstrip("0")) <= 2


def narrow_density() -> LogMixture:
    """Log-values around 30 and 700: all but ~1e-12 of the mass lies below 10,000."""
    return LogMixture(np.array([0.6, 0.4]), np.array([1.5, 2.85]), np.array([0.2, 0.15]))


def coarse_precision() -> Precision:
    """Rounding steps 0.1 … 100 only, so every spelling below 10,000 can be listed."""
    log_e = np.full(len(EXPONENTS), -np.inf)
    for e, p in {-1: 0.2, 0: 0.4, 1: 0.3, 2: 0.1}.items():
        log_e[e + MAX_DECIMALS] = np.log(p)
    return Precision(log_e, np.log(np.array([0.3, 0.7])))


def every_spelling_below(limit: int, decimals: int) -> list[str]:
    """Every canonical spelling of a value below ``limit`` with at most ``decimals``."""
    out = []
    for d in range(decimals + 1):
        for k in range(limit * 10**d):
            x = k / 10**d
            out += [spell(x, d, comma) for comma in (False, True) if comma is False or x >= 1000]
    return out


def test_the_spellings_are_one_distribution() -> None:
    """No class rule: Σ over every spelling (its rounding steps summed) = 1."""
    density, precision = narrow_density(), coarse_precision()
    spellings = [parse(s) for s in every_spelling_below(10_000, 1)]
    total = np.exp(spelling_grid(spellings, np.zeros((1, 1)), density, precision)).sum()
    assert total == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("cls", ["round", "other", "decimal", "range"])
def test_a_class_rule_keeps_the_mass_its_normaliser_names(cls: str) -> None:
    """Enumerate every spelling below 10,000 that the class keeps: their total equals the
    closed-form normaliser Z_c."""
    density, precision = narrow_density(), coarse_precision()
    kept = [parse(s) for s in every_spelling_below(10_000, 1) if can_be(cls, s)]
    total = np.exp(spelling_grid(kept, np.zeros((1, 1)), density, precision)).sum()
    rule, listed = class_rule(cls)
    log_z = log_kept_mass(rule, precision, [parse(s) for s in listed], np.zeros((1, 1)), density)
    assert total == pytest.approx(np.exp(log_z[0]), rel=1e-7)


def test_a_spelling_sums_over_the_steps_that_write_it() -> None:
    """ "2,000" is 2,000 to the unit, to the ten, the hundred or the thousand."""
    sp = parse("2,000")
    assert list(sp.exponents) == [0, 1, 2, 3]
    assert list(parse("2,010").exponents) == [0, 1]
    assert list(parse("2.50").exponents) == [-2]
    assert list(parse("0").exponents) == list(range(15))  # below half of any step


def test_precision_is_a_distribution() -> None:
    p = Precision.fit(["1", "2.5", "3.25", "12,000", "12000", "7"])
    assert np.exp(p.log_exponent).sum() == pytest.approx(1.0)
    assert np.exp(p.log_comma).sum() == pytest.approx(1.0)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0.5, 6.0), min_size=3, max_size=40))
def test_a_fitted_mixture_puts_all_its_mass_somewhere(t: list[float]) -> None:
    density = LogMixture.fit(np.array(t))
    assert np.exp(density.log_below(CAP, np.zeros(1)))[0] <= 1.0 + 1e-12
    assert density.weights.sum() == pytest.approx(1.0)
    assert (density.sigmas >= 0.02 - 1e-12).all()


def test_a_previous_quantity_of_another_class_is_a_reference_where_its_magnitude_fits():
    from nslm.micro.history import Context
    from nslm.micro.open_values import log_refs

    ctx = Context.from_values(
        prev_value=np.array([np.nan, 50.0, 50.0, 300.0]),
        quantity_value=np.array([12_480.0, 12_480.0, 5e9, 300.0]),
    )
    refs = log_refs(ctx, "prev", quantity_range=(1.0, 6.0))
    assert refs.shape == (4, 2)
    assert refs[0, 1] == pytest.approx(np.log10(12_480)) and np.isnan(refs[0, 0])
    assert refs[1].tolist() == pytest.approx([np.log10(50), np.log10(12_480)])
    assert np.isnan(refs[2, 1])  # 5e9 is beyond the class's range
    assert np.isnan(refs[3, 1])  # the class's own previous value: not counted twice
    # without a range (a model fitted before quantities were read) the own value alone
    assert log_refs(ctx, "prev").shape == (4, 1)
