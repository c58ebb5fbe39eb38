"""`POST /api/runs/{id}/rollouts` (DESIGN §4.8): a run trained elsewhere reports its rollouts as JSON lines,

    {step, prompt, prompt_id?, index?, completion, reward?, rewards?: {name: value}, advantage?, answer?,
     label?, length?, extras?: {...}}

Every line is checked before anything is written (an error names the line and the field, nothing is kept);
the new ones wait as PendingRollout rows, keyed by (step, prompt_id or the prompt text, index), so a batch sent
twice is stored once, until a worker groups their step (grouping.py). A line without `index` is numbered by
its place among the lines of its prompt and step in the request: send a prompt's rollouts of a step in one
request, or give `index`."""
import hashlib
import json
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from rl.params import FieldError, finite
from webapp.plain_text import storable
from webapp import bulk
from webapp.runs.models import Group, Rollout, Run
from webapp.tasks import GROUP_EXTERNAL_ROLLOUTS, send_on_commit

from .models import ExternalRun, PendingRollout
from .queues import external_queue

MAX_LINES = 20_000
MAX_TEXT_CHARS = 400_000  # a prompt or a completion: 100k tokens and more
MAX_ID_CHARS = 200
MAX_EXTRAS_BYTES = 64 * 1024
MAX_STEP = 2**31 - 1
MAX_INDEX = 1_000_000
FIELDS = ("step", "prompt", "prompt_id", "index", "completion", "reward", "rewards", "advantage", "answer", "label",
          "length", "extras")


class RolloutLineError(FieldError):
    """A FieldError that also knows the line of the report it is about (the API answers it beside the field)."""

    def __init__(self, line: int, field: str | None, message: str):
        super().__init__(field, f"line {line}: {message}")
        self.line = line


@dataclass
class ReportedRollout:
    step: int
    prompt_id: str
    index: int | None
    prompt: str
    completion: str
    answer: str | None
    reward: float | None
    rewards: dict
    advantage: float | None
    label: str | None
    length: int | None
    extras_json: str  # the extras as JSON text, as they are stored


def parse_lines(body: bytes, allow_none: bool = False) -> list[ReportedRollout]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RolloutLineError(body[:exc.start].count(b"\n") + 1, None, "the body is not UTF-8 text") from None
    rollouts = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        if len(rollouts) >= MAX_LINES:
            raise RolloutLineError(number, None, f"at most {MAX_LINES:,} rollouts a request; send the rest in another")
        rollouts.append(_rollout(number, line))
    if not rollouts and not allow_none:
        raise RolloutLineError(1, None, "no rollouts: send one JSON object per line")
    _number_unindexed(rollouts)
    return rollouts


class _NotFinite(ValueError):
    """A number of the extras no float holds (1e400, NaN, an integer of 400 digits), and where it is."""

    def __init__(self, where: str, value):
        super().__init__(where)
        self.where, self.value = where, value


def _rollout(number: int, line: str) -> ReportedRollout:
    try:
        # NaN, Infinity and 1e400 (infinity) are read as floats and refused by the field they are in, naming it
        data = json.loads(line)
    except RecursionError:
        raise RolloutLineError(number, None, "the line nests too deeply") from None
    except ValueError as exc:
        raise RolloutLineError(number, None, f"not a JSON object ({exc})") from None
    if not isinstance(data, dict):
        raise RolloutLineError(number, None, f"a line is a JSON object, not {type(data).__name__}")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise RolloutLineError(number, unknown[0], f"unknown field {unknown[0]!r}: a rollout has {', '.join(FIELDS)}")

    def whole(field, low, high, required=False):
        value = data.get(field)
        if value is None:
            if required:
                raise RolloutLineError(number, field, f"'{field}' is required")
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise RolloutLineError(number, field, f"'{field}' must be a whole number from {low} to {high:,}, not "
                                                  f"{_shown(value)}")
        return value

    def real(field, value=None, where=None):
        value = data.get(field) if where is None else value
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or finite(value) is None:
            raise RolloutLineError(number, field, f"'{where or field}' must be a number, not {_shown(value)}")
        return float(value)

    def words(field, required=False, limit=MAX_TEXT_CHARS):
        value = data.get(field)
        if value is None:
            if required:
                raise RolloutLineError(number, field, f"'{field}' is required")
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and field == "label":
            if finite(value) is None:
                raise RolloutLineError(number, field, f"'label' must be text or a number, not {_shown(value)}")
            value = str(value)
        if not isinstance(value, str):
            raise RolloutLineError(number, field, f"'{field}' must be text, not {_shown(value)}")
        if len(value) > limit:
            raise RolloutLineError(number, field, f"'{field}' is {len(value):,} characters long; at most {limit:,}")
        return storable(value)

    step = whole("step", 0, MAX_STEP, required=True)
    prompt = words("prompt")
    prompt_id = words("prompt_id", limit=MAX_ID_CHARS)
    if prompt is None and prompt_id is None:
        raise RolloutLineError(number, "prompt", "'prompt' is required (or 'prompt_id' when the prompt was sent before)")
    if prompt_id is not None and (not prompt_id.strip() or any(ord(c) < 32 for c in prompt_id)):
        raise RolloutLineError(number, "prompt_id", f"'prompt_id' {prompt_id!r} must be printable text")
    rewards = data.get("rewards") or {}
    if not isinstance(rewards, dict):
        raise RolloutLineError(number, "rewards", "'rewards' must be an object of reward function → number")
    for name, value in rewards.items():
        if len(name) > MAX_ID_CHARS:
            raise RolloutLineError(number, "rewards", f"reward name {name[:40]!r}... is longer than {MAX_ID_CHARS}")
        real("rewards", value, where=f"rewards.{name}")
    extras = data.get("extras") or {}
    if not isinstance(extras, dict):
        raise RolloutLineError(number, "extras", "'extras' must be an object")
    try:
        extras_json = bulk.json_text(_clean_json(extras, "extras")) if extras else "{}"
    except _NotFinite as exc:
        raise RolloutLineError(number, "extras", f"'{exc.where}' is not a finite number ({_shown(exc.value)}): "
                                                 f"send null for a missing value") from None
    if len(extras_json) > MAX_EXTRAS_BYTES:
        raise RolloutLineError(number, "extras", f"'extras' is over {MAX_EXTRAS_BYTES // 1024} KB of JSON")
    reward = real("reward")
    given = {name: float(value) for name, value in rewards.items() if value is not None}
    if reward is None and given:  # the total, when only the functions' rewards are given
        reward = sum(given.values())
    return ReportedRollout(
        step=step, prompt_id=prompt_id or prompt_key(prompt), index=whole("index", 0, MAX_INDEX),
        prompt=prompt or "", completion=words("completion", required=True), answer=words("answer"),
        reward=reward, rewards={storable(k): v for k, v in given.items()}, advantage=real("advantage"),
        label=words("label"), length=whole("length", 0, MAX_STEP), extras_json=extras_json)


def prompt_key(prompt: str) -> str:
    """The id of a prompt reported without one: the same text always gets the same id. Not cached: a cache keyed
    by the text kept up to 400,000 characters a prompt in the web process for good, and hashing is cheaper than
    parsing the JSON the text arrived in."""
    return "p-" + hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _clean_json(value, where: str):
    """The extras as the database stores them: texts storable, every number one a float holds (else _NotFinite)."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): _clean_json(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and finite(value) is None:
        raise _NotFinite(where, value)
    return value


def _shown(value) -> str:
    """A value as an error quotes it: JSON, at most 50 characters (an integer of 400 digits is cut)."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 50 else text[:47] + "..."


def _number_unindexed(rollouts: list[ReportedRollout]) -> None:
    seen: dict[tuple, int] = {}
    for r in rollouts:
        key = (r.step, r.prompt_id)
        if r.index is None:
            r.index = seen.get(key, 0)
        seen[key] = max(seen.get(key, 0), r.index + 1)


# --- storing -----------------------------------------------------------------------------------------

def receive(run: Run, rollouts: list[ReportedRollout], complete_through: int | None = None) -> dict:
    """Keep the rollouts not stored yet (neither waiting nor grouped) and ask a worker to group them.
    `complete_through`: the reporter has sent every rollout of the steps up to it (they are grouped at once).

    No lock is shared with the worker grouping the run, so reports and grouping go on side by side: which keys
    are stored is read in one statement (one snapshot: a rollout being grouped is seen either waiting or
    grouped), and the unique key of waiting rollouts settles two requests storing the same ones at once."""
    now = timezone.now()
    unique = {}
    for r in rollouts:
        unique.setdefault((r.step, r.prompt_id, r.index), r)
    with transaction.atomic():
        stored = _stored_keys(run.pk, {step for step, _, _ in unique}) if unique else set()
        fresh = [r for key, r in unique.items() if key not in stored]
        rows = [(run.pk, r.step, r.prompt_id, r.index, r.prompt, r.completion, r.answer, r.reward,
                 bulk.json_text(r.rewards) if r.rewards else "{}", r.advantage, r.label, r.length, r.extras_json, now)
                for r in fresh]
        try:
            with transaction.atomic():
                bulk.copy_rows(PendingRollout._meta.db_table, PENDING_COLUMNS, rows)
            added = len(rows)
        except IntegrityError:  # a request still storing the same rollouts (a client that timed out and sent again)
            added = bulk.insert_new(PendingRollout._meta.db_table, PENDING_COLUMNS, rows)
        externals = ExternalRun.objects.filter(pk=run.pk)
        top = max((step for step, _, _ in unique), default=None)
        if top is not None:
            externals.filter(Q(max_rollout_step__isnull=True) | Q(max_rollout_step__lt=top)).update(max_rollout_step=top)
        said = complete_through is not None and bool(externals.filter(
            Q(complete_through__isnull=True) | Q(complete_through__lt=complete_through)).update(
            complete_through=complete_through))
        if (added or said) and externals.filter(grouping_requested_at__isnull=True).update(grouping_requested_at=now):
            send_on_commit(GROUP_EXTERNAL_ROLLOUTS, [run.pk], queue=external_queue())
    return {"run": run.pk, "received": len(rollouts), "stored": added, "duplicates": len(rollouts) - added}


PENDING_COLUMNS = ["run_id", "step", "prompt_id", "index", "prompt", "completion", "answer", "reward", "rewards",
                   "advantage", "label", "length", "extras", "received_at"]


def _stored_keys(run_id: int, steps: set) -> set:
    """(step, prompt_id, index) of the run's rollouts at these steps, waiting or grouped already: one statement,
    so a step a worker is grouping meanwhile is seen whole on one side or the other."""
    steps = sorted(steps)
    marks = bulk.placeholders(steps)
    rows = bulk.fetch(
        f"SELECT step, prompt_id, {bulk.quoted('index')} FROM {PendingRollout._meta.db_table} "
        f"WHERE run_id = %s AND step IN ({marks}) UNION ALL "
        f"SELECT g.step, g.prompt_id, r.{bulk.quoted('index')} FROM {Rollout._meta.db_table} r JOIN "
        f"{Group._meta.db_table} g ON g.id = r.group_id WHERE g.run_id = %s AND g.step IN ({marks}) "
        f"AND NOT g.superseded", [run_id, *steps, run_id, *steps])
    return {tuple(row) for row in rows}
