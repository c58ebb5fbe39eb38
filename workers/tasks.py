"""Celery tasks. Each takes IDs and is safe to deliver twice. Names are the contract with
the web side, which sends them by name (webapp/tasks.py). A task working on one run is watched: its failure shows on
the run and it is retried with backoff (workers/watched.py)."""
from celery import shared_task

from webapp.alerts import delivery, engine, failures
from webapp.prompts import uploads
from webapp.runs import lifecycle
from webapp.external import charting, grouping, similarity
from webapp.explorer import text_search
from webapp.tasks import (CHART_LOGGED_METRICS, CHECK_STALLED, DELETE_RUN_FILES, DELIVER_WEBHOOK, EMBED_EXTERNAL_GROUPS,
                          GROUP_EXTERNAL_ROLLOUTS, INDEX_ROLLOUT_TEXT, JUDGE_FAILED_RULES, JUDGE_RULE_BACKLOG,
                          PARSE_PROMPT_UPLOAD, REAP_RUNS, RESEND_EXTERNAL_ROLLOUTS, RESEND_METRIC_CHARTS,
                          RESEND_PROMPT_UPLOADS, RESEND_RULE_BACKLOGS, SEND_ALERT_EMAIL, TRAIN_RUN)

from .run_io import delete_run_dir
from .supervisor import supervise
from .watched import RETRIED, watched


@shared_task(name=TRAIN_RUN)
def train_run(run_id: int):
    """Train one run (only a queued run is claimed)."""
    return supervise(run_id)


@shared_task(name=DELETE_RUN_FILES)
def delete_run_files(run_id: int):
    """A deleted run's directory and checkpoints, on the workers' disk (sent to the run's queue)."""
    return delete_run_dir(run_id)


@shared_task(name=DELIVER_WEBHOOK, bind=True, max_retries=None)
def deliver_webhook(self, delivery_id: int):
    """POST one alert notification; failures retry with exponential backoff up to
    WEBHOOK_MAX_ATTEMPTS (each attempt recorded on the delivery row)."""
    delay = delivery.deliver(delivery_id)
    if delay is not None:
        raise self.retry(countdown=delay)


@shared_task(name=SEND_ALERT_EMAIL)
def send_alert_email(alert_id: int, event: str):
    return delivery.send_email(alert_id, event)


@shared_task(name=CHECK_STALLED)
def check_stalled_runs():
    """Periodic (celery beat in the alerts worker): running runs whose log went silent."""
    return lifecycle.check_stalled()


@shared_task(name=REAP_RUNS)
def reap_runs():
    """Periodic (celery beat): runs whose supervisor's lease expired are re-queued with resume or
    failed, and queued runs whose task message may be lost are sent again (lifecycle.reap)."""
    return lifecycle.reap()


@shared_task(name=PARSE_PROMPT_UPLOAD)
def parse_prompt_upload(upload_id: int):
    """Parse a large prompt file and save its set (webapp/prompts/uploads.py); a second delivery of a
    claimed or finished upload does nothing."""
    return uploads.parse_upload(upload_id)


@shared_task(name=RESEND_PROMPT_UPLOADS)
def resend_prompt_uploads():
    """Periodic (celery beat): uploads whose message was lost or whose worker died are sent again."""
    return uploads.resend_stale()


@shared_task(name=GROUP_EXTERNAL_ROLLOUTS, **RETRIED)
def group_external_rollouts(run_id: int):
    """Group the complete steps of a run trained elsewhere (webapp/external/grouping.py); a step is grouped in
    the transaction that deletes its waiting rollouts, so a second delivery finds nothing to do."""
    with watched(run_id, failures.GROUPING):
        return grouping.group_ready_steps(run_id)


@shared_task(name=CHART_LOGGED_METRICS, **RETRIED)
def chart_logged_metrics(run_id: int):
    """Chart the metrics a run logged through MLflow's protocol (webapp/external/charting.py); the points are
    deleted in the transaction that charts them, so a second delivery finds nothing to do."""
    with watched(run_id, failures.CHARTS):
        return charting.chart_waiting(run_id)


@shared_task(name=RESEND_METRIC_CHARTS)
def resend_metric_charts():
    """Periodic (celery beat): runs whose logged metrics wait for their charts with no task coming are sent again."""
    return charting.resend_stale()


@shared_task(name=EMBED_EXTERNAL_GROUPS, **RETRIED)
def embed_external_groups(run_id: int):
    """Similarity heatmaps of a run trained elsewhere's groups (webapp/external/similarity.py), under a lease."""
    with watched(run_id, failures.HEATMAPS):
        return similarity.embed_groups(run_id)


@shared_task(name=RESEND_EXTERNAL_ROLLOUTS)
def resend_external_rollouts():
    """Periodic (celery beat): runs whose reported rollouts wait with no grouping task coming are sent again."""
    return grouping.resend_stale()


@shared_task(name=INDEX_ROLLOUT_TEXT, **RETRIED)
def index_rollout_text(run_id: int):
    """The search's word index of a run's rollouts stored since it last ran (webapp/explorer/text_search.py); two at
    once are ordered by the run's index mark, the second finds nothing new."""
    with watched(run_id, failures.TEXT_INDEX):
        return text_search.catch_up_fully(run_id)


class RulesStillFail(Exception):
    pass


@shared_task(name=JUDGE_RULE_BACKLOG, **RETRIED)
def judge_rule_backlog(run_id: int):
    """The steps a long batch stored, judged by the alert rules in order after its ingestion (webapp/alerts/engine.py,
    judge_backlog); a failure shows on the run and is retried, and a second delivery finds no backlog."""
    with watched(run_id, failures.BACKLOG):
        return engine.judge_backlog(run_id)


@shared_task(name=RESEND_RULE_BACKLOGS)
def resend_rule_backlogs():
    """Periodic (celery beat): runs whose backlog of steps waits with no task coming get theirs again."""
    return engine.resend_stale_backlogs()


@shared_task(name=JUDGE_FAILED_RULES, **RETRIED)
def judge_failed_rules(run_id: int):
    """The alert rules that raised on a run, judged again at its last step (webapp/alerts/engine.py); while one still
    raises the task fails, and is retried with backoff. Once none is failing (judged here, or by the run's next
    step), a delivery does nothing."""
    still = engine.judge_failed_rules(run_id)
    if still:
        raise RulesStillFail(f"run {run_id}: {', '.join(failures.rule_task(k) for k in still)} still failing")
    return []
