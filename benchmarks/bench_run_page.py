"""Time until the run page is usable (issues 9 and 40): a training run of 1,000 steps (goal ≤ 1 s) and an ended run
of 10,000 steps (goal ≤ 2 s), each logging 30 metrics per step.

Each run is ingested as a restarted supervisor would (whole log), daphne serves it, and headless Chromium (Debian's,
never a downloaded build) opens its page five times after a warm-up. Usable, counted from the start of navigation:
every chart in view holds its points (the charts report their point counts in data-points) and the next frame has
painted; and, for the training run, its socket is live and the reads the page makes once it opens (the catch-up of
what was written meanwhile, the history, the live state) have answered, with no request of the page in flight.

Needs PostgreSQL (BENCH_POSTGRES) and Redis (REDIS_URL) like bench_data_plane.py.
"""
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_data_plane as plane  # noqa: E402

# (steps, state, goal in ms): a run being watched while it trains, and a long one opened after it ended
PAGES = ((1_000, "running", 1000.0), (10_000, "succeeded", 2000.0))
REPEATS = 5
CHROMIUM = "/usr/bin/chromium"

# Painted: the page has a chart for every metric, and every chart within the viewport has drawn its
# points (charts below the fold draw as they scroll into view: static/js/charts.js, Board).
PAINTED = """([expected, live]) => {
  const charts = Array.from(document.querySelectorAll('#charts .chart'));
  if (charts.length < expected) return false;
  if (live && (document.getElementById('live-indicator').textContent !== 'live' || window.__inFlight > 0)) return false;
  const visible = charts.filter(c => { const r = c.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; });
  if (!visible.length || !visible.every(c => Number(c.dataset.points) > 0 && c.querySelector('.main-svg'))) return false;
  return new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now()))));
}"""
# Then every chart, scrolled into view one after another: all 30 draw (none is left empty).
ALL_DRAWN = """() => Array.from(document.querySelectorAll('#charts .chart')).every(c => Number(c.dataset.points) > 0)"""
# Where a load's time went, from the browser's own timings (ms from the start of navigation)
WHERE_THE_TIME_GOES = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const plotly = res.find(r => r.name.includes('plotly'));
  const reads = res.filter(r => r.name.includes('/api/'));
  const r = x => Math.round(x);
  return `page ${r(nav.responseEnd)} ms (server ${r(nav.responseStart - nav.requestStart)}), ` +
    `plotly.js until ${plotly ? r(plotly.responseEnd) : '?'}, DOM ready ${r(nav.domContentLoadedEventEnd)}, ` +
    `${reads.length} reads ending at ${reads.length ? r(Math.max(...reads.map(x => x.responseEnd))) : '-'}`;
}"""
# The page's requests in flight (its reads go through fetch: static/js/charts.js getJSON)
COUNT_FETCHES = """window.__inFlight = 0; const fetch0 = window.fetch;
window.fetch = function () { window.__inFlight++; return fetch0.apply(this, arguments).finally(() => { window.__inFlight--; }); };"""


def main() -> int:
    problem = plane.postgres_problem("bench_run_page")
    if problem:
        print(problem)
        return 2
    if not Path(CHROMIUM).exists():
        print(f"bench_run_page needs Debian's chromium at {CHROMIUM} (make browser)")
        return 2
    url = plane.recreate_database("evolab_page_bench")
    user, prompt_set, _ = plane.django_setup(url)
    from django.test import Client

    from webapp.runs.models import Run

    tmp = Path(tempfile.mkdtemp(prefix="evolab-page-bench-"))
    runs = []
    for steps, state, goal in PAGES:
        run = plane.new_run(user, prompt_set, f"{steps:,} steps")
        plane.ingest_whole_log(run, plane.Log(), 1, steps, tmp)
        Run.objects.filter(pk=run.pk).update(state=state)
        runs.append((run, steps, state, goal))
    client = Client()
    client.force_login(user)
    session = client.cookies["sessionid"].value

    port = plane.free_port()
    env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": plane.REDIS, "EVOLAB_DATA_DIR": str(tmp / "data")}
    web = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.asgi:application"],
                           stdout=(tmp / "daphne.log").open("w"), stderr=subprocess.STDOUT, cwd=plane.ROOT, env=env)
    missed = []
    try:
        plane.wait_for_port(port, web, "daphne")
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.add_cookies([{"name": "sessionid", "value": session, "url": f"http://127.0.0.1:{port}"}])
            context.add_init_script(COUNT_FETCHES)
            for run, steps, state, goal in runs:
                timings = usable_times(context, f"http://127.0.0.1:{port}/runs/{run.pk}/", live=state == "running")
                median = statistics.median(timings)
                print(f"run page of a {state} run of {steps:,} steps × {len(plane.NAMES)} metrics: usable in "
                      f"{', '.join(f'{t:.0f}' for t in timings)} ms, median {median:.0f} ms (goal ≤ {goal:.0f} ms) "
                      f"{'met' if median <= goal else 'MISSED'}", flush=True)
                if median > goal:
                    missed.append(steps)
            browser.close()
    finally:
        web.terminate()
        web.wait(timeout=20)
    return 1 if missed else 0


def usable_times(context, page_url: str, live: bool) -> list[float]:
    timings = []
    for attempt in range(REPEATS + 1):  # the first warms the server's caches and the browser's
        page = context.new_page()
        page.goto(page_url, wait_until="commit")
        usable = page.wait_for_function(PAINTED, arg=[len(plane.NAMES), live], timeout=60_000).json_value()
        parts = page.evaluate(WHERE_THE_TIME_GOES)
        drawn = page.evaluate("Array.from(document.querySelectorAll('#charts .chart'))"
                              ".filter(c => Number(c.dataset.points) > 0).length")
        for chart in page.query_selector_all("#charts .chart"):
            chart.scroll_into_view_if_needed()
        page.wait_for_function(ALL_DRAWN, timeout=60_000)
        points = page.evaluate("Array.from(document.querySelectorAll('#charts .chart'))"
                               ".reduce((n, c) => n + Number(c.dataset.points), 0)")
        page.close()
        if attempt:
            timings.append(usable)
            print(f"  load {attempt}: {usable:7.0f} ms ({drawn} charts in view drawn; after scrolling, "
                  f"all {len(plane.NAMES)} charts hold {points:,} points); {parts}", flush=True)
    return timings


if __name__ == "__main__":
    sys.exit(main())
