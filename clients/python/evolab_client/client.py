"""Evolab's HTTP API, as a run trained elsewhere reports to it (DESIGN §4.8).

Two protocols on one server: MLflow's REST API under `/mlflow` (experiments, runs, params, tags,
metrics, end state) and Evolab's rollouts endpoint `POST /api/runs/{id}/rollouts` (JSON lines). The
server and the token come from EVOLAB_URL and EVOLAB_TOKEN unless given.

Calls that fail because Evolab cannot be reached, or answers 429, 502, 503 or 504, are retried with
backoff for `retry_for` seconds (None: until they succeed), so a trainer's reporter outlives a restart of
the server; any other error answer raises EvolabError at once with the server's message.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

RETRY_STATUSES = (429, 502, 503, 504)
MLFLOW = "/mlflow/api/2.0/mlflow/"
MAX_EXPERIMENTS_PER_SEARCH = 100  # Evolab's runs/search takes at most 100 experiment_ids (MLflow's limit for id lists)


class EvolabError(Exception):
    """An error answer from Evolab: its HTTP status, message and, where it names one, the field and line."""

    def __init__(self, status: int, message: str, field: str | None = None, line: int | None = None,
                 code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.field, self.line, self.code = status, message, field, line, code

    def __str__(self):
        return f"Evolab answered {self.status}: {self.message}"


class AmbiguousRun(ValueError):
    """A run named without its team (RUN or EXPERIMENT/RUN) that is in more than one of the user's teams."""


@dataclass
class RunRef:
    """A run as the client knows it: Evolab's id, MLflow's run id and its name."""

    id: int
    mlflow_run_id: str
    name: str


class Evolab:
    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 60.0,
                 retry_for: float | None = 600.0, log=None):
        url = url or os.environ.get("EVOLAB_URL")
        token = token or os.environ.get("EVOLAB_TOKEN")
        if not url:
            raise ValueError("say which Evolab to talk to: set EVOLAB_URL (e.g. http://evolab.example:8000)")
        if not token:
            raise ValueError("set EVOLAB_TOKEN to an Evolab API token (manage.py create_api_token USER prints one)")
        self.url = url.rstrip("/")
        if self.url.endswith("/mlflow"):  # the same variable as MLFLOW_TRACKING_URI will do
            self.url = self.url[: -len("/mlflow")]
        self.token = token
        self.timeout = timeout
        self.retry_for = retry_for
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))

    # --- transport -------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: bytes | None = None, params: dict | None = None,
             content_type: str = "application/json") -> dict:
        """One request, retried while Evolab is away; its JSON answer."""
        url = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        started, delay, told = time.monotonic(), 0.5, False
        while True:
            request = urllib.request.Request(url, data=body, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    text = response.read()
                if told:
                    self.log(f"evolab: {self.url} answers again")
                return json.loads(text) if text else {}
            except urllib.error.HTTPError as exc:
                text = exc.read()
                if exc.code not in RETRY_STATUSES:
                    raise _error(exc.code, text) from None
                problem = f"answered {exc.code}"
            except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError) as exc:
                problem = f"cannot be reached ({getattr(exc, 'reason', exc)})"
            waited = time.monotonic() - started
            if self.retry_for is not None and waited >= self.retry_for:
                raise EvolabError(0, f"{self.url} {problem} for {waited:.0f} s; giving up")
            if not told:
                self.log(f"evolab: {self.url} {problem}; retrying until it answers")
                told = True
            time.sleep(delay)
            delay = min(delay * 2, 30.0)

    def get(self, path: str, params: dict | None = None) -> dict:
        return self.call("GET", path, params=params)

    def post(self, path: str, data: dict) -> dict:
        return self.call("POST", path, json.dumps(data).encode())

    # --- MLflow's protocol ----------------------------------------------------------------------

    def mlflow(self, endpoint: str, body: dict | None = None, get: bool = False) -> dict:
        if get:
            return self.get(MLFLOW + endpoint, params=body)
        return self.post(MLFLOW + endpoint, body or {})

    def experiment_id(self, name: str) -> str:
        """The experiment of that name (TEAM/NAME when you are in several teams), created when missing."""
        try:
            return self.mlflow("experiments/get-by-name", {"experiment_name": name}, get=True)["experiment"]["experiment_id"]
        except EvolabError as exc:
            if exc.code != "RESOURCE_DOES_NOT_EXIST":
                raise
        return self.mlflow("experiments/create", {"name": name})["experiment_id"]

    def create_run(self, name: str | None = None, experiment: str | None = None, tags: dict | None = None,
                   start_time: int | None = None) -> RunRef:
        """A new external run (in the experiment named, else the team's Default), running from `start_time` (ms;
        now by default)."""
        experiment_id = self.experiment_id(experiment) if experiment else "0"
        body = {"experiment_id": experiment_id, "start_time": int(start_time or time.time() * 1000),
                "tags": [{"key": k, "value": str(v)} for k, v in (tags or {}).items()]}
        if name:
            body["run_name"] = name
        return _run_ref(self.mlflow("runs/create", body)["run"])

    def set_tags(self, mlflow_run_id: str, tags: dict) -> None:
        self.mlflow("runs/log-batch", {"run_id": mlflow_run_id,
                                       "tags": [{"key": k, "value": str(v)} for k, v in tags.items()]})

    def find_run(self, ref: str) -> RunRef | None:
        """A run named by Evolab's id ("17"), MLflow's run id (32 hex digits) or its name: "TEAM/EXPERIMENT/RUN",
        "EXPERIMENT/RUN" or "RUN", the latest run of that name. None when there is none (yet); AmbiguousRun when a
        name without its team matches runs of more than one of the user's teams."""
        ref = str(ref).strip()
        if ref.isdigit():
            try:
                run = self.get(f"/api/runs/{ref}")
            except EvolabError as exc:
                if exc.status == 404:
                    return None
                raise
            if not run.get("mlflow_run_id"):
                raise EvolabError(400, f"run {ref} is trained by Evolab itself; report to a run trained elsewhere")
            return RunRef(id=run["id"], mlflow_run_id=run["mlflow_run_id"], name=run["name"])
        if len(ref) == 32 and all(c in "0123456789abcdef" for c in ref):
            try:
                return _run_ref(self.mlflow("runs/get", {"run_id": ref}, get=True)["run"])
            except EvolabError as exc:
                if exc.code == "RESOURCE_DOES_NOT_EXIST":
                    return None
                raise
        experiment, _, name = ref.rpartition("/")
        experiments = self._experiments()
        # the experiments the experiment part names (EXPERIMENT in any of the user's teams, or TEAM/EXPERIMENT); all
        # of them for a bare RUN
        named = [i for i, (team, bare) in experiments.items() if not experiment or experiment in (bare, f"{team}/{bare}")]
        found = self._runs_named(name, named)
        full_names = {}  # team -> TEAM/EXPERIMENT/RUN of a run found there
        for run in found:
            team, bare = experiments[run["info"]["experiment_id"]]
            full_names.setdefault(team, f"{team}/{bare}/{name}")
        if len(full_names) > 1:
            teams = sorted(full_names)
            raise AmbiguousRun(f"a run named {name!r} is in several of your teams ({', '.join(map(repr, teams))}): say "
                               f"which with TEAM/EXPERIMENT/RUN, e.g. {' or '.join(full_names[t] for t in teams)}")
        return _run_ref(max(found, key=lambda r: int(r["info"].get("start_time") or 0))) if found else None

    def _experiments(self) -> dict[str, tuple[str, str]]:
        """{experiment id: (its team, its name in the team)} of every experiment of the user's teams. MLflow's
        protocol names an experiment TEAM/NAME to a user of several teams, NAME to a user of one."""
        teams = sorted((t["name"] for t in self.get("/api/teams").get("teams", [])), key=len, reverse=True)
        found, body = {}, {"max_results": 1000}
        while True:
            page = self.mlflow("experiments/search", body)
            for e in page.get("experiments", []):
                if len(teams) == 1:
                    found[e["experiment_id"]] = (teams[0], e["name"])
                else:  # the longest team name it starts with (a team's name may hold a "/")
                    team = next((t for t in teams if e["name"].startswith(t + "/")), "")
                    found[e["experiment_id"]] = (team, e["name"][len(team) + 1:] if team else e["name"])
            if not page.get("next_page_token"):
                return found
            body = {**body, "page_token": page["next_page_token"]}

    def _runs_named(self, name: str, experiment_ids: list[str]) -> list[dict]:
        """Every active run of that name in those experiments, MAX_EXPERIMENTS_PER_SEARCH experiments a request."""
        runs = []
        for i in range(0, len(experiment_ids), MAX_EXPERIMENTS_PER_SEARCH):
            body = {"experiment_ids": experiment_ids[i:i + MAX_EXPERIMENTS_PER_SEARCH], "max_results": 1000,
                    "filter": f"attributes.run_name = '{_quoted(name)}'"}
            while True:
                page = self.mlflow("runs/search", body)
                runs.extend(page.get("runs", []))
                if not page.get("next_page_token"):
                    break
                body = {**body, "page_token": page["next_page_token"]}
        return runs

    def log_metrics(self, mlflow_run_id: str, step: int, values: dict, timestamp_ms: int | None = None) -> None:
        """One step's numbers (anything else is left out), as MLflow's log-batch."""
        now = timestamp_ms or int(time.time() * 1000)
        metrics = [{"key": k, "value": float(v), "timestamp": now, "step": int(step)}
                   for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        for i in range(0, len(metrics), 1000):  # MLflow's limit per log-batch
            self.mlflow("runs/log-batch", {"run_id": mlflow_run_id, "metrics": metrics[i:i + 1000]})

    def finish(self, mlflow_run_id: str, status: str = "FINISHED") -> None:
        """The run ended: FINISHED, FAILED or KILLED (MLflow's statuses)."""
        self.mlflow("runs/update", {"run_id": mlflow_run_id, "status": status, "end_time": int(time.time() * 1000)})

    # --- rollouts --------------------------------------------------------------------------------

    def post_rollouts(self, run_id: int, rollouts: list[dict], complete_through: int | None = None) -> dict:
        """Rollouts as JSON lines ({step, prompt, completion, index?, reward?, rewards?, advantage?, answer?,
        label?, length?, extras?}); the same batch sent twice is stored once. `complete_through`: every rollout of
        the steps up to it has now been sent (Evolab groups them at once). Returns {received, stored, duplicates}."""
        body = "".join(json.dumps(r, ensure_ascii=False, allow_nan=False, default=str) + "\n" for r in rollouts)
        path = f"/api/runs/{int(run_id)}/rollouts"
        if complete_through is not None:
            path += f"?complete_through={int(complete_through)}"
        return self.call("POST", path, body.encode(), content_type="application/x-ndjson")


def _run_ref(run: dict) -> RunRef:
    tags = {t["key"]: t["value"] for t in run.get("data", {}).get("tags", [])}
    return RunRef(id=int(tags["evolab.run_id"]), mlflow_run_id=run["info"]["run_id"], name=run["info"].get("run_name", ""))


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _error(status: int, text: bytes) -> EvolabError:
    """Both protocols' error bodies: Evolab's {"error", "field"?, "line"?} and MLflow's {"error_code", "message"}."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return EvolabError(status, (text or b"").decode("utf-8", "replace")[:500] or f"HTTP {status}")
    if "error_code" in body:
        return EvolabError(status, body.get("message", ""), code=body["error_code"])
    return EvolabError(status, str(body.get("error", body)), field=body.get("field"), line=body.get("line"))
