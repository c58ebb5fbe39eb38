"""A prompt's history over a run (DESIGN §4.6, issue 10): for one prompt, per step, what its group of
rollouts looked like. Read from the groups' summary columns (rl.metrics.group_summary, filled at
ingestion), one row per step through the (run, prompt_id, step) index, whatever the group size."""
from dataclasses import dataclass

from rl.answers import matches_reference

from .models import Group, Run, RZeroQuestion

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


def _prompt_and_label(run: Run, prompt_id: str) -> tuple[str | None, str | None]:
    found = run.prompt_set.prompts.filter(external_id=prompt_id).values_list("text", "label").first()
    if found is not None:
        return found[0], (found[1] if run.prompt_set.has_labels else None)
    # R-Zero's solver trains on the challenger's questions: their ids are not in the prompt set
    question = (RZeroQuestion.objects.filter(run=run, question_id=prompt_id).order_by("-seq")
                .values_list("question", flat=True).first())
    return question, None
