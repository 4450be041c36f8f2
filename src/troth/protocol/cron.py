"""Schedules' time arithmetic: the Lean spec's opaque ``nextCron`` and ``expand``.

troth's cron is standard cron, evaluated in UTC by croniter: five fields
(``minute hour day-of-month month day-of-week``, Sunday = 0 or 7, day-of-month and
day-of-week ORed as in Vixie cron), an optional leading seconds field, and the
``@yearly``/``@annually``/``@monthly``/``@weekly``/``@daily``/``@midnight``/``@hourly``
shorthands. Times are epoch milliseconds.
"""

from __future__ import annotations

from croniter import CroniterBadDateError, croniter


def _fields(cron: str) -> list[str]:
    return cron.split()


def is_valid(cron: str) -> bool:
    """True when the expression parses and fires at least once more from the epoch on."""
    fields = _fields(cron)
    if not fields:
        return False
    if not (fields[0].startswith("@") and len(fields) == 1) and len(fields) not in (5, 6):
        return False
    if not croniter.is_valid(cron, second_at_beginning=True):
        return False
    try:
        next_cron(cron, 0)
    except (CroniterBadDateError, ValueError):
        return False
    return True


def next_cron(cron: str, after: int) -> int:
    """The first fire time strictly after ``after`` (ms), in ms.

    Cron has whole-second resolution, so the search starts from the second containing
    ``after``; croniter's ``get_next`` is strictly after its start, and every match is a
    whole second, so the result is strictly after ``after`` as the spec requires.
    """
    start = after // 1000
    seconds = croniter(cron, float(start), second_at_beginning=True).get_next(float)
    return int(seconds) * 1000


ID_FIELD = "{{.id}}"
TIMESTAMP_FIELD = "{{.timestamp}}"


def expand(template: str, schedule_id: str, timestamp: int) -> str:
    """A schedule occurrence's promise id: ``{{.id}}`` and ``{{.timestamp}}`` substituted."""
    return template.replace(ID_FIELD, schedule_id).replace(TIMESTAMP_FIELD, str(timestamp))
