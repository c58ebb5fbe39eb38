"""Time to paint the run page of a 10,000-step run logging 30 metrics per step (issue 9; goal ≤ 1.5 s).

A run of 10,000 steps × 30 metrics is ingested as a restarted supervisor would (whole log), daphne
serves it, and headless Chromium (Debian's, never a downloaded build) opens its page five times.
Each time counts from the start of navigation to the moment every chart holds its points
(the page's charts report their point counts in data-points) and the next frame has painted.

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

STEPS, GOAL_MS, REPEATS = 10_000, 1500.0, 5
CHROMIUM = "/usr/bin/chromium"

# Painted: the page has a chart for every metric, and every chart within the viewport has drawn its
# points (charts below the fold draw as they scroll into view: static/js/charts.js, Board).
PAINTED = """(expected) => {
  const charts = Array.from(document.querySelectorAll('#charts .chart'));
  if (charts.length < expected) return false;
  const visible = charts.filter(c => { const r = c.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; });
  if (!visible.length || !visible.every(c => Number(c.dataset.points) > 0 && c.querySelector('.main-svg'))) return false;
  return new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now()))));
}"""
# Then every chart, scrolled into view one after another: all 30 draw (none is left empty).
ALL_DRAWN = """() => Array.from(document.querySelectorAll('#charts .chart')).every(c => Number(c.dataset.points) > 0)"""


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
    run = plane.new_run(user, prompt_set, "ten thousand steps")
    plane.ingest_whole_log(run, plane.Log(), 1, STEPS, tmp)
    Run.objects.filter(pk=run.pk).update(state=Run.SUCCEEDED)
    client = Client()
    client.force_login(user)
    session = client.cookies["sessionid"].value

    port = plane.free_port()
    env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": plane.REDIS, "EVOLAB_DATA_DIR": str(tmp / "data")}
    web = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.asgi:application"],
                           stdout=(tmp / "daphne.log").open("w"), stderr=subprocess.STDOUT, cwd=plane.ROOT, env=env)
    try:
        plane.wait_for_port(port, web, "daphne")
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.add_cookies([{"name": "sessionid", "value": session, "url": f"http://127.0.0.1:{port}"}])
            page_url = f"http://127.0.0.1:{port}/runs/{run.pk}/"
            timings = []
            for attempt in range(REPEATS + 1):  # the first warms the server's caches and the browser's
                page = context.new_page()
                page.goto(page_url, wait_until="commit")
                painted = page.wait_for_function(PAINTED, arg=len(plane.NAMES), timeout=60_000).json_value()
                drawn = page.evaluate("Array.from(document.querySelectorAll('#charts .chart'))"
                                      ".filter(c => Number(c.dataset.points) > 0).length")
                for chart in page.query_selector_all("#charts .chart"):
                    chart.scroll_into_view_if_needed()
                page.wait_for_function(ALL_DRAWN, timeout=60_000)
                points = page.evaluate("Array.from(document.querySelectorAll('#charts .chart'))"
                                       ".reduce((n, c) => n + Number(c.dataset.points), 0)")
                page.close()
                if attempt:
                    timings.append(painted)
                    print(f"  paint {attempt}: {painted:7.0f} ms ({drawn} charts in view drawn; after scrolling, "
                          f"all 30 charts hold {points:,} points)", flush=True)
            browser.close()
    finally:
        web.terminate()
        web.wait(timeout=20)
    median = statistics.median(timings)
    met = median <= GOAL_MS
    print(f"run page of {STEPS:,} steps × {len(plane.NAMES)} metrics: median time to paint {median:.0f} ms "
          f"(goal ≤ {GOAL_MS:.0f} ms) {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
