"""A prompt's history over a run (DESIGN §4.6, issue 10): for one prompt, per step, what its group of
rollouts looked like. Read from the groups' summary columns (rl.metrics.group_summary, filled at
ingestion), one row per step through the (run, prompt_id, step) index, whatever the group size."""
from dataclasses import dataclass

from rl.answers import matches_reference
from rl.methods import METHODS

from webapp.runs.models import Group, Run, RZeroQuestion

FIELDS = ("step", "majority_answer", "size", "majority_ratio", "unique_answers", "similarity_mean", "reward_mean")


@dataclass
class PromptHistory:
    prompt_id: str
    prompt: str | None  # the prompt's text (an R-Zero solver prompt: the challenger's question)
    label: str | None  # the held-out label, when the run's prompt set has labels
    rows: list[dict]

    def to_json(self) -> dict:
        return {"prompt_id": self.prompt_id, "prompt": self.prompt, "has_label": self.label is not None,
                "history": self.rows}


def prompt_history(run: Run, prompt_id: str) -> PromptHistory | None:
    """The prompt's rows in step order, or None when the run has no group of that prompt. A step logged
    twice (replayed after a resume) shows its later group. With a held-out label, each row says whether
    its majority answer was right (`majority_correct`, the comparison label_accuracy makes); the label
    is monitoring only and never reaches a reward."""
    rows: dict[int, dict] = {}
    for values in (Group.objects.filter(run=run, prompt_id=prompt_id).order_by("step", "seq")
                   .values_list(*FIELDS)):
        rows[values[0]] = dict(zip(FIELDS, values))
    if not rows:
        return None
    prompt, label = _prompt_and_label(run, prompt_id)
    if label is not None:  # answers_equal caches math-verify's verdicts: a repeated majority costs nothing
        for row, correct in zip(rows.values(), matches_reference([r["majority_answer"] for r in rows.values()], label)):
            row["majority_correct"] = correct
    return PromptHistory(prompt_id=prompt_id, prompt=prompt, label=label, rows=list(rows.values()))


@dataclass
class PromptText:
    text: str
    label: str | None  # the held-out label, when the run's prompt set has labels
    source: str  # "prompt set", "generated question" (R-Zero's solver) or what the method calls a prompt it writes (Method.own_prompt: R-Zero's "challenger prompt")


def prompt_texts(run: Run, prompt_ids) -> dict[str, PromptText]:
    """What each prompt id of the run's groups asked. R-Zero's solver trains on the challenger's questions
    (ids not in the prompt set) and its challenger on copies of p0 (ids challenger-{j})."""
    ids = set(prompt_ids)
    if run.prompt_set is None:  # a run trained elsewhere that reported no rollouts yet
        return {}
    labelled = run.prompt_set.has_labels
    found = {pid: PromptText(text, label if labelled else None, "prompt set") for pid, text, label in
             run.prompt_set.prompts.filter(external_id__in=ids).values_list("external_id", "text", "label")}
    rest = ids - found.keys()
    if rest:
        # the latest pool's question of that id (a question set re-ingested after a resume replaces the earlier)
        for pid, question in (RZeroQuestion.objects.filter(run=run, question_id__in=rest).order_by("seq")
                              .values_list("question_id", "question")):
            found[pid] = PromptText(question or "", None, "generated question")
        own_prompt = METHODS[run.method].own_prompt if run.method in METHODS else None
        for pid in rest - found.keys():
            written = own_prompt(pid, run.model) if own_prompt else None
            if written is not None:
                found[pid] = PromptText(written[1], None, written[0])
    return found


def _prompt_and_label(run: Run, prompt_id: str) -> tuple[str | None, str | None]:
    found = prompt_texts(run, [prompt_id]).get(prompt_id)
    return (found.text, found.label) if found else (None, None)
