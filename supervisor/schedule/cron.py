"""When schedules fire, as pure functions: cron expressions, one-shot times and intervals in an
IANA time zone, their firing instants and each firing's idempotency key (the slot).

Cron expressions are walked in local wall-clock time (croniter over naive datetimes, where there
is no DST), then each local time is mapped to real instants:

- a *fixed-time* expression (the hour field is numbers, lists or ranges: `30 2 * * *`) fires once
  per local slot. A time that happens twice (the autumn change) fires at its first occurrence; a
  time that does not exist (the spring change) fires as if the clock had not moved (02:30 becomes
  03:30 summer time), soon after the change. Its key is the local wall-clock slot, so it can never
  fire twice, whatever the instants.
- an expression with `*` or a step in the hour field (`*/15 * * * *`, `0 */2 * * *`) is about
  elapsed time: every instant whose local time matches fires (both 02:00s in autumn, none in the
  missing hour in spring), keyed by its UTC instant.

One-shots and intervals are instants already: keyed by their UTC instant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from supervisor.errors import BadSchedule as InvalidRequest

CRON, ONCE, EVERY = "cron", "once", "every"
FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
ALIASES = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
           "@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *",
           "@annually": "0 0 1 1 *"}
# Walking a cron expression stops after this many local candidates (an expression that matches
# almost never, like Feb 30, is refused rather than searched forever).
_MAX_WALK = 100_000


@dataclass(frozen=True, slots=True)
class Spec:
    """What a schedule's time is: a cron expression, one instant, or an interval (seconds,
    counted from `anchor`, an epoch)."""

    kind: str  # cron | once | every
    expr: str = ""
    at: float = 0.0
    every_s: float = 0.0
    anchor: float = 0.0

    def text(self) -> str:
        """How it is stored: "0 9 * * 1-5", "once 1796000000", "every 5400 from 1796000000"."""
        if self.kind == CRON:
            return self.expr
        if self.kind == ONCE:
            return f"once {self.at:.0f}"
        return f"every {self.every_s:.0f} from {self.anchor:.0f}"

    @classmethod
    def parse_stored(cls, text: str) -> Spec:
        words = text.split()
        if words[:1] == ["once"]:
            return cls(ONCE, at=float(words[1]))
        if words[:1] == ["every"]:
            return cls(EVERY, every_s=float(words[1]), anchor=float(words[3]))
        return cls(CRON, expr=text)


@dataclass(frozen=True, slots=True)
class Fire:
    """One firing: its instant (epoch), its local time, and its slot key."""

    at: float
    local: datetime
    key: str


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidRequest(f"{name!r} is not an IANA time zone",
                             "Name one like Europe/Berlin, America/New_York or UTC.") from None


# -- validation -------------------------------------------------------------------------------


def _value(word: str, index: int) -> int:
    low, high = _RANGES[index]
    names = _MONTHS if index == 3 else _DAYS if index == 4 else ()
    if word.lower()[:3] in names and not word.isdigit():
        return names.index(word.lower()[:3]) + (1 if index == 3 else 0)
    if not word.isdigit():
        raise InvalidRequest(f"the {FIELDS[index]} field has {word!r}, which is not a number"
                             + (" or a name" if names else ""))
    number = int(word)
    if not low <= number <= high:
        raise InvalidRequest(f"{FIELDS[index]} {number} is out of range {low}-{high}")
    return number


def _check_part(part: str, index: int) -> None:
    base, slash, step = part.partition("/")
    if slash and (not step.isdigit() or int(step) == 0):
        raise InvalidRequest(f"the {FIELDS[index]} field has step {step!r}: a step is a whole "
                             "number of at least 1")
    if base in ("*", "?"):
        return
    if index == 2 and (base == "L" or re.fullmatch(r"\d+W|LW|L-\d+", base)):
        return
    if index == 4 and re.fullmatch(r"L[0-7]|[0-7]L|[0-7]#[1-5]|\w{3}#[1-5]", base):
        return
    low, dash, high = base.partition("-")
    first = _value(low, index)
    if dash and first > _value(high, index):
        raise InvalidRequest(f"the {FIELDS[index]} range {base} runs backwards")


def check_expr(expr: str) -> str:
    """The expression, normalised (aliases expanded), or InvalidRequest saying what is wrong."""
    expr = ALIASES.get(expr.strip().lower(), expr.strip())
    fields = expr.split()
    if len(fields) != 5:
        raise InvalidRequest(
            f"a cron expression has 5 fields ({' '.join(FIELDS)}); {expr!r} has {len(fields)}",
            "For example 0 9 * * 1-5 is 09:00 on weekdays; plain words work too "
            "(every weekday at 9).")
    for index, field in enumerate(fields):
        for part in field.split(","):
            if not part:
                raise InvalidRequest(f"the {FIELDS[index]} field {field!r} has an empty item")
            _check_part(part, index)
    if not croniter.is_valid(expr):
        raise InvalidRequest(f"{expr!r} is not a cron expression croniter accepts")
    try:
        croniter(expr, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        raise InvalidRequest(f"{expr!r} never happens: no date matches it (like 30 February)",
                             "Check the day-of-month and month fields.") from None
    return expr


def fixed_time(expr: str) -> bool:
    """Whether the hour field names hours (no `*`, no step): keyed by local wall-clock slot."""
    hour = expr.split()[1]
    return "*" not in hour and "/" not in hour and "?" not in hour


def warnings(spec: Spec) -> tuple[str, ...]:
    if spec.kind != CRON:
        return ()
    fields = spec.expr.split()
    if fields[2] not in ("*", "?") and fields[4] not in ("*", "?"):
        return (f"both day-of-month ({fields[2]}) and day-of-week ({fields[4]}) are set: it "
                "runs on days that match EITHER of them, not both.",)
    return ()


# -- firing instants --------------------------------------------------------------------------


def _instants(naive: datetime, tz: ZoneInfo) -> list[datetime]:
    """Every real instant whose local time is `naive` (none, one or two), as aware datetimes."""
    out: list[datetime] = []
    for fold in (0, 1):
        aware = naive.replace(tzinfo=tz, fold=fold)
        back = aware.astimezone(UTC).astimezone(tz)
        if back.replace(tzinfo=None) == naive and all(aware.astimezone(UTC) !=
                                                      o.astimezone(UTC) for o in out):
            out.append(aware)
    return out


def _cron_fires(expr: str, tz: ZoneInfo, after: float, n: int) -> list[Fire]:
    fixed = fixed_time(expr)
    # Start a little before `after` in local time: a DST change can put the first instant after
    # `after` at a local time before the local time of `after`.
    start = datetime.fromtimestamp(after, tz).replace(tzinfo=None) - timedelta(hours=3)
    it = croniter(expr, start)
    out: list[Fire] = []
    for _ in range(_MAX_WALK):
        try:
            naive = it.get_next(datetime)
        except CroniterBadDateError:  # no date matches any more: no more firings
            return out
        if fixed:
            real = _instants(naive, tz)
            aware = real[0] if real else naive.replace(tzinfo=tz, fold=0)  # gap: clock unmoved
            found = [(aware, "local:" + naive.strftime("%Y-%m-%dT%H:%M"))]
        else:
            found = [(a, "utc:" + a.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ"))
                     for a in _instants(naive, tz)]
        for aware, key in found:
            at = aware.timestamp()
            if at <= after or (out and at <= out[-1].at):
                continue  # before the window, or the same instant as a slot just taken
            out.append(Fire(at, datetime.fromtimestamp(at, tz), key))
            if len(out) >= n:
                return out
    return out


def _utc_key(at: float) -> str:
    return "utc:" + datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def next_fires(spec: Spec | str, tz: str, after: float, n: int) -> list[Fire]:
    """The next `n` firings strictly after `after` (epoch seconds), in order. Pure."""
    if isinstance(spec, str):
        spec = Spec(CRON, expr=check_expr(spec))
    zinfo = zone(tz)
    if spec.kind == ONCE:
        return [Fire(spec.at, datetime.fromtimestamp(spec.at, zinfo), _utc_key(spec.at))] \
            if spec.at > after and n > 0 else []
    if spec.kind == EVERY:
        k = max(0, int((after - spec.anchor) // spec.every_s) + 1)
        ats = [spec.anchor + (k + i) * spec.every_s for i in range(n)]
        return [Fire(a, datetime.fromtimestamp(a, zinfo), _utc_key(a)) for a in ats if a > after]
    return _cron_fires(spec.expr, zinfo, after, n)


def fires_between(spec: Spec, tz: str, after: float, until: float, limit: int) -> list[Fire]:
    """Firings in (after, until], at most the last `limit` of them."""
    out: list[Fire] = []
    cursor = after
    size = 2  # most ticks find nothing due: look at the next two only, more if all are due
    while True:
        batch = [f for f in next_fires(spec, tz, cursor, size) if f.at <= until]
        out.extend(batch)
        if len(batch) < size:
            return out[-limit:]
        out = out[-limit:]
        cursor = batch[-1].at
        size = min(200, size * 4)


# -- plain words ------------------------------------------------------------------------------

_DAY_WORDS = {"monday": 1, "mon": 1, "tuesday": 2, "tue": 2, "tues": 2, "wednesday": 3,
              "wed": 3, "thursday": 4, "thu": 4, "thurs": 4, "friday": 5, "fri": 5,
              "saturday": 6, "sat": 6, "sunday": 0, "sun": 0}
_UNITS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "m": 60, "min": 60,
          "mins": 60, "minute": 60, "minutes": 60, "h": 3600, "hr": 3600, "hrs": 3600,
          "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400}
_TIME = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$")


def _clock(word: str) -> tuple[int, int]:
    """"9", "9am", "9:30", "17:00", "noon", "midnight" -> (hour, minute)."""
    word = word.strip().lower().replace(".", ":")
    if word in ("noon", "midday"):
        return 12, 0
    if word == "midnight":
        return 0, 0
    m = _TIME.match(word)
    if not m:
        raise InvalidRequest(f"{word!r} is not a time of day (say 9, 9am, 9:30 or 17:00)")
    hour, minute = int(m.group(1)), int(m.group(2) or 0)
    if m.group(3) == "pm" and hour < 12:
        hour += 12
    elif m.group(3) == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        raise InvalidRequest(f"{word!r} is not a time of day: hours go to 23, minutes to 59")
    return hour, minute


def _days(text: str) -> str | None:
    """"weekday", "weekend", "day", "monday", "mon and wed" -> a day-of-week field."""
    text = text.strip()
    if text in ("day", "days", ""):
        return "*"
    if text in ("weekday", "weekdays", "workday", "workdays"):
        return "1-5"
    if text in ("weekend", "weekends"):
        return "0,6"
    words = [w.rstrip("s") if w.rstrip("s") in _DAY_WORDS else w
             for w in re.split(r"[,\s]+|\band\b", text) if w]
    if words and all(w in _DAY_WORDS for w in words):
        return ",".join(str(_DAY_WORDS[w]) for w in words)
    return None


def _every(rest: str, now: float) -> Spec:
    """What follows "every"."""
    m = re.fullmatch(r"(\d+)?\s*([a-z]+)", rest)
    if m and m.group(2) in _UNITS and _UNITS[m.group(2)] < 86400:
        count = int(m.group(1) or 1)
        seconds = count * _UNITS[m.group(2)]
        if count < 1:
            raise InvalidRequest("an interval must be at least 1")
        if seconds % 3600 == 0 and 24 % (seconds // 3600) == 0:
            hours = seconds // 3600
            return Spec(CRON, expr="0 * * * *" if hours == 1 else f"0 */{hours} * * *")
        if seconds % 60 == 0 and seconds < 3600 and 60 % (seconds // 60) == 0:
            minutes = seconds // 60
            return Spec(CRON, expr="* * * * *" if minutes == 1 else f"*/{minutes} * * * *")
        return Spec(EVERY, every_s=float(seconds), anchor=now)
    days, _, when = rest.partition(" at ")
    if not when and rest in ("hour",):
        return Spec(CRON, expr="0 * * * *")
    dow = _days(days)
    if dow is None:
        raise InvalidRequest(f"'every {rest}' is not a schedule I know",
                             "Say every weekday at 9, every monday at 10:30, every 2 hours, "
                             "every 15 minutes, or give a cron expression.")
    hour, minute = _clock(when or "0:00")
    return Spec(CRON, expr=f"{minute} {hour} * * {dow}")


def parse_when(words: str, tz: str, now: float) -> Spec:
    """Plain words, or a cron expression, as a Spec; InvalidRequest says what is wrong."""
    text = " ".join(words.lower().split())
    zinfo = zone(tz)
    local_now = datetime.fromtimestamp(now, zinfo)
    if text in ALIASES or re.match(r"[\d*?]", text):
        return Spec(CRON, expr=check_expr(words))
    for word, expr in (("hourly", "0 * * * *"), ("daily", "0 9 * * *"),
                       ("weekly", "0 9 * * 1")):
        if text == word:
            return Spec(CRON, expr=expr)
    if text.startswith("daily at "):
        text = "every day at " + text.removeprefix("daily at ")
    if text.startswith("every "):
        return _every(text.removeprefix("every "), now)
    m = re.fullmatch(r"in (\d+)\s*([a-z]+)", text)
    if m and m.group(2) in _UNITS:
        return Spec(ONCE, at=float(int(now) + int(m.group(1)) * _UNITS[m.group(2)]))
    m = re.fullmatch(r"(today|tomorrow)?\s*(?:at )?(.+)", text)
    if m and (m.group(1) or text.startswith("at ")):
        hour, minute = _clock(m.group(2))
        day = local_now.date() + timedelta(days=1 if m.group(1) == "tomorrow" else 0)
        naive = datetime(day.year, day.month, day.day, hour, minute)
        real = _instants(naive, zinfo)
        at = (real[0] if real else naive.replace(tzinfo=zinfo)).timestamp()
        if at <= now:
            if m.group(1) == "today":
                raise InvalidRequest(f"today at {hour:02d}:{minute:02d} has passed")
            if not m.group(1):
                at = (datetime(day.year, day.month, day.day, hour, minute) + timedelta(days=1)
                      ).replace(tzinfo=zinfo).timestamp()
        return Spec(ONCE, at=at)
    raise InvalidRequest(f"{words.strip()!r} is neither plain words I know nor a cron expression",
                         "Say every weekday at 9, every 2 hours, tomorrow at 8, in 20 min, "
                         "at 17:00, or give 5 cron fields like 0 9 * * 1-5.")


# -- words for people -------------------------------------------------------------------------

_WEEKDAY_TEXT = {"*": "Every day", "1-5": "Every weekday", "0,6": "Every weekend day"}
_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def local_text(when: datetime) -> str:
    """"Mon 7 Dec 09:00"."""
    return f"{when:%a} {when.day} {when:%b %H:%M}"


def describe(spec: Spec, tz: str) -> str:
    """"Every weekday at 09:00 Europe/Berlin", "Every 2 hours", "Once, Tue 1 Dec 17:00 UTC"."""
    if spec.kind == ONCE:
        return f"Once, {local_text(datetime.fromtimestamp(spec.at, zone(tz)))} {tz}"
    if spec.kind == EVERY:
        return f"Every {_duration(spec.every_s)}"
    minute, hour, dom, month, dow = spec.expr.split()
    if dom == month == "*" and minute.isdigit() and hour.isdigit():
        at = f"at {int(hour):02d}:{int(minute):02d} {tz}"
        if dow in _WEEKDAY_TEXT:
            return f"{_WEEKDAY_TEXT[dow]} {at}"
        if re.fullmatch(r"[0-7](,[0-7])*", dow):
            names = [_DAY_NAMES[int(d) % 7] for d in dow.split(",")]
            return f"Every {', '.join(names)} {at}"
    if dom == month == dow == "*" and minute == "0":
        if hour == "*":
            return "Every hour"
        if re.fullmatch(r"\*/\d+", hour):
            return f"Every {hour[2:]} hours"
    if dom == month == dow == hour == "*":
        if minute == "*":
            return "Every minute"
        if re.fullmatch(r"\*/\d+", minute):
            return f"Every {minute[2:]} minutes"
    return f"Cron {spec.expr} {tz}"


def _duration(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    if seconds >= 3600:
        return f"{seconds / 3600:g} hours"
    return f"{seconds / 60:g} minutes" if seconds >= 60 else f"{seconds:g} seconds"
