"""The rollout explorer at 1,000,000 rollouts in one run (issue 10), on PostgreSQL over HTTP.

A synthetic EVOL-RL-shaped run (8 prompts × 64 rollouts of ~2 KB per step, 1,954 steps) is ingested
through the project's own ingestion (webapp.runs.ingestion.ingest_events, one call per step as a live
supervisor polls), its texts indexed as the supervisor indexes them (webapp.explorer.text_search.catch_up),
then daphne answers, with an API token on one kept-alive connection:
- searches (first pages, a deep keyset page, filters, free text both rare and common, a method extra)
  and a prompt's history (API and page): p95 of 30 each, goal ≤ 100 ms;
- exports (JSONL, CSV, Parquet; filtered and whole-run): time to the first byte, goal ≤ 1 s;
- daphne's memory while it streams 10× more rows: goal flat (the growth no more than 1.5× the smaller's).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_explorer.py     # BENCH_QUICK=1: 100,000 rollouts
    BENCH_REUSE=1 ...: measure the reads again on the database the last run left
"""
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import bench_data_plane as dp

ROLLOUTS = 100_000 if dp.QUICK else 1_000_000
REUSE = os.environ.get("BENCH_REUSE") == "1"
PER_STEP = 8 * 64
RARE = "pelican"  # in 5 of the 512 texts: about 1% of the rollouts
REPEATS = 30
SEARCH_GOAL_S, FIRST_BYTE_GOAL_S, MEMORY_GOAL = 0.100, 1.0, 1.5
WORKING_SET = 32e6  # growth allowed whatever the size: what one download holds at a time (below)


def pool_of_texts() -> list[str]:
    pool = dp.texts(512, random.Random(0))
    for k in range(5):
        pool[k * 100] = pool[k * 100][:1000] + f" {RARE} " + pool[k * 100][1000:]
    return pool


def ingest(run, steps: int, pool: list[str]) -> float:
    log, done, started = dp.Log(), 0, time.perf_counter()
    while done < steps:
        chunk = min(50, steps - done)
        dp.ingest_rollouts(run, log, done + 1, chunk, pool)
        done += chunk
        if done % 500 < chunk:
            print(f"  ingested {done * PER_STEP:,} rollouts", flush=True)
    return steps * PER_STEP / (time.perf_counter() - started)


def p95(session, url: str, check=None) -> float:
    def ok(response):
        assert response.status_code == 200, (url, response.status_code, response.text[:300])
        if check:
            check(response)

    # the body is read whole by requests; parsing it is the client's business, not the server's
    return statistics.quantiles(dp.read_times(session, url, REPEATS, ok, parse=lambda response: response), n=20)[-1]


def first_byte(session, url: str) -> float:
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        with session.get(url, stream=True) as response:
            assert response.status_code == 200, (url, response.status_code)
            next(response.iter_content(1))
            timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def rss_growth_while_streaming(session, url: str, pid: int, pause: float = 0.0) -> tuple[int, int]:
    """(bytes of the body, daphne's largest resident set while streaming it minus before), sampled;
    the client waits `pause` seconds after each 64 KiB it reads (a slow link)."""
    def rss():
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    before, peak, done = rss(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    size = 0
    with session.get(url, stream=True) as response:
        for chunk in response.iter_content(1 << 16):
            size += len(chunk)
            if pause:
                time.sleep(pause)
    done.set()
    sampler.join()
    return size, max(peak[0] - before, 0)


def main() -> int:
    problem = dp.postgres_problem("bench_explorer")
    if problem:
        print(problem)
        return 2
    steps = ROLLOUTS // PER_STEP
    if REUSE:  # the database the last run left, migrated to this checkout (BENCH_REUSE=1: the reads only)
        url = f"{dp.PG}/evolab_explorer_bench"
        dp.os.environ.update(DATABASE_URL=url, REDIS_URL=dp.REDIS, DJANGO_SETTINGS_MODULE="webapp.settings",
                             HF_HUB_OFFLINE="1")
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        from webapp.accounts.models import ApiToken
        from webapp.runs.models import Run

        run = Run.objects.get(name="explorer")
        token = ApiToken.issue(run.created_by)
        print(f"reusing run {run.pk} of evolab_explorer_bench ({run.rollouts.count():,} rollouts)", flush=True)
    else:
        url = dp.recreate_database("evolab_explorer_bench")
        user, prompt_set, token = dp.django_setup(url)
        from webapp.explorer import text_search
        from webapp.runs.table_statistics import keep_statistics

        pool = pool_of_texts()
        run = dp.new_run(user, prompt_set, "explorer", method="evol_rl")
        print(f"ingesting {steps * PER_STEP:,} rollouts ({steps} steps of 8 × 64, ~2 KB each)", flush=True)
        ingest_rate = ingest(run, steps, pool)
        started = time.perf_counter()
        indexed = text_search.catch_up_fully(run.pk)
        index_rate = indexed / (time.perf_counter() - started)
        keep_statistics(force=True)
        print(f"  ingest {ingest_rate:,.0f} rollouts/s; text index built behind it at {index_rate:,.0f} rollouts/s",
              flush=True)
    import requests
    from webapp.explorer.search import search

    tmp = Path(tempfile.mkdtemp(prefix="evolab-explorer-"))
    port = dp.free_port()
    env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": dp.REDIS, "EVOLAB_DATA_DIR": str(tmp / "data")}
    # --application-close-timeout 2: an export abandoned after its first byte (as measured here) streams
    # to nobody until daphne cancels it (webapp/http_bridge.py); 10 s by default would let those
    # leftovers run under the next measurements
    daphne = subprocess.Popen([sys.executable, "-m", "daphne", "--application-close-timeout", "2", "-b", "127.0.0.1",
                               "-p", str(port), "webapp.asgi:application"],
                              stdout=(tmp / "daphne.log").open("w"), stderr=subprocess.STDOUT, cwd=dp.ROOT, env=env)
    missed = []
    try:
        dp.wait_for_port(port, daphne, "daphne")
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token}"
        api, pages = f"http://127.0.0.1:{port}/api/runs/{run.pk}", f"http://127.0.0.1:{port}/runs/{run.pk}"
        # the pages take a signed-in session, never a token (docs/security.md)
        from django.test import Client

        signed_in = Client()
        signed_in.force_login(run.created_by)
        browser = requests.Session()
        browser.cookies.set("sessionid", signed_in.cookies["sessionid"].value)

        def reader(address):
            return browser if address.startswith(pages) else session
        deep = search(run.pk, {"order": "-reward", "limit": "1000"})
        for _ in range(9):  # 10,000 rollouts in
            deep = search(run.pk, {"order": "-reward", "limit": "1000", "cursor": deep.next_cursor})
        deep_step = search(run.pk, {"limit": "1000"})
        for _ in range(9):
            deep_step = search(run.pk, {"limit": "1000", "cursor": deep_step.next_cursor})
        deep_similar = search(run.pk, {"order": "-mean_similarity", "limit": "1000"})
        for _ in range(9):
            deep_similar = search(run.pk, {"order": "-mean_similarity", "limit": "1000", "cursor": deep_similar.next_cursor})
        mid = steps // 2

        def nonempty(response):
            assert response.json()["results"], response.url

        reads = [
            ("search, first page by step", f"{api}/rollouts/search", nonempty),
            ("search, first page by -reward", f"{api}/rollouts/search?order=-reward", nonempty),
            ("search, a page 10,000 rollouts in by step", f"{api}/rollouts/search?cursor={deep_step.next_cursor}", nonempty),
            ("search, a page 10,000 rollouts in by -reward", f"{api}/rollouts/search?order=-reward&cursor={deep.next_cursor}",
             nonempty),
            ("search, filters (steps, minority, reward) by -advantage",
             f"{api}/rollouts/search?step_min={mid - 500}&step_max={mid + 500}&in_majority=false&reward_max=0.5"
             f"&order=-advantage", nonempty),
            ("search, the same filters over 10 steps",
             f"{api}/rollouts/search?step_min={mid}&step_max={mid + 9}&in_majority=false&reward_max=0.5&order=-advantage",
             nonempty),
            ("search, one prompt's rollouts of a step", f"{api}/rollouts/search?prompt=p3&step_min={mid}&step_max={mid}",
             nonempty),
            (f"search, a rare word ({RARE}, ~1%) by step", f"{api}/rollouts/search?q={RARE}", nonempty),
            ("search, a rare word by -reward", f"{api}/rollouts/search?q={RARE}&order=-reward", nonempty),
            ("search, a common word (answer) by -reward", f"{api}/rollouts/search?q=answer&order=-reward", nonempty),
            ("search, a common word with a step range", f"{api}/rollouts/search?q=answer&step_min={mid}&step_max={mid + 10}",
             nonempty),
            ("search, by a method extra (-novelty) over 10 steps",
             f"{api}/rollouts/search?order=-novelty&step_min={mid}&step_max={mid + 9}", nonempty),
            ("search, by a method extra (-novelty) over the whole run", f"{api}/rollouts/search?order=-novelty", nonempty),
            ("search, by another method extra (-mean_similarity), whole run",
             f"{api}/rollouts/search?order=-mean_similarity", nonempty),
            ("search, by -mean_similarity, a page 10,000 rollouts in",
             f"{api}/rollouts/search?order=-mean_similarity&cursor={deep_similar.next_cursor}", nonempty),
            ("search, a rare reward range (0.2 to 0.3, 0.1%) by step",
             f"{api}/rollouts/search?reward_min=0.2&reward_max=0.3", nonempty),
            ("search, a rare reward range by -novelty",
             f"{api}/rollouts/search?reward_min=0.2&reward_max=0.3&order=-novelty", nonempty),
            ("search, a rare reward range, minority, by -advantage",
             f"{api}/rollouts/search?reward_min=0.2&reward_max=0.3&in_majority=false&order=-advantage", nonempty),
            ("search page (HTML), a rare word", f"{pages}/rollouts/search/?q={RARE}", None),
            ("prompt history (API), every step", f"{api}/prompts/p3/history", None),
            ("prompt history page (HTML)", f"{pages}/prompts/p3/", None),
        ]
        informational = [("rollouts page (HTML), one step's 8 groups of 64 (no goal)", f"{pages}/rollouts/?step={mid}")]
        print(f"\nreads at {steps * PER_STEP:,} rollouts over HTTP (p95 of {REPEATS}; goal ≤ {SEARCH_GOAL_S * 1e3:.0f} ms)")
        for what, address, check in reads:
            latency = p95(reader(address), address, check)
            met = latency <= SEARCH_GOAL_S
            if not met:
                missed.append(what)
            print(f"  {what:<60} {latency * 1e3:7.1f} ms  {'met' if met else 'MISSED'}", flush=True)
        for what, address in informational:
            print(f"  {what:<60} {p95(reader(address), address) * 1e3:7.1f} ms", flush=True)

        exports = [("JSONL, a rare word", f"{api}/rollouts/export?format=jsonl&q={RARE}"),
                   ("CSV, a step range", f"{api}/rollouts/export?format=csv&step_min={mid}&step_max={mid + 100}"),
                   ("Parquet, a step range", f"{api}/rollouts/export?format=parquet&step_min={mid}&step_max={mid + 100}"),
                   ("JSONL, the whole run", f"{api}/rollouts/export?format=jsonl"),
                   ("CSV, the whole run by -reward", f"{api}/rollouts/export?format=csv&order=-reward"),
                   ("CSV, the whole run by -mean_similarity", f"{api}/rollouts/export?format=csv&order=-mean_similarity"),
                   ("JSONL, a rare reward range by -novelty",
                    f"{api}/rollouts/export?format=jsonl&reward_min=0.2&reward_max=0.3&order=-novelty"),
                   ("metrics CSV", f"{api}/metrics/export?format=csv")]
        print(f"\nexports: time to the first byte (median of 5; goal ≤ {FIRST_BYTE_GOAL_S:.0f} s)")
        for what, address in exports:
            latency = first_byte(session, address)
            met = latency <= FIRST_BYTE_GOAL_S
            if not met:
                missed.append(f"export {what}")
            print(f"  {what:<60} {latency * 1e3:7.1f} ms  {'met' if met else 'MISSED'}", flush=True)

        time.sleep(3)  # the abandoned exports' leftovers cancelled
        print("\ndaphne's memory while streaming a CSV export (resident set growth, sampled every 20 ms)")
        export = f"{api}/rollouts/export?format=csv&step_min=1&step_max={{}}"
        # each read fast, then at about 6 MB/s as over a slow link (daphne once buffered in memory what
        # such a client had not read yet: the growth followed the size)
        for how, pause in (("", 0.0), (", read at ~6 MB/s", 0.01)):
            small = rss_growth_while_streaming(session, export.format(20), daphne.pid, pause)
            large = rss_growth_while_streaming(session, export.format(200), daphne.pid, pause)
            for (body, growth), rows in ((small, 20 * PER_STEP), (large, 200 * PER_STEP)):
                print(f"  {rows:>9,} rows, {body / 1e6:7.1f} MB streamed{how}: +{growth / 1e6:6.1f} MB")
            # A download's working set (a page of 1,000 rollouts as rows, as CSV, in flight) peaks at 8 to
            # 25 MB over repeated reads of either size; a body buffered whole would be the 213 MB itself.
            flat = large[1] <= max(MEMORY_GOAL * small[1], WORKING_SET)
            if not flat:
                missed.append(f"export memory{how}")
            print(f"  10× the rows{how}: +{large[1] / 1e6:.1f} MB against +{small[1] / 1e6:.1f} MB (goal flat: at "
                  f"most {MEMORY_GOAL}× the smaller's growth, or within {WORKING_SET / 1e6:.0f} MB) {'met' if flat else 'MISSED'}")
    finally:
        daphne.terminate()
        daphne.wait(timeout=20)
    if missed:
        print(f"\nmissed: {', '.join(missed)}")
        return 1
    print("\nevery goal met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
