"""One rendering of a moment (webapp/times.py): the server's <time> in UTC, with its zone, that static/js/when.js
shows in the reader's zone."""
from datetime import datetime, timedelta, timezone

from django.template import Context, Template

from webapp.times import when

MOMENT = datetime(2026, 11, 29, 15, 20, 33, tzinfo=timezone.utc)


def test_a_moment_is_a_time_element_in_utc_that_says_its_zone():
    assert str(when(MOMENT)) == ('<time class="when" datetime="2026-11-29T15:20:33Z" title="2026-11-29 15:20:33 UTC">'
                                 '2026-11-29 15:20 UTC</time>')


def test_another_zone_is_written_in_utc_and_seconds_and_relative_are_asked_for_by_name():
    tokyo = MOMENT.astimezone(timezone(timedelta(hours=9)))
    html = str(when(tokyo, "seconds, relative"))
    assert 'datetime="2026-11-29T15:20:33Z"' in html and ">2026-11-29 15:20:33 UTC<" in html
    assert " data-seconds" in html and " data-relative" in html


def test_no_moment_is_a_dash():
    assert when(None) == "—"


def test_every_template_has_the_filter_without_loading_it():
    assert Template("{{ at|when }}").render(Context({"at": MOMENT})).startswith('<time class="when"')
