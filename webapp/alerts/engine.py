"""Collapse monitoring (DESIGN §4.5): the one place alerts are opened, updated, resolved
and acknowledged, and their notifications queued. The rule logic itself is pure and
lives in webapp/alerts/rules.py; this module feeds it a run's history and persists its answer.

Called where events are ingested (webapp/runs/ingestion.py, every new step), when a run ends
failed (webapp/runs/lifecycle.py) and by the periodic stalled-run check."""
import logging
import math
from datetime import timedelta
from functools import lru_cache

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from rl.params import FieldError
from webapp.live import push_on_commit
from webapp import bulk
from webapp.metrics import series
from webapp.tasks import (DELIVER_WEBHOOK, JUDGE_FAILED_RULES, JUDGE_RULE_BACKLOG, SEND_ALERT_EMAIL, send,
                          send_on_commit)

from . import failures
from .rule_specs import RULES, STEP_RULE_KINDS, resolve_thresholds
from .rules import (HEAD_STEPS, QUIET_STEPS_TO_RESOLVE, TAIL_STEPS, History, evaluate_run_failed, evaluate_stalled,
                    evaluate_step_rules)
from .models import Alert, RuleBacklog, TeamAlertRules, Webhook, WebhookDelivery

log = logging.getLogger(__name__)

# Alerts a run's end leaves as they are (end_of_run): news of the end itself, and of work that outlives the run.
OUTLIVE_THEIR_RUN = ("run_failed", failures.KIND)
# What the rules read: each rule's own metrics, and the signals they all may consult (whether the policy moved,
# a second signal agreeing with a fall of entropy)
RULE_METRICS = sorted({name for spec in RULES.values() for name in spec.metrics}
                      | {"kl", "clip_ratio/low", "clip_ratio/high", "majority_ratio", "unique_answers",
                         "majority_flip_rate", "invalid_ratio", "truncated_ratio"})


def alerts_queue() -> str:
    return settings.QUEUE_PREFIX + "alerts"


def thresholds_for(run) -> dict:
    """Defaults, then the team's overrides, then the run's (hyperparameters["alert_rules"])."""
    return resolve_thresholds(team_overrides(run.team_id), (run.hyperparameters or {}).get("alert_rules") or {})


def team_overrides(team_id: int) -> dict:
    rows = bulk.fetch(f"SELECT overrides FROM {TeamAlertRules._meta.db_table} WHERE team_id = %s", [team_id])
    return (bulk.json_value(rows[0][0]) if rows else None) or {}


def _finite(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def _load_by_step(run, up_to_step: int | None, tail_from: int | None) -> dict:
    """{step: {name: value}} of the rules' metrics at the run's first HEAD_STEPS steps (start values) and at the
    TAIL_STEPS steps before tail_from (default: up_to_step) up to up_to_step (default: the last logged step). Each
    series is read by step range (webapp/metrics/series.py), never scanned whole."""

    names = series.names(run, among=RULE_METRICS, prefixes=("eval/",))
    first = series.first_step(run)
    if not names or first is None or (up_to_step is not None and first > up_to_step):
        return {}
    if up_to_step is None:
        up_to_step = run.last_step
    tail_from = up_to_step if tail_from is None else tail_from
    head = (None, min(first + HEAD_STEPS, up_to_step))
    tail = (max(tail_from - TAIL_STEPS, first + HEAD_STEPS + 1), up_to_step)
    by_step: dict[int, dict[str, float | None]] = {}
    for points in series.read_ranges(run, names, [head, tail]):
        for name, pairs in points.items():
            for step, value in pairs:
                by_step.setdefault(step, {})[name] = _finite(value)
    return by_step


@lru_cache(maxsize=4096)  # asked for each value of every ingested step
def _is_rule_metric(name: str) -> bool:
    return name in _RULE_METRIC_SET or name.startswith("eval/")


_RULE_METRIC_SET = frozenset(RULE_METRICS)


class RuleMemory:
    """What the rules read of one run (its first HEAD_STEPS steps and the last TAIL_STEPS), kept by
    ingestion between two calls for the same run so a live run's next step is judged without
    reading its history back: add() the new events, and it holds what _load_by_step would read."""

    def __init__(self, by_step: dict):
        self.by_step = by_step

    def add(self, events: list[dict]) -> None:
        """Metrics and eval events just stored (metrics with their derived health values); a step
        logged again replaces its values, as it does in the database."""
        for e in events:
            if e["type"] not in ("metrics", "eval") or not isinstance(e.get("step"), int):
                continue
            prefix = "eval/" if e["type"] == "eval" else ""
            values = {prefix + k: _finite(v) for k, v in e.get("values", {}).items() if _is_rule_metric(prefix + k)}
            if values:
                self.by_step.setdefault(e["step"], {}).update(values)

    def forget_the_middle(self) -> None:
        """Drop the steps no later judgement reads: after the head, before the last TAIL_STEPS."""
        if not self.by_step:
            return
        first, last = min(self.by_step), max(self.by_step)
        for step in [s for s in self.by_step if first + HEAD_STEPS < s < last - TAIL_STEPS]:
            del self.by_step[step]


def _history(by_step: dict, run) -> History:
    steps = sorted(by_step)
    names = sorted({n for values in by_step.values() for n in values})
    metrics = {n: [by_step[s].get(n) for s in steps] for n in names}
    return History(steps=steps, metrics=metrics, clean=True, **size_of(run))


def size_of(run) -> dict:
    """What the rules know of the run's size (History's fields): its max_completion_length, and its prompts per step
    and votes, which a share's counts are judged on, unknown for a run trained elsewhere (its figures are judged in
    their own noise)."""
    values = run.hyperparameters or {}
    wanted = ("max_completion_length",) if run.is_external else ("max_completion_length", "prompts_per_step", "n_votes")
    return {name: int(values[name]) for name in wanted
            if isinstance(values.get(name), (int, float)) and not isinstance(values[name], bool) and values[name] > 0}


# --- the rules' entry points -------------------------------------------------------------


# A batch of more new steps than this is judged by a worker (judge_backlog), after the ingestion that stored it has
# committed: an archive imported whole (10,000 steps: evolab sync) or a restarted supervisor catching up is charted at
# once and its alerts follow, where the rules (about 0.6 ms a step) held its charts back by seconds. Fewer are judged
# in the ingesting transaction, as a live run's steps are.
BACKLOG_STEPS = 1000
# the steps a backlog task judges in one transaction (one turn under the run's row lock)
BACKLOG_TURN_STEPS = 2000
# a backlog whose task was sent this long ago and is still there is sent again (a lost message, a dead worker)
BACKLOG_RESEND_SECONDS = 120


def judge_new_steps(run, steps: list[int], memory: RuleMemory | None) -> RuleMemory | None:
    """Ingestion's judgement of the steps it stored (under the run's row lock): at once (evaluate_steps), or, for a
    batch of more than BACKLOG_STEPS or while the run has a backlog, by a worker (RuleBacklog, judge_backlog), so the
    rules see every step once, in order. Returns the rules' memory for the next call (None: read it again)."""
    if not steps:
        return memory
    # a memory kept from the last call means that call judged: no backlog was left (only ingestion leaves one)
    backlog = None if memory is not None else RuleBacklog.objects.filter(run_id=run.pk).first()
    if backlog is None and len(steps) <= BACKLOG_STEPS:
        return evaluate_steps(run, steps, memory)
    if backlog is None:
        RuleBacklog.objects.create(run_id=run.pk, first_step=steps[0], requested_at=timezone.now())
        send_on_commit(JUDGE_RULE_BACKLOG, [run.pk], queue=alerts_queue())
    return None


def judge_backlog(run_id: int) -> int:
    """Judge the run's backlog (RuleBacklog) from its first step to the run's last, BACKLOG_TURN_STEPS a transaction
    under the run's row lock, as ingestion judges; the last turn deletes it, so the run's next ingestion judges
    itself. Safe to run twice: a second finds no backlog. Returns how many steps were judged."""
    run_model = Alert._meta.get_field("run").related_model  # the alerts app never imports the runs app
    judged = 0
    while True:
        with transaction.atomic():
            run = run_model.objects.select_for_update(no_key=True).filter(pk=run_id).first()
            backlog = RuleBacklog.objects.filter(run_id=run_id).first()
            if run is None or backlog is None:
                return judged
            last = run.last_step if run.last_step is not None else backlog.first_step
            end = min(backlog.first_step + BACKLOG_TURN_STEPS - 1, last)
            steps = series.metric_steps(run, backlog.first_step, end)
            failures.at_step(backlog.first_step)  # a failure from here is this turn's (workers/watched.py)
            evaluate_steps(run, steps)
            judged += len(steps)
            if end >= last:
                backlog.delete()
                return judged
            RuleBacklog.objects.filter(run_id=run_id).update(first_step=end + 1)


def resend_stale_backlogs(now=None) -> list[int]:
    """Runs whose backlog's task was sent BACKLOG_RESEND_SECONDS ago and is still there get it again. Periodic."""
    now = now or timezone.now()
    stale = list(RuleBacklog.objects.filter(requested_at__lt=now - timedelta(seconds=BACKLOG_RESEND_SECONDS))
                 .values_list("run_id", flat=True))
    stale = failures.not_retrying(stale, failures.BACKLOG, now)
    for run_id in stale:
        RuleBacklog.objects.filter(run_id=run_id).update(requested_at=now)
        send(JUDGE_RULE_BACKLOG, [run_id], queue=alerts_queue())
    return stale


def evaluate_steps(run, steps: list[int], memory: RuleMemory | None = None,
                   again: list[str] | None = None) -> RuleMemory | None:
    """Ingestion stored these new steps: run every step rule at each, in order, so an alert
    fires at the step where its condition first held. New events also end a `stalled` alert.

    Each rule is judged apart: one that raises is logged and becomes the run's `processing_failed` alert (naming
    the rule, the step and the error), and judged again later by a task (judge_failed_rules) with backoff, while
    the others' findings are applied and the caller's transaction (ingestion's, grouping's) commits. A failing rule
    that judges a later step is taken off that alert.

    The run's active alerts are read once per batch and written only when something changes: a
    healthy step costs no query, and an alert that holds over many steps of a batch is saved once
    at the end (its `updates` counting every step), so a restarted supervisor catching up on
    thousands of steps stays fast.

    `memory`: what the rules read of this run, kept since the caller's last call with these steps
    added (RuleMemory); None reads it from the database. Returns the memory for the next call.
    `again`: only these rules, judged again (judge_failed_rules), not new steps."""
    if not steps:
        return memory
    thresholds = thresholds_for(run)
    kinds = STEP_RULE_KINDS if again is None else again
    steps = sorted(set(steps))
    if memory is None:  # one read for the whole batch
        memory = RuleMemory(_load_by_step(run, up_to_step=steps[-1], tail_from=steps[0]))
    history = _history(memory.by_step, run)
    with transaction.atomic(savepoint=False):  # inside ingestion's transaction: no savepoint round trips
        # a healthy run has none: one raw look, and the rows are read (and locked) only when there are
        any_active = bulk.fetch(f"SELECT 1 FROM {Alert._meta.db_table} WHERE run_id = %s AND state IN "
                                f"({bulk.placeholders(Alert.ACTIVE)})", [run.pk, *Alert.ACTIVE])
        active = {a.rule: a for a in Alert.objects.select_for_update().filter(run=run, state__in=Alert.ACTIVE)} \
            if any_active else {}
        pending = {}  # rule -> updates held in memory since the alert was last saved
        failing = {}  # rule -> (step, error) where it raised, while it raises
        for step in steps:
            for kind, finding in _judge(run, history.at(step), thresholds, kinds, step, failing).items():
                alert = active.get(kind)
                if finding is None:
                    if alert is not None and step - alert.last_step >= QUIET_STEPS_TO_RESOLVE:
                        _save_update(alert, run, pending.pop(kind, 0))
                        _resolve_active(run, kind, step)
                        del active[kind]
                elif alert is None:
                    active[kind] = apply_finding(run, kind, finding, step)
                else:
                    escalated = Alert.SEVERITY_RANK[finding.severity] > Alert.SEVERITY_RANK[alert.severity]
                    _update_in_memory(alert, finding)
                    pending[kind] = pending.get(kind, 0) + 1
                    if escalated:
                        _save_update(alert, run, pending.pop(kind))
                        _notify(alert, "escalated")
        for kind, count in pending.items():
            _save_update(active[kind], run, count)
        if "stalled" in active and again is None:
            _resolve_active(run, "stalled", steps[-1])
        _note_rule_failures(run, failures.rules_of(failures.failures_of(active.get(failures.KIND))), kinds, failing,
                            retry=again is None)
    memory.forget_the_middle()
    return memory


def _judge(run, history: History, thresholds: dict, kinds, step: int, failing: dict) -> dict:
    """evaluate_step_rules, one rule at a time: a rule that raises is logged (its first failure of the batch, with
    the traceback) and noted in `failing` {kind: (step, error)}, and stops no other; one that judges leaves it."""
    results = {}
    for kind in kinds:
        try:
            results.update(evaluate_step_rules(history, thresholds, (kind,)))
        except Exception as exc:  # noqa: BLE001 - any bug of a rule; the others go on, and the alert says it
            if kind not in failing:
                log.exception("run %s: alert rule %s failed at step %s", run.pk, kind, step)
            failing[kind] = (step, exc)
        else:
            failing.pop(kind, None)
    return results


def _note_rule_failures(run, failed_before: list[str], kinds, failing: dict, retry: bool) -> None:
    """After a batch: the rules that raised at its last judgement go on the run's processing_failed alert (a new
    failure is judged again by a task, with backoff); those that failed before and judged now come off it."""
    for kind, (step, error) in sorted(failing.items()):
        record_failure(run, failures.rule_task(kind), step, error)
        if retry and kind not in failed_before:
            send_on_commit(JUDGE_FAILED_RULES, [run.pk], queue=alerts_queue(),
                           countdown=settings.TASK_RETRY_BASE_SECONDS)
    for kind in failed_before:
        if kind in kinds and kind not in failing:
            clear_failure(run.pk, failures.rule_task(kind))


def judge_failed_rules(run_id: int) -> list[str]:
    """The rules whose judgement failed on the run (its processing_failed alert names them), judged again at its
    last step under its row lock, as ingestion judges; the ones that still fail (judge_failed_rules the task raises
    then, so that Celery retries it with backoff). Nothing to do, and [], once none is failing."""
    run_model = Alert._meta.get_field("run").related_model  # the alerts app never imports the runs app
    with transaction.atomic():
        run = run_model.objects.select_for_update(no_key=True).filter(pk=run_id).first()
        alert = Alert.objects.filter(run_id=run_id, rule=failures.KIND, state__in=Alert.ACTIVE).first()
        kinds = failures.rules_of(failures.failures_of(alert))
        if run is None or not kinds or run.last_step is None:
            return []
        evaluate_steps(run, [run.last_step], again=kinds)
        alert = Alert.objects.filter(run_id=run_id, rule=failures.KIND, state__in=Alert.ACTIVE).first()
        return [kind for kind in failures.rules_of(failures.failures_of(alert)) if kind in kinds]


def record_failure(run, task: str, step: int | None, error) -> Alert | None:
    """`task` failed on the run at `step` (None: at no step in particular) with `error` (an exception, or its text):
    the run's processing_failed alert opens, or says it too (webapp/alerts/failures.py). None when the team or the
    run turned the rule off."""
    rule = thresholds_for(run)[failures.KIND]
    if not rule["enabled"]:
        return None
    return revise(run, failures.KIND, lambda alert: failures.finding(
        failures.with_failure(failures.failures_of(alert), task, step, error),
        alert.severity if alert is not None else rule["severity"]))


def clear_failure(run_id: int, task: str) -> Alert | None:
    """`task` succeeded on the run: off the run's processing_failed alert, which resolves once no task is left
    failing. One indexed read when nothing failed (every task's success asks)."""
    alert = (Alert.objects.filter(run_id=run_id, rule=failures.KIND, state__in=Alert.ACTIVE)
             .select_related("run").first())
    if alert is None or task not in failures.failures_of(alert):
        return None

    def without(current):
        left = {t: f for t, f in failures.failures_of(current).items() if t != task}
        return failures.finding(left, current.severity) if left else None

    return revise(alert.run, failures.KIND, without)


def _update_in_memory(alert: Alert, finding) -> None:
    alert.severity = finding.severity
    alert.message = finding.message
    alert.values = _json_values(finding.values)
    alert.last_step = finding.step


def _save_update(alert: Alert, run, count: int) -> None:
    """Store `count` updates made in memory (_update_in_memory) and tell the run's watchers."""
    if not count:
        return
    alert.updates += count
    alert.save(update_fields=["severity", "message", "values", "last_step", "updates", "updated_at"])
    alert.run = run
    _announce(alert)


def run_failed(run) -> Alert | None:
    """The run failed: its `run_failed` alert opens, and its other alerts close with it (end_of_run)."""
    finding = evaluate_run_failed(run.message or "the run failed", run.last_step, thresholds_for(run))
    end_of_run(run)
    return apply_finding(run, "run_failed", finding, run.last_step) if finding else None


def judge_silence(run, silent_seconds: float) -> bool:
    """Open (or keep) the run's `stalled` alert when its log has been silent for `silent_seconds`, beyond its
    rule's limit; whether it is stalled. The periodic check of running runs (lifecycle.check_stalled) calls it."""
    finding = evaluate_stalled(max(0.0, silent_seconds), run.last_step, thresholds_for(run))
    if finding is not None:
        apply_finding(run, "stalled", finding, run.last_step)
    return finding is not None


def end_of_run(run) -> None:
    """A run that ended takes its active alerts out of the rules' hands, telling nobody (the condition did not
    clear; the run stopped): one nobody acknowledged is `ended` and stays in the default views until a member
    acknowledges it; an acknowledged one was seen, and is `closed`. Its `run_failed` alert is the news of how it
    ended, and a `processing_failed` one is about work that goes on after the run (its last steps' grouping): both
    stay as they are."""
    with transaction.atomic():
        for alert in Alert.objects.select_for_update().filter(run=run, state__in=Alert.ACTIVE).exclude(
                rule__in=OUTLIVE_THEIR_RUN):
            _end(alert, run, Alert.ENDED if alert.state == Alert.OPEN else Alert.CLOSED, None)


# --- persistence ---------------------------------------------------------------------------


def apply_finding(run, kind: str, finding, step: int | None) -> Alert | None:
    """Open, update or resolve the (run, kind) alert. `finding` None means the rule was
    judged and its condition does not hold."""
    if finding is None:
        return _resolve_active(run, kind, step)
    return revise(run, kind, lambda alert: finding)


def revise(run, kind: str, revised) -> Alert | None:
    """Open, update or resolve the run's active `kind` alert with `revised(that alert, or None)`: a Finding, or None
    when the condition does not hold (an active alert resolves). The finding may build on the alert it is given
    (processing_failed adds a failing task to those it names): when another process opens the alert between our
    read and write, `revised` is asked again with that one."""
    with transaction.atomic():
        alert = Alert.objects.select_for_update().filter(run=run, rule=kind, state__in=Alert.ACTIVE).first()
        finding = revised(alert)
        if alert is None and finding is not None:
            try:
                with transaction.atomic():
                    alert = Alert.objects.create(
                        team_id=run.team_id, run=run, rule=kind, severity=finding.severity, step=finding.step,
                        last_step=finding.step, message=finding.message, values=_json_values(finding.values),
                    )
            except IntegrityError:
                alert = Alert.objects.select_for_update().get(run=run, rule=kind, state__in=Alert.ACTIVE)
                finding = revised(alert)
            else:
                alert.run = run
                _announce(alert)
                _notify(alert, "opened")
                return alert
        if alert is None:
            return None
        if finding is None:
            _end(alert, run, Alert.RESOLVED, None)
            _notify(alert, "resolved")
            return alert
        escalated = Alert.SEVERITY_RANK[finding.severity] > Alert.SEVERITY_RANK[alert.severity]
        _update_in_memory(alert, finding)
        _save_update(alert, run, 1)
        if escalated:
            _notify(alert, "escalated")
    return alert


def _resolve_active(run, kind: str, step: int | None) -> Alert | None:
    with transaction.atomic():
        alert = Alert.objects.select_for_update().filter(run=run, rule=kind, state__in=Alert.ACTIVE).first()
        if alert is None:
            return None
        _end(alert, run, Alert.RESOLVED, step)
        _notify(alert, "resolved")
    return alert


def _end(alert: Alert, run, state: str, step: int | None) -> None:
    """The active alert leaves the active list (resolved or closed), at `step` when given, and its pages are told."""
    alert.state = state
    alert.resolved_at = timezone.now()
    if step is not None:
        alert.last_step = step
    alert.save(update_fields=["state", "resolved_at", "last_step", "updated_at"])
    alert.run = run
    _announce(alert)


def acknowledge(alert: Alert, user) -> Alert:
    """Someone is on it: an open alert stays active (and keeps updating) but stops being `open`; an alert whose run
    ended before anyone saw it (`ended`) is closed. An acknowledged one keeps who acknowledged it."""
    with transaction.atomic():
        updated = _acknowledge_rows(Alert.objects.filter(pk=alert.pk), user)
        alert.refresh_from_db()
        if updated:
            _announce(alert)
    return alert


def _acknowledge_rows(alerts, user) -> int:
    """Acknowledge these alerts (open -> acknowledged, ended -> closed) by `user`; how many changed."""
    now = timezone.now()
    return sum(alerts.filter(state=before).update(state=after, acknowledged_by=user, acknowledged_at=now,
                                                  updated_at=now)
               for before, after in ((Alert.OPEN, Alert.ACKNOWLEDGED), (Alert.ENDED, Alert.CLOSED)))


def acknowledge_several(team, ids: list[int], user) -> list[Alert]:
    """Acknowledge the team's alerts `ids` together, all or none: FieldError on `ids` (404) for an id that is not
    an alert of this team (another team's reads like a missing one), (409) for one already resolved or closed,
    so a page whose list went stale while the user ticked boxes learns which. An acknowledged one keeps who
    acknowledged it; an ended one (its run ended before anyone saw it) is closed. Returns the alerts in the order
    of `ids`."""
    with transaction.atomic():
        found = {a.pk: a for a in Alert.objects.select_for_update().filter(team=team, pk__in=ids)}
        missing = next((pk for pk in ids if pk not in found), None)
        if missing is not None:
            raise FieldError("ids", f"no alert with id {missing} in team {team.name!r}", 404)
        done = [found[pk] for pk in ids if found[pk].state not in Alert.CURRENT]
        if done:
            listed = ", ".join(f"alert {a.pk} is already {a.state}" for a in done)
            raise FieldError("ids", f"{listed}: only alerts not yet resolved or closed can be acknowledged; none was",
                             409)
        _acknowledge_rows(Alert.objects.filter(pk__in=ids), user)
        changed = [pk for pk in ids if found[pk].state in Alert.UNACKNOWLEDGED]
        fresh = {a.pk: a for a in Alert.objects.filter(pk__in=ids).select_related("run", "acknowledged_by")}
        for pk in changed:
            _announce(fresh[pk])
    return [fresh[pk] for pk in ids]


def resolve(alert: Alert) -> Alert:
    """Resolved by hand (e.g. the run was fixed by a clone); a recurrence opens a new alert."""
    return _resolve_active(alert.run, alert.rule, None) or alert


def _json_values(values: dict) -> dict:
    return {k: _finite(v) if isinstance(v, float) else v for k, v in (values or {}).items()}


def alert_message(alert: Alert) -> dict:
    return {"type": "alert", **alert.to_json()}


def _announce(alert: Alert) -> None:
    message = alert_message(alert)
    push_on_commit(run_id=alert.run_id, team_id=alert.team_id, messages=[message])


# --- notifications -------------------------------------------------------------------------


def run_url(run) -> str:
    return f"{settings.EVOLAB_BASE_URL.rstrip('/')}/runs/{run.pk}/"


def slack_escaped(text: str) -> str:
    """User text (run names, prompt ids, messages quoting them) as Slack shows it literally: its three control
    characters escaped (api.slack.com/reference/surfaces/formatting#escaping), so a run named "<!channel>"
    pings nobody and "<https://x|y>" is no link."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def notification_text(alert: Alert, event: str) -> str:
    """Slack-compatible `text` (mrkdwn link syntax); plain enough for any chat webhook."""
    icon = {"critical": ":rotating_light:", "warning": ":warning:", "info": ":information_source:"}[alert.severity]
    if event == "resolved":
        icon, verb = ":white_check_mark:", "resolved"
    else:
        verb = {"opened": "opened", "escalated": "escalated", "test": "test"}.get(event, event)
    step = f" at step {alert.step}" if alert.step is not None else ""
    return (f"{icon} [{alert.severity}] {alert.rule} {verb} on run #{alert.run_id} "
            f"<{run_url(alert.run)}|{slack_escaped(alert.run.name)}>{step}: {slack_escaped(alert.message)}")


def webhook_payload(alert: Alert, event: str) -> dict:
    return {"text": notification_text(alert, event), "event": event, "alert": alert.to_json(), "run_url": run_url(alert.run)}


def send_test(webhook: Webhook, user) -> WebhookDelivery:
    """A test notification to one webhook ("send a test" on the team's alert settings): a delivery row like an
    alert's, sent by the alerts worker with the same retries, so the admin sees in the deliveries table whether
    the address works and, if not, why."""
    text = (f":information_source: Evolab test from team {slack_escaped(webhook.team.name)}, "
            f"sent by {slack_escaped(user.get_username())}: this webhook works")
    delivery = WebhookDelivery.objects.create(webhook=webhook, alert=None, event="test",
                                              payload={"text": text, "event": "test", "alert": None, "run_url": None})
    send_on_commit(DELIVER_WEBHOOK, [delivery.pk], queue=alerts_queue())
    deliveries_changed(webhook.team_id)
    return delivery


DELIVERIES_MESSAGE = {"type": "webhook_deliveries"}


def deliveries_changed(team_id: int) -> None:
    """Tell the team's open pages that a webhook delivery was queued or tried (the alert settings page re-reads its
    table: the rows hold webhook URLs, secrets a member's socket must not carry)."""
    push_on_commit(team_id=team_id, messages=[DELIVERIES_MESSAGE])


def _notify(alert: Alert, event: str) -> None:
    """Queue a delivery to every active webhook of the team, and an email on open and
    escalation. Deliveries are rows first, so each attempt and its outcome is listed."""
    payload = webhook_payload(alert, event)
    for webhook in Webhook.objects.filter(team_id=alert.team_id, active=True):
        delivery = WebhookDelivery.objects.create(webhook=webhook, alert=alert, event=event, payload=payload)
        send_on_commit(DELIVER_WEBHOOK, [delivery.pk], queue=alerts_queue())
        deliveries_changed(alert.team_id)
    if event in ("opened", "escalated"):
        send_on_commit(SEND_ALERT_EMAIL, [alert.pk, event], queue=alerts_queue())
