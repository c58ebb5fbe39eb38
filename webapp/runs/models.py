from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from rl.methods import METHODS
from webapp.accounts.models import Membership, Team
from webapp.bulk import fetch


class RunQuerySet(models.QuerySet):
    def visible_to(self, user):
        # with its engine's job, which every page and run JSON shows (one join, never a query per run)
        return self.filter(team__in=Team.objects.of(user), deleted_at__isnull=True).select_related("engine_job")

    def visible_id(self, user, pk) -> int | None:
        """pk when that run exists and `user` may see it (visible_to's rule: a member of its team), else
        None. One fixed statement for the read endpoints that need nothing of the run but its id (the
        metrics API answers in a few milliseconds; compiling visible_to cost a millisecond of them)."""
        if user is None or not user.is_authenticated:
            return None
        rows = fetch(f"SELECT r.id FROM {self.model._meta.db_table} r WHERE r.id = %s AND r.deleted_at IS NULL AND r.team_id IN "
                     f"(SELECT m.team_id FROM {Membership._meta.db_table} m WHERE m.user_id = %s)", [pk, user.pk])
        return rows[0][0] if rows else None


class Run(models.Model):
    QUEUED, PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
        "queued", "pending", "running", "succeeded", "failed", "cancelled")
    STATES = [(s, s) for s in (QUEUED, PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED)]
    TERMINAL = {SUCCEEDED, FAILED, CANCELLED}
    # A worker's supervisor holds the run (its lease): `pending` while the cluster engine it submitted the
    # run to has not started it yet (DESIGN §4.9), `running` once it trains.
    SUPERVISED = (PENDING, RUNNING)
    # Who trains it (DESIGN §4.8): a worker of this Evolab, or a trainer anywhere that reports over HTTP
    # (MLflow's protocol, the rollouts endpoint); an external run has no worker and may have no prompt set.
    EVOLAB, EXTERNAL = "evolab", "external"
    SOURCES = [(s, s) for s in (EVOLAB, EXTERNAL)]

    name = models.CharField(max_length=200)
    # a method of rl/methods; for an external run, the one its evolab.method tag names, or "" (unknown)
    method = models.CharField(max_length=50, blank=True)
    team = models.ForeignKey("accounts.Team", on_delete=models.PROTECT, related_name="runs")
    source = models.CharField(max_length=10, choices=SOURCES, default=EVOLAB, db_default=EVOLAB)
    # an external run's MLflow run id (32 hex digits), shown on its page
    mlflow_run_id = models.CharField(max_length=32, unique=True, null=True, blank=True)
    # what trains an external run (verl, trl, openrlhf): its evolab.trainer tag, else told by its metric names
    # (rl.trainer_metrics.detect_trainer); "" while unknown
    trainer = models.CharField(max_length=20, blank=True)
    # an external run's prompts are gathered into a set of their own as its rollouts arrive (webapp/external)
    prompt_set = models.ForeignKey("prompts.PromptSet", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="runs")
    # A labelled set the trainer evaluates on every eval_every steps (pass@1, pass@k, maj@k).
    eval_prompt_set = models.ForeignKey("prompts.PromptSet", null=True, blank=True, on_delete=models.PROTECT,
                                        related_name="eval_runs")
    tags = models.JSONField(default=list, blank=True)
    model = models.CharField(max_length=500, default="default")
    # the sentence-transformers folder on the worker that embeds the rollouts (similarity, EVOL-RL's novelty);
    # blank: the bundled all-MiniLM-L6-v2
    embedding_model = models.CharField(max_length=500, blank=True, default="")
    hyperparameters = models.JSONField(default=dict)
    max_steps = models.PositiveIntegerField()
    seed = models.IntegerField(default=0)
    queue = models.CharField(max_length=50, default="cpu")
    # GPUs the trainer uses (on each node): 0 or 1 starts `python -m rl.train`, more starts it under
    # `accelerate launch` with the DeepSpeed config shipped in rl/.
    gpus = models.PositiveSmallIntegerField(default=0)
    # Nodes the run trains on: more than one needs a cluster engine (DESIGN §4.9)
    nodes = models.PositiveSmallIntegerField(default=1, db_default=1)
    # (The engine that trains it and its job: `job`, an EngineJob row.)
    # A run's own Slurm options, over the worker's: partition, account, time_limit, sbatch (extra options)
    engine_options = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="runs")
    cloned_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="clones")

    state = models.CharField(max_length=20, choices=STATES, default=QUEUED)
    message = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    stderr_tail = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Set when a resume is queued, read by the supervisor to start the child with --resume.
    resume_requested = models.BooleanField(default=False)
    last_seq = models.IntegerField(default=-1)
    last_step = models.IntegerField(null=True, blank=True)
    # Steps below this are kept as MetricChunk rows, steps from it on as MetricPoint rows (webapp/metrics/series.py).
    series_closed_until = models.IntegerField(default=0)
    # Times the run was re-queued with resume after losing its supervisor (bounded by RUN_AUTO_RESUMES).
    auto_resumes = models.PositiveSmallIntegerField(default=0)
    # When its train task was last sent: a queued run whose message was lost is sent again.
    dispatched_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Deleted through MLflow's protocol (runs/delete; runs/restore brings it back): no page or API shows it.
    deleted_at = models.DateTimeField(null=True, blank=True)
    # A member's notes on the run, shown on its page and in compare.
    notes = models.TextField(blank=True, default="", db_default="")
    # Archived: out of the run list unless it asks for archived runs; kept whole, its page and API as before.
    archived_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.name} ({self.method})"

    def save(self, *args, **kwargs):
        # A run belongs to the team of the prompt set it trains on.
        if self.team_id is None and self.prompt_set_id is not None:
            self.team_id = self.prompt_set.team_id
        super().save(*args, **kwargs)

    @property
    def run_dir(self) -> Path:
        return settings.RUNS_DIR / str(self.pk)

    @property
    def is_external(self) -> bool:
        return self.source == self.EXTERNAL

    @property
    def spec(self):
        """The run's Method (rl/methods), or None for an external run whose method is not one of them."""
        return METHODS.get(self.method)

    @property
    def effective_hyperparameters(self) -> dict:
        """The run's hyperparameters with its method's defaults under them (a run stored before a
        hyperparameter existed, or a test's partial one, still reads every value)."""
        return self.spec.with_defaults(self.hyperparameters) if self.spec else dict(self.hyperparameters)

    @property
    def total_steps(self) -> int | None:
        """Steps the run will log (Method.total_steps: R-Zero counts its phases instead of max_steps); None
        for an external run whose trainer did not say."""
        if self.spec is None:
            return self.max_steps or None
        return self.spec.total_steps(self.hyperparameters, self.max_steps)

    @property
    def progress_percent(self) -> int | None:
        """Steps logged of the steps planned, in percent (its progress bar's text); None while the total is unknown."""
        total = self.total_steps
        if not total:
            return None
        return max(0, min(100, round(100 * (self.last_step or 0) / total)))

    @property
    def is_terminal(self) -> bool:
        return self.state in self.TERMINAL

    def training_clock(self) -> tuple[float, datetime | None]:
        """(seconds trained in the run's ended stretches of `running`, start of the stretch under way or None), from
        its history: elapsed time is training time, so the hours the run waited queued, or its worker was
        stopped, do not count. A run whose history predates its claims (migration 0017) counts started → finished."""
        seconds, since, ran = 0.0, None, False
        for at, state in self.transitions.order_by("id").values_list("at", "state"):
            if state == self.RUNNING:
                ran = True
                since = since or at
            elif since is not None:
                seconds += (at - since).total_seconds()
                since = None
        if not ran and self.started_at:
            if self.finished_at:
                seconds = max(0.0, (self.finished_at - self.started_at).total_seconds())
            elif self.state == self.RUNNING:
                since = self.started_at
        return seconds, since

    def clock_json(self) -> dict:
        """The run's times as its page and list show them (one definition, on load and in every live message):
        `started_at` (when a worker first took it), and elapsed as `trained_seconds` plus, while it trains, the
        time since `training_since`."""
        seconds, since = self.training_clock()
        return {
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "trained_seconds": round(seconds, 3),
            "training_since": since.isoformat() if since else None,
        }

    def get_absolute_url(self):
        return reverse("runs:detail", args=[self.pk])

    def trainer_config(self, prompts_path: Path, eval_prompts_path: Path | None = None, model: str = "default",
                       embedding_model: str | None = None) -> dict:
        """The trainer's CONFIG.json (DESIGN §4.1), with the folders the worker found for the run's model names
        (model_names.resolve). Alert thresholds ride in the run's hyperparameters for the API's sake but are the
        server's business, not the trainer's."""
        return {
            "method": self.method,
            "model": model,
            "prompts": str(prompts_path),
            "eval_prompts": str(eval_prompts_path) if eval_prompts_path else None,
            "embedding_model": embedding_model,
            "max_steps": self.max_steps,
            "seed": self.seed,
            "hyperparameters": self.training_hyperparameters(),
        }

    @property
    def job(self) -> "EngineJob | None":
        """The job an engine trains the run as; None before a worker took it."""
        try:
            return self.engine_job
        except EngineJob.DoesNotExist:
            return None

    def engine_json(self) -> dict | None:
        """The engine that trains the run and its job (DESIGN §4.9), None before a worker took it."""
        job = self.job
        if job is None:
            return None
        return {"name": job.engine, "title": job.title, "job_id": job.job_id or None, "reason": job.reason,
                "log_tail": job.log_tail, "options": self.engine_options}

    def training_hyperparameters(self) -> dict:
        return {k: v for k, v in self.hyperparameters.items() if k != "alert_rules"}

    def rzero_iterations(self) -> list[int]:
        """R-Zero iterations with an ingested question set (`questions` events), never read from RUN_DIR:
        the web process does not read a worker's disk (DESIGN §3)."""
        return list(self.rzero_question_rows.order_by("iteration").values_list("iteration", flat=True).distinct())

    def rzero_questions(self, iteration: int) -> list[dict]:
        """The iteration's question pool in pool order, each candidate with `kept` (empty when none was ingested)."""
        return [row.to_json() for row in self.rzero_question_rows.filter(iteration=int(iteration))]

    def to_json(self):
        return {
            "id": self.pk,
            "name": self.name,
            "method": self.method,
            "team": self.team_id,
            "prompt_set": self.prompt_set_id,
            "eval_prompt_set": self.eval_prompt_set_id,
            "tags": self.tags,
            "model": self.model,
            "embedding_model": self.embedding_model,
            "hyperparameters": self.hyperparameters,
            "max_steps": self.max_steps,
            "total_steps": self.total_steps,
            "seed": self.seed,
            "queue": self.queue,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "engine": self.engine_json(),
            "source": self.source,
            "mlflow_run_id": self.mlflow_run_id,
            "trainer": self.trainer,
            "state": self.state,
            "message": self.message,
            "exit_code": self.exit_code,
            "stderr_tail": self.stderr_tail,
            "last_step": self.last_step,
            "cancel_requested": self.cancel_requested,
            "cloned_from": self.cloned_from_id,
            "created_by": self.created_by.username,
            "created_at": self.created_at.isoformat(),
            **self.clock_json(),
            "notes": self.notes,
            "archived": self.archived_at is not None,
        }


class EngineJob(models.Model):
    """The job an engine trains the run as (DESIGN §4.9), from the first time a worker took the run: the engine
    ("local", the worker's child; "slurm"; "ray", as EVOLAB_TRAINER_LAUNCHER of that worker says) and, for a
    cluster's job, its id, the engine's word on it (a pending reason, an end state) and the tail of its log, where
    the pages read them and another worker re-attaches to it (webapp/runs/lifecycle.py writes it)."""

    TITLES = {"slurm": "Slurm", "ray": "Ray"}

    run = models.OneToOneField(Run, primary_key=True, on_delete=models.CASCADE, related_name="engine_job")
    engine = models.CharField(max_length=10)
    job_id = models.CharField(max_length=100, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    log_tail = models.TextField(blank=True)
    # Submissions of the run to an engine so far: the next job's name is evolab-run-{id}-{attempt}, chosen
    # before it is submitted, so a worker that died in between finds it by name
    attempt = models.PositiveSmallIntegerField(default=0)

    @property
    def title(self) -> str:
        """The cluster engine's name as pages say it; "" for a run its worker trains as a child (`local`)."""
        return self.TITLES.get(self.engine, "")


class RunLease(models.Model):
    """The lease on a run a worker supervises (webapp/runs/lifecycle.py): whose supervisor holds it
    ("host:pid:token") and when it last said so. A row while a supervisor holds the run (pending or running), none
    otherwise; a run whose heartbeat is older than RUN_LEASE_SECONDS has lost its supervisor."""

    run = models.OneToOneField(Run, primary_key=True, on_delete=models.CASCADE, related_name="lease")
    owner = models.CharField(max_length=200)
    heartbeat_at = models.DateTimeField()


class RunTransition(models.Model):
    """One change of a run's state, or a request that leads to one, with its cause: the run's history on its
    page, written by webapp/runs/lifecycle.py alone (each of its transitions records one as it announces it)."""

    LAUNCHED, REPORTED = "launched", "reported"
    CLAIMED, ENGINE = "claimed", "engine"
    CANCEL_REQUESTED, CANCELLED_BEFORE_START = "cancel_requested", "cancelled_before_start"
    RESUME_REQUESTED, HANDED_BACK, FINISHED = "resume_requested", "handed_back", "finished"
    LEASE_EXPIRED = "lease_expired"
    CAUSES = [
        (LAUNCHED, "launched"),
        (REPORTED, "reported by its trainer"),
        (CLAIMED, "taken by a worker"),
        (ENGINE, "its cluster engine's job changed"),
        (CANCEL_REQUESTED, "cancel requested"),
        (CANCELLED_BEFORE_START, "cancelled before it started"),
        (RESUME_REQUESTED, "resume requested"),
        (HANDED_BACK, "handed back by a worker shutting down"),
        (FINISHED, "its trainer ended"),
        (LEASE_EXPIRED, "its worker stopped answering"),
    ]

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="transitions")
    at = models.DateTimeField(default=timezone.now)
    cause = models.CharField(max_length=30, choices=CAUSES)
    state = models.CharField(max_length=20)  # the run's state after it
    # and before it (the state of the run's previous row): the history reads "running → queued", as healthchecks'
    # Flip keeps old and new status; blank for a run's first row
    previous_state = models.CharField(max_length=20, blank=True, default="")
    message = models.TextField(blank=True)
    # who asked (a launch, a cancel, a resume); a worker's name for a claim; blank for the rest
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    worker = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["run", "-id"], name="run_transition_latest")]

    @classmethod
    def record(cls, run, cause: str, by=None, worker: str = "") -> "RunTransition":
        """The row of a change just written to `run` (its state and message as they now are), with the state its
        previous row left it in."""
        previous = cls.objects.filter(run=run).order_by("-id").values_list("state", flat=True).first() or ""
        return cls.objects.create(run=run, cause=cause, state=run.state, previous_state=previous, message=run.message,
                                  by=by, worker=worker)

    @classmethod
    def page(cls, run_id: int, before: int | None = None, limit: int = 100) -> tuple[list, int | None]:
        """The run's latest `limit` rows before the row `before` (newest first), and the `before` of the page
        after them (None on the last)."""
        rows = cls.objects.filter(run_id=run_id).select_related("by").order_by("-id")
        if before is not None:
            rows = rows.filter(id__lt=before)
        found = list(rows[:limit + 1])
        return found[:limit], (found[limit - 1].pk if len(found) > limit else None)

    def to_json(self) -> dict:
        return {
            "id": self.pk,
            "at": self.at.isoformat(),
            "cause": self.cause,
            "cause_title": self.get_cause_display(),
            "state": self.state,
            "previous_state": self.previous_state or None,
            "message": self.message,
            "by": self.by.username if self.by_id else None,
            "worker": self.worker,
        }


class RunEvent(models.Model):
    """One line of the run's event log. The unique (run, seq) makes ingestion idempotent:
    a replayed log inserts nothing twice."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.IntegerField()
    type = models.CharField(max_length=20)
    time = models.FloatField()
    step = models.IntegerField(null=True, blank=True)
    # The event as written, except a group's rollouts, which live in Rollout rows.
    payload = models.JSONField(default=dict)

    class Meta:
        ordering = ["seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="unique_event_seq_per_run")]


class Group(models.Model):
    """One prompt's rollouts at one step."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="groups")
    seq = models.IntegerField()
    step = models.IntegerField()
    prompt_id = models.CharField(max_length=200)
    majority_answer = models.TextField(null=True, blank=True)
    similarity = models.JSONField(null=True, blank=True)
    # The group's health, computed once at ingestion (rl.metrics.group_summary): a prompt's history
    # reads one row per step instead of its rollouts.
    size = models.PositiveIntegerField(default=0)
    majority_ratio = models.FloatField(null=True)
    unique_answers = models.PositiveIntegerField(null=True)
    similarity_mean = models.FloatField(null=True)
    reward_mean = models.FloatField(null=True)
    # A later group replaced it: its step was run again after a resume (webapp/runs/ingestion.py::_supersede).
    superseded = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["step", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="unique_group_per_event")]
        indexes = [models.Index(fields=["run", "step", "prompt_id"]),
                   models.Index(fields=["run", "prompt_id", "step"], name="runs_group_prompt_history")]

    def summary_json(self):
        return {"step": self.step, "prompt_id": self.prompt_id, "majority_answer": self.majority_answer}


class RZeroQuestion(models.Model):
    """One candidate of an R-Zero iteration's question set, from the trainer's `questions` events: the
    challenger's output, the solver's agreement p̂, the pseudo-label and whether the solver trains on it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rzero_question_rows")
    seq = models.IntegerField()  # the event it came from
    iteration = models.PositiveIntegerField()
    index = models.PositiveIntegerField()  # position in the iteration's pool
    question_id = models.CharField(max_length=200)
    question = models.TextField(null=True, blank=True)  # null: the output failed the <question> format check
    text = models.TextField(blank=True)
    p_hat = models.FloatField(null=True)
    pseudo_label = models.TextField(null=True, blank=True)
    answers = models.JSONField(default=list)
    kept = models.BooleanField(default=False)

    class Meta:
        ordering = ["iteration", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "iteration", "index"],
                                               name="unique_rzero_question_per_pool_position")]

    def to_json(self):
        return {"id": self.question_id, "question": self.question, "text": self.text, "p_hat": self.p_hat,
                "pseudo_label": self.pseudo_label, "answers": self.answers, "kept": self.kept}


class Rollout(models.Model):
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="rollouts")
    # The group's run and step, repeated on each rollout so a run's rollouts are searched and paged in
    # any indexed order (webapp/explorer/search.py) without joining and sorting them all. Null only
    # between the migration adding them and its backfill.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rollouts", null=True, db_index=False)
    step = models.IntegerField(null=True)
    index = models.IntegerField()
    text = models.TextField()
    answer = models.TextField(null=True, blank=True)
    valid = models.BooleanField(default=False)
    in_majority = models.BooleanField(default=False)
    reward = models.FloatField(null=True)
    advantage = models.FloatField(null=True)
    length = models.IntegerField(default=0)
    used_for_training = models.BooleanField(default=True)
    entropy = models.FloatField(null=True)
    extra = models.JSONField(default=dict)
    # Its step was run again after a resume (webapp/runs/ingestion.py::_supersede): kept, marked, left out of
    # the search and the pages unless asked for. A database default: ingestion COPYs rollouts without it.
    superseded = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["index"]
        constraints = [models.UniqueConstraint(fields=["group", "index"], name="unique_rollout_index_per_group")]
        # One per sortable field of the search, each with id last for keyset pagination (the reward and
        # advantage ones, which differ between databases, are made by webapp/explorer/search_indexes.py).
        indexes = [
            models.Index(fields=["run", "step", "id"], name="rollout_search_step"),
            models.Index(fields=["run", "length", "id"], name="rollout_search_length"),
        ]

    def to_json(self, with_text=True):
        data = {
            "index": self.index,
            "answer": self.answer,
            "valid": self.valid,
            "in_majority": self.in_majority,
            "reward": self.reward,
            "advantage": self.advantage,
            "length": self.length,
            "used_for_training": self.used_for_training,
            "entropy": self.entropy,
            "extra": self.extra,
            "superseded": self.superseded,
        }
        if with_text:
            data["text"] = self.text
        return data
