"""What Evolab keeps of a run trained elsewhere beyond the `Run` itself: its MLflow experiment, params
and tags, and the rollouts it reported that no group holds yet."""
from django.db import models

from webapp.runs.models import Run


class ExperimentQuerySet(models.QuerySet):
    def of_teams(self, team_ids):
        return self.filter(team_id__in=team_ids)


class Experiment(models.Model):
    """An MLflow experiment: a named folder of runs in one team (its MLflow id is the primary key). A
    team's `Default` experiment stands for MLflow's experiment "0", made when first used."""

    ACTIVE, DELETED = "active", "deleted"
    DEFAULT_NAME = "Default"

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="experiments")
    name = models.CharField(max_length=500)
    lifecycle_stage = models.CharField(max_length=10, default=ACTIVE)
    tags = models.JSONField(default=dict)
    # where its runs' artifacts go, as create_experiment gave it; blank: Evolab's own (artifacts.py)
    artifact_location = models.CharField(max_length=2000, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ExperimentQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_experiment_name_per_team")]

    def __str__(self):
        return f"{self.team_id}/{self.name}"

    @property
    def artifact_root(self) -> str:
        return self.artifact_location or f"mlflow-artifacts:/{self.pk}"


class ExternalRun(models.Model):
    """The MLflow side of an external run (`Run.source == "external"`): its experiment, what the trainer
    logged as params and tags, who it says it is, and the state of the work its rollouts wait for."""

    run = models.OneToOneField(Run, primary_key=True, on_delete=models.CASCADE, related_name="external")
    experiment = models.ForeignKey(Experiment, on_delete=models.PROTECT, related_name="runs")
    # MLflow's `user_id` as the client sent it (a login on the trainer's host, not an Evolab user)
    user_id = models.CharField(max_length=200, blank=True)
    lifecycle_stage = models.CharField(max_length=10, default=Experiment.ACTIVE)
    params = models.JSONField(default=dict)  # MLflow params: text values, written once each
    tags = models.JSONField(default=dict)  # MLflow tags (mlflow.*, evolab.*, the user's)
    start_time = models.BigIntegerField(null=True)  # ms, as MLflow keeps them
    end_time = models.BigIntegerField(null=True)
    # The highest step any rollout of the run arrived for: a step below it is complete and is grouped.
    max_rollout_step = models.IntegerField(null=True)
    # Every rollout of the steps up to this one has been sent, the reporter says (?complete_through=): those
    # steps are grouped at once, without waiting for a later step or a quiet time.
    complete_through = models.IntegerField(null=True)
    # Set while rollouts wait for a worker to group them (the task was sent); cleared when none is left, so the
    # next report sends the task again (rollouts waiting over a minute are sent again anyway: grouping.resend_stale).
    grouping_requested_at = models.DateTimeField(null=True)
    # A worker computing the run's similarity heatmaps holds this lease; a dead one's lease runs out.
    embedding_lease_until = models.DateTimeField(null=True)

    def __str__(self):
        return f"external run {self.run_id}"

    @property
    def answer_rule(self) -> str:
        """How answers are read from the run's rollouts (rl.answer_rules): the evolab.answer_rule tag."""
        return self.tags.get("evolab.answer_rule") or "boxed"


class PendingRollout(models.Model):
    """A rollout a run trained elsewhere reported, waiting for its step to be grouped (DESIGN §4.8). Keyed by
    (run, step, prompt, index), so a batch sent twice is stored once; the row is deleted when its group is
    ingested, in the same transaction."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    step = models.IntegerField()
    prompt_id = models.CharField(max_length=200)
    index = models.IntegerField()
    prompt = models.TextField()
    completion = models.TextField()
    answer = models.TextField(null=True)
    reward = models.FloatField(null=True)
    rewards = models.JSONField(default=dict)
    advantage = models.FloatField(null=True)
    label = models.TextField(null=True)  # held out: monitoring only
    length = models.IntegerField(null=True)  # tokens, when the trainer says
    extras = models.JSONField(default=dict)
    received_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "step", "prompt_id", "index"],
                                               name="unique_pending_rollout")]


class MlflowPoint(models.Model):
    """A point of one metric as MLflow's SqlMetric holds it: its key, millisecond timestamp, int64 step and value,
    NaN as `is_nan` (value 0) and ±inf as ±the largest float. The three tables below keep such points."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=250)
    timestamp = models.BigIntegerField()
    step = models.BigIntegerField()
    value = models.FloatField()
    is_nan = models.BooleanField(default=False)

    class Meta:
        abstract = True


class LoggedMetric(MlflowPoint):
    """Every metric value a trainer logged through MLflow's protocol, kept as MLflow's own store keeps it (its
    SqlMetric): several values per key and step, steps in any order and of any 64-bit size, each with its own
    millisecond timestamp; NaN as `is_nan` (value 0) and ±inf as ±the largest float, as MLflow's SQL store writes
    them. metrics/get-history reads these (logged_metrics.py); the charts, rules and exports read the metric store,
    where each step holds its latest value. One row per distinct point: a point sent twice is kept once, as in
    MLflow, whose primary key is these columns."""

    class Meta:
        # also the history's index: a key's points in MLflow's order, timestamp, step, value
        constraints = [models.UniqueConstraint(fields=["run", "key", "timestamp", "step", "value", "is_nan"],
                                               name="one_logged_metric_point")]


class LatestMetric(MlflowPoint):
    """Each key's latest value, as MLflow's latest_metrics table keeps it: the point with the highest (step,
    timestamp, value), updated as points are logged. runs/get and runs/search read it."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="one_latest_metric_per_key")]


class UnchartedMetric(MlflowPoint):
    """A point of a run's LoggedMetric that its charts have yet to show (charting.py): written with it by the
    log-batch request, deleted by the worker that charts it, in the transaction that charts it. Only points the
    charts can hold (steps 0..2^31-1) wait here; a point logged twice waits once, as it is kept once."""


class RunArtifact(models.Model):
    """A file a trainer logged to its run through MLflow's artifact service (mlflow.log_artifact, log_text,
    log_dict: artifacts.py), kept whole in the database beside the run, so every web process and worker reads
    the same copy without a shared disk. `path` is relative to the run's artifact root, '/'-separated."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="artifacts")
    path = models.CharField(max_length=1000)
    content = models.BinaryField()
    size = models.BigIntegerField()
    uploaded_at = models.DateTimeField()

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["run", "path"], name="one_artifact_per_path")]


class EvalGeneration(models.Model):
    """One validation generation of a run trained elsewhere at one step: a prompt, the policy's output and its
    score, read from the validation files verl's MLflow logger uploads (`val_step{N}.json`: artifacts.py). A file
    uploaded again replaces its step's generations."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="eval_generations")
    step = models.BigIntegerField()
    index = models.IntegerField()
    prompt = models.TextField()
    output = models.TextField()
    answer = models.TextField(null=True)  # read from the output with the run's answer rule
    score = models.FloatField(null=True)
    extra = models.JSONField(default=dict)  # the file's other fields of the row (verl: reward, max_length_steps)
    artifact_path = models.CharField(max_length=1000)

    class Meta:
        ordering = ["step", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "step", "index"], name="one_eval_generation_per_index")]


class LoggerImport(models.Model):
    """What `evolab sync wandb|tensorboard|trackio` read of a logger's files into a run (imports.py): the logger, the
    folder on the host that read it, and the sync's running totals (points and rollouts sent, values skipped by
    kind), as its last request said. The imports page lists them."""

    LOGGER_NAMES = {"wandb": "W&B", "tensorboard": "TensorBoard", "trackio": "Trackio"}
    LOGGERS = tuple(LOGGER_NAMES)

    run = models.OneToOneField(Run, primary_key=True, on_delete=models.CASCADE, related_name="logger_import")
    logger = models.CharField(max_length=20)
    folder = models.CharField(max_length=1000)
    host = models.CharField(max_length=200, blank=True)
    files = models.IntegerField(default=0)
    points = models.BigIntegerField(default=0)
    rollouts = models.BigIntegerField(default=0)
    skipped = models.JSONField(default=dict)  # {kind: count}: media, histograms, tables that are not completions
    started_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self):
        return f"{self.logger} import into run {self.run_id}"

    @property
    def logger_name(self) -> str:
        return self.LOGGER_NAMES.get(self.logger, self.logger)

    @property
    def skipped_text(self) -> str:
        """"3 histogram, 1 image", by kind; "nothing" when nothing was skipped."""
        return ", ".join(f"{count} {kind}" for kind, count in sorted(self.skipped.items())) or "nothing"
