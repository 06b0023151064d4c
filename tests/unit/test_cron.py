"""next_fires and the slot key: DST in Europe/Berlin and America/New_York, L, ranges, steps,
one-shots, intervals, plain words, and invalid expressions with their messages."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from supervisor.errors import InvalidRequest
from supervisor.schedule.cron import (
    CRON,
    EVERY,
    ONCE,
    Spec,
    check_expr,
    describe,
    fires_between,
    next_fires,
    parse_when,
    warnings,
)

BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"


def at(tz: str, *parts: int) -> float:
    return datetime(*parts, tzinfo=ZoneInfo(tz)).timestamp()  # type: ignore[misc]


def utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%m-%d %H:%M")


def on_day(fires: list, day: int, month: int) -> list:
    return [f for f in fires if f.local.day == day and f.local.month == month]


@pytest.mark.parametrize("tz,fallback,expr", [
    (BERLIN, (2026, 10, 25), "30 2 * * *"),   # 02:30 happens twice in Berlin
    (NEW_YORK, (2026, 11, 1), "30 1 * * *"),  # 01:30 happens twice in New York
])
def test_fixed_time_runs_once_on_fall_back_day(tz: str, fallback: tuple[int, int, int],
                                               expr: str) -> None:
    y, m, d = fallback
    fires = next_fires(expr, tz, at(tz, y, m, d) - 12 * 3600, 3)
    today = on_day(fires, d, m)
    assert len(today) == 1  # croniter alone would give two
    assert today[0].local.fold == 0  # the first occurrence
    assert today[0].key == f"local:{y}-{m:02d}-{d:02d}T{expr.split()[1].zfill(2)}:30"
    assert len({f.key for f in fires}) == 3


@pytest.mark.parametrize("tz,spring,utc_fire", [
    (BERLIN, (2026, 3, 29), "03-29 01:30"),     # 02:30 CET does not exist: 03:30 CEST
    (NEW_YORK, (2026, 3, 8), "03-08 07:30"),    # 02:30 EST does not exist: 03:30 EDT
])
def test_fixed_time_runs_once_soon_after_spring_forward(tz: str, spring: tuple[int, int, int],
                                                        utc_fire: str) -> None:
    y, m, d = spring
    fires = next_fires("30 2 * * *", tz, at(tz, y, m, d) - 12 * 3600, 3)
    today = [f for f in fires if utc(f.at).startswith(f"{m:02d}-{d:02d}")]
    assert [utc(f.at) for f in today] == [utc_fire]
    assert today[0].key == f"local:{y}-{m:02d}-{d:02d}T02:30"
    assert today[0].local.hour == 3  # an hour after the missing slot, 30 min after the change


@pytest.mark.parametrize("tz,day,expected", [
    (BERLIN, (2026, 10, 25), 25), (BERLIN, (2026, 3, 29), 23),
    (NEW_YORK, (2026, 11, 1), 25), (NEW_YORK, (2026, 3, 8), 23),
])
def test_hour_wildcard_is_elapsed_time_keyed_by_utc(tz: str, day: tuple[int, int, int],
                                                    expected: int) -> None:
    y, m, d = day
    start, end = at(tz, y, m, d, 0) - 1, at(tz, y, m, d + 1, 0) - 1
    fires = fires_between(Spec(CRON, expr="0 * * * *"), tz, start, end, 100)
    assert len(fires) == expected  # one per real hour, both 02:00s in autumn, none missing
    assert all(f.key.startswith("utc:") for f in fires)
    assert len({f.key for f in fires}) == expected
    gaps = {b.at - a.at for a, b in zip(fires, fires[1:], strict=False)}
    assert gaps == {3600.0}


def test_step_in_hour_field_is_keyed_by_utc_instant() -> None:
    fires = next_fires("0 */6 * * *", BERLIN, at(BERLIN, 2026, 1, 1, 1), 3)
    assert [f.local.hour for f in fires] == [6, 12, 18]
    assert fires[0].key == "utc:2026-01-01T05:00Z"


def test_last_day_of_month_ranges_and_steps() -> None:
    last = next_fires("0 9 L * *", "UTC", at("UTC", 2026, 2, 1), 2)
    assert [(f.local.month, f.local.day) for f in last] == [(2, 28), (3, 31)]
    ranged = next_fires("0 9-11 * * 1-5", BERLIN, at(BERLIN, 2026, 12, 4, 10, 30), 3)
    assert [(f.local.day, f.local.hour) for f in ranged] == [(4, 11), (7, 9), (7, 10)]
    stepped = next_fires("*/20 * * * *", "UTC", at("UTC", 2026, 1, 1, 0, 5), 3)
    assert [f.local.minute for f in stepped] == [20, 40, 0]
    lists = next_fires("15,45 8 * * sun", "UTC", at("UTC", 2026, 12, 1), 2)
    assert [(f.local.weekday(), f.local.minute) for f in lists] == [(6, 15), (6, 45)]


def test_one_shot_fires_once_then_never() -> None:
    now = at(BERLIN, 2026, 12, 1, 15, 0)
    spec = parse_when("in 20 min", BERLIN, now)
    assert spec.kind == ONCE and spec.at == now + 1200
    [fire] = next_fires(spec, BERLIN, now, 5)
    assert fire.key == "utc:2026-12-01T14:20:00Z"
    assert next_fires(spec, BERLIN, spec.at, 5) == []
    assert parse_when("tomorrow at 8", BERLIN, now).at == at(BERLIN, 2026, 12, 2, 8)
    assert parse_when("at 17:00", BERLIN, now).at == at(BERLIN, 2026, 12, 1, 17)
    assert parse_when("at 9", BERLIN, now).at == at(BERLIN, 2026, 12, 2, 9)  # passed: tomorrow


def test_intervals_count_from_their_anchor() -> None:
    now = at("UTC", 2026, 1, 1)
    spec = parse_when("every 90 minutes", "UTC", now)
    assert spec.kind == EVERY and spec.every_s == 5400
    assert [f.at - now for f in next_fires(spec, "UTC", now + 6000, 2)] == [10800, 16200]
    assert Spec.parse_stored(spec.text()) == spec


@pytest.mark.parametrize("words,expr,sentence", [
    ("every weekday at 9", "0 9 * * 1-5", "Every weekday at 09:00 Europe/Berlin"),
    ("every 2 hours", "0 */2 * * *", "Every 2 hours"),
    ("every 15 minutes", "*/15 * * * *", "Every 15 minutes"),
    ("every monday at 10:30", "30 10 * * 1", "Every Monday at 10:30 Europe/Berlin"),
    ("daily at 7pm", "0 19 * * *", "Every day at 19:00 Europe/Berlin"),
    ("every weekend at noon", "0 12 * * 0,6", "Every weekend day at 12:00 Europe/Berlin"),
    ("@hourly", "0 * * * *", "Every hour"),
    ("0 9 * * 1-5", "0 9 * * 1-5", "Every weekday at 09:00 Europe/Berlin"),
])
def test_plain_words_become_expressions(words: str, expr: str, sentence: str) -> None:
    spec = parse_when(words, BERLIN, at(BERLIN, 2026, 12, 1, 15))
    assert (spec.kind, spec.expr) == (CRON, expr)
    assert describe(spec, BERLIN) == sentence


@pytest.mark.parametrize("expr,message", [
    ("0 9 * *", "a cron expression has 5 fields"),
    ("0 25 * * *", "hour 25 is out of range 0-23"),
    ("61 * * * *", "minute 61 is out of range 0-59"),
    ("0 9 * 13 *", "month 13 is out of range 1-12"),
    ("0 9 * * 8", "day-of-week 8 is out of range 0-7"),
    ("x 9 * * *", "the minute field has 'x', which is not a number"),
    ("*/0 * * * *", "step '0': a step is a whole number of at least 1"),
    ("0 17-9 * * *", "the hour range 17-9 runs backwards"),
    ("0 9 1,,2 * *", "has an empty item"),
    ("0 9 30 2 *", "never happens: no date matches it"),
])
def test_invalid_expressions_say_what_is_wrong(expr: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        check_expr(expr)
    assert message in err.value.what


@pytest.mark.parametrize("words,message", [
    ("every fortnight", "'every fortnight' is not a schedule I know"),
    ("at 25:00", "'25:00' is not a time of day"),
    ("whenever you like", "neither plain words I know nor a cron expression"),
])
def test_invalid_words_say_what_is_wrong(words: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_when(words, BERLIN, at(BERLIN, 2026, 12, 1))
    assert message in err.value.what


def test_unknown_zone_and_dom_dow_warning() -> None:
    with pytest.raises(InvalidRequest, match="not an IANA time zone"):
        next_fires("0 9 * * *", "Mars/Olympus", 0, 1)
    assert "EITHER" in warnings(Spec(CRON, expr="0 9 1 * 1"))[0]
    assert warnings(Spec(CRON, expr="0 9 * * 1")) == ()
