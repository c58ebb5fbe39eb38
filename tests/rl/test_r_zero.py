"""R-Zero (rl/methods/r_zero/__init__.py): the challenger's reward over the step's batch, the solver's, the 3..7 filter, and
the switch to the released code."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from rl.groups import Group
from rl.methods.r_zero import (
    challenger_question,
    extract_question,
    keep_for_solver,
    repetition_penalties,
    score_challenger_batch,
    solver_agreement,
    solver_majority,
    uncertainty_reward,
)

NEAR_DUPLICATES = [
    "What is the sum of the first ten positive integers ?",
    "What is the sum of the first ten positive integers ?",
    "What is the sum of the first twelve positive integers ?",
]
DIFFERENT = "A circle has radius 3 . Find its area in terms of pi ."


def test_uncertainty_is_one_when_half_the_solver_agrees():
    assert uncertainty_reward(["7"] * 5 + ["1", "2", "3", "4", "5"]) == 1.0


def test_uncertainty_is_zero_when_the_solver_is_unanimous():
    assert uncertainty_reward(["7"] * 10) == 0.0


def test_uncertainty_follows_one_minus_twice_the_distance_from_one_half():
    assert uncertainty_reward(["7"] * 3 + [str(i) for i in range(7)]) == pytest.approx(0.6)


def test_none_answers_count_in_m_but_never_form_the_majority():
    answers = ["4"] * 4 + [None] * 6
    assert solver_agreement(answers) == 0.4
    assert uncertainty_reward(answers) == pytest.approx(0.8)
    assert uncertainty_reward([None] * 10) == 0.0


def test_the_majority_is_taken_over_equivalent_answers_not_strings():
    # "1/2" and "0.5" are one answer: ½ holds 6 of the 10, not "2" with 4 (R-Zero's release groups by the grader)
    answers = ["1/2"] * 3 + ["0.5"] * 3 + ["2"] * 4
    assert solver_agreement(answers) == pytest.approx(0.6)
    assert uncertainty_reward(answers) == pytest.approx(0.8)
    assert solver_majority(answers) == "1/2"  # the pseudo-label: the first written form of the largest class


@given(st.integers(0, 10))
def test_uncertainty_is_symmetric_around_one_half(k):
    answers = ["1"] * max(k, 1) + [str(100 + i) for i in range(10 - max(k, 1))]
    p = max(k, 1) / 10
    assert uncertainty_reward(answers) == pytest.approx(1 - 2 * abs(p - 0.5))


def test_near_duplicate_questions_share_the_penalty_of_their_cluster():
    assert repetition_penalties(NEAR_DUPLICATES + [DIFFERENT]) == pytest.approx([0.75, 0.75, 0.75, 0.25])
    assert repetition_penalties(NEAR_DUPLICATES + [DIFFERENT], lam=2.0) == pytest.approx([1.5, 1.5, 1.5, 0.5])


def test_a_threshold_of_zero_puts_every_question_alone():
    assert repetition_penalties(NEAR_DUPLICATES, threshold=0.0) == pytest.approx([1 / 3] * 3)


def test_a_single_question_is_its_own_cluster():
    assert repetition_penalties(["one question"]) == [1.0]
    assert repetition_penalties([]) == []


def challenger_rewards(questions, solver_answers):
    """The paper's challenger rewards of one step whose B outputs pose `questions` (None: a format failure)."""
    texts = [f"<question>{q}</question>" if q is not None else "no question here" for q in questions]
    group = challenger_group("p0", texts)
    return score_challenger_batch([group], [solver_answers], PAPER)[0].rewards


def test_challenger_reward_is_uncertainty_minus_penalty_floored_at_zero():
    # R-Zero §2.2: r_i = max(0, r_uncertainty − r_rep); two different questions: 1 − 1/2 each
    half = ["7"] * 5 + ["1", "2", "3", "4", "5"]
    assert challenger_rewards(NEAR_DUPLICATES[:1] + [DIFFERENT], [half, half]) == pytest.approx([0.5, 0.5])
    assert challenger_rewards(NEAR_DUPLICATES, [half] * 3) == [0.0, 0.0, 0.0]  # one cluster of 3: 1 − 3/3


def test_the_repetition_penalty_divides_by_the_whole_batch_format_failures_included():
    half = ["7"] * 5 + ["1", "2", "3", "4", "5"]
    # R-Zero App. B.4: "B is the total number of questions in the batch": two valid questions in separate
    # clusters and one format failure make B = 3, so each penalty is 1/3 (not 1/2 over the valid ones)
    rewards = challenger_rewards(NEAR_DUPLICATES[:1] + [DIFFERENT, None], [half, half, []])
    assert rewards == pytest.approx([2 / 3, 2 / 3, 0.0])
    assert repetition_penalties(NEAR_DUPLICATES + [DIFFERENT], batch_size=8) == pytest.approx([3 / 8] * 3 + [1 / 8])


def test_extract_question_takes_the_last_block():
    text = "<question> first </question> scratch <question>\n Find x. \n</question> \\boxed{2}"
    assert extract_question(text) == "Find x."
    assert extract_question("no tags") is None
    assert extract_question("<question>   </question>") is None
    assert extract_question("<question> unclosed") is None


@pytest.mark.parametrize("agreeing, kept", [(2, False), (3, True), (5, True), (7, True), (8, False)])
def test_the_solver_keeps_questions_with_three_to_seven_of_ten_agreeing(agreeing, kept):
    answers = ["9"] * agreeing + [str(i) for i in range(10 - agreeing)]
    assert keep_for_solver(answers) is kept


def test_a_question_without_any_answer_is_not_kept():
    assert keep_for_solver([None] * 10) is False


# ---------------------------------------------------------------- the phases' scorers on the shared trainer

SOLVER_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."  # R-Zero App. B.2
SAM = "Sam has 23 apples and buys 45 more. How many apples does Sam have now?"
BOX = "A box holds 12 coins. Mia puts in 30 more. How many coins are in the box?"
PRODUCT = "Find the product of 6 and 7 , then add the number of days in a week ."


def challenger_group(prompt_id: str, texts: list[str]):
    return Group(prompt_id=prompt_id, prompt="p0", texts=texts, answers=[extract_question(t) for t in texts],
                 prompt_ids=[1], completion_ids=[[2]] * len(texts), embeddings=np.eye(len(texts)))


def test_the_challenger_batch_scorer_clusters_the_questions_of_every_group_together(monkeypatch):
    from rl.methods.r_zero import phases as rzero_phases
    from rl.methods import validate_hyperparameters

    # a solver that splits 5/5 on every question: p̂ = 0.5, so r_uncertainty = 1 for each
    asked = []
    monkeypatch.setattr(rzero_phases, "solver_answers", lambda solver, tokenizer, questions, hp, stop=None:
                        asked.extend(questions) or [["1"] * 5 + ["2"] * 5 for _ in questions])
    tagged = lambda q: f"<question>{q}</question>"  # noqa: E731
    groups = [challenger_group("challenger-0", [tagged(SAM), "no tags", tagged(BOX), tagged(SAM)]),
              challenger_group("challenger-1", [tagged(SAM), tagged(DIFFERENT), tagged(PRODUCT), "<question></question>"])]
    scorer = rzero_phases.ChallengerScorer(solver=None, tokenizer=None)
    scores = scorer(groups, validate_hyperparameters("r_zero", {}), None)

    assert len(asked) == 6  # only the questions that passed the format check go to the solver
    # B = 8 outputs of the step; SAM's cluster spans both groups: 3/8; every other question is alone: 1/8
    assert scores[0].rewards == pytest.approx([1 - 3 / 8, 0.0, 1 - 1 / 8, 1 - 3 / 8])
    assert scores[1].rewards == pytest.approx([1 - 3 / 8, 1 - 1 / 8, 1 - 1 / 8, 0.0])
    assert scores[0].extras[0] == {"p_hat": 0.5, "uncertainty": 1.0, "repetition_penalty": 3 / 8,
                                   "solver_majority": "1"}
    assert scores[0].extras[1] == {} and scores[0].majority_answer is None
    # batch figures, the same on every group so that the trainer's mean over groups is the batch's
    for score in scores:
        assert score.metrics["rzero/format_rate"] == 6 / 8
        assert score.metrics["rzero/repetition_penalty_mean"] == pytest.approx((3 * 3 / 8 + 3 / 8) / 6)
        assert score.metrics["rzero/uncertainty_mean"] == 1.0 and score.metrics["rzero/p_hat_mean"] == 0.5


def test_the_solver_is_rewarded_for_agreeing_with_the_pseudo_label_not_with_its_own_majority():
    from rl.methods.r_zero import SOLVER_PHASE

    texts = ["\\boxed{2}", "\\boxed{2}", "\\boxed{2}", "\\boxed{1}"]
    group = Group(prompt_id="it1-q0", prompt="q", texts=texts, answers=[SOLVER_PHASE.answer_rule(t) for t in texts],
                  prompt_ids=[1], completion_ids=[[2]] * 4, embeddings=np.eye(4), reference="1")
    score = SOLVER_PHASE.scorer(group, {}, None)  # the reference is the pseudo-label voted in the questions phase
    assert score.rewards == [0.0, 0.0, 0.0, 1.0] and score.majority_answer == "1"


@pytest.fixture
def chat_tokenizer():
    """The default policy's tokenizer with a small chat template, so the chat path of format_prompt runs."""
    from transformers import AutoTokenizer

    from rl.policy import DEFAULT_POLICY_DIR

    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_POLICY_DIR, local_files_only=True)
    tokenizer.chat_template = ("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
                               "{% if add_generation_prompt %}[assistant] {% endif %}")
    return tokenizer


def test_the_solver_sees_each_question_under_r_zeros_solver_system_prompt(monkeypatch, chat_tokenizer):
    from rl.methods.r_zero import phases as rzero_phases
    from rl.methods import validate_hyperparameters
    from rl.methods.r_zero import METHOD
    from rl.prompts import format_prompt

    question = "What is 1 + 1?"
    expected = format_prompt(chat_tokenizer, question, SOLVER_SYSTEM)
    assert expected == f"[system] {SOLVER_SYSTEM}\n[user] {question}\n[assistant] "  # the policy's chat template
    assert METHOD.system_prompt == SOLVER_SYSTEM
    seen = []
    monkeypatch.setattr(rzero_phases, "sample", lambda model, tokenizer, prompts, n, hp, stop=None:
                        seen.extend(prompts) or [["\\boxed{2}"] * n for _ in prompts])
    # when it answers the challenger's questions (its uncertainty, the 3..7 filter) ...
    answers = rzero_phases.solver_answers(None, chat_tokenizer, [question], validate_hyperparameters("r_zero", {}))
    assert seen == [expected] and answers == [["2"] * 10]
    # ... and when it trains on the kept ones
    rows = rzero_phases.solver_rows(chat_tokenizer, [{"id": "it1-q0", "question": question}])
    assert rows == [{"prompt": expected, "prompt_id": "it1-q0"}]


def test_r_zero_takes_the_global_batch_of_its_released_easyr1_config():
    from rl.methods import validate_hyperparameters

    hp = validate_hyperparameters("r_zero", {})
    # EasyR1 examples/config.yaml: data.rollout_batch_size 512 prompts per rollout batch, worker.actor.global_batch_size
    # 128 prompts per update (the paper's "global batch size 128", App. B.1), ppo_epochs 1, constant lr, no warmup
    assert (hp["prompts_per_step"], hp["prompts_per_update"], hp["ppo_epochs"]) == (512, 128, 1)
    assert (hp["lr_schedule"], hp["warmup_ratio"], hp["weight_decay"]) == ("constant", 0.0, 0.01)
    assert validate_hyperparameters("r_zero", {"challenger_steps": 0})["challenger_steps"] == 0


def test_a_question_set_is_an_event_of_the_log():
    from rl.events import EventSchemaError, validate_event

    row = {"id": "it1-q0", "question": "Q?", "text": "<question>Q?</question>", "p_hat": 0.5, "pseudo_label": "7",
           "answers": ["7", "6"], "kept": True}
    event = {"seq": 3, "time": 1.0, "type": "questions", "iteration": 1, "offset": 0, "total": 2,
             "questions": [row, {**row, "id": "it1-q1", "question": None, "p_hat": None, "pseudo_label": None,
                                 "answers": [], "kept": False}]}
    validate_event(event)
    for broken in ({**event, "questions": [{**row, "kept": "yes"}]}, {**event, "offset": -1},
                   {**event, "questions": [{k: v for k, v in row.items() if k != "id"}]}):
        with pytest.raises(EventSchemaError):
            validate_event(broken)


def test_the_challenger_prompt_goes_through_the_chat_template_as_the_policy_learned_it(chat_tokenizer, tmp_path):
    from rl.arithmetic import CHALLENGER_PROMPT
    from rl.policy import DEFAULT_POLICY_DIR
    from rl.methods.r_zero import PAPER_CHALLENGER_SYSTEM, PAPER_CHALLENGER_USER
    from rl.methods.r_zero.phases import challenger_prompt

    # the default policy: rl.arithmetic's short task as the user turn (scripts/train_default_policy.py)
    assert challenger_prompt(DEFAULT_POLICY_DIR, chat_tokenizer) == f"[user] {CHALLENGER_PROMPT}\n[assistant] "
    # any other model: R-Zero App. B.2's system and user messages
    assert challenger_prompt(tmp_path, chat_tokenizer) == (f"[system] {PAPER_CHALLENGER_SYSTEM}\n"
                                                           f"[user] {PAPER_CHALLENGER_USER}\n[assistant] ")


def test_the_three_to_seven_filter_counts_equivalent_answers_together():
    # 4 strings agree, but ½ is held by 6 (3 + 3): kept by the 3..7 band either way, and 8 of 10 is not
    assert keep_for_solver(["1/2"] * 3 + ["0.5"] * 3 + ["2"] * 4)
    assert not keep_for_solver(["1/2"] * 4 + ["0.5"] * 4 + ["2"] * 2)  # 8 agree: too easy, though no string has 5


# ---- variant "release": R-Zero's released code (Chengsong-Huang/R-Zero), a switch; the paper is the default

RELEASE = {"bleu_threshold": 0.5, "repetition_weight": 1.0, "variant": "release"}
PAPER = {**RELEASE, "variant": "paper"}
SPLIT = ["4"] * 5 + ["5"] * 5


def test_the_release_rewards_min_p_minus_penalty_with_minus_one_for_a_format_failure():
    texts = ["<question>What is 2 + 2 ?</question> \\boxed{4}", "no question here"]
    release = score_challenger_batch([challenger_group("p0", texts)], [[SPLIT, []]], RELEASE)[0]
    # caller_penalty.py: (min(0.5, 0.5) if question else -1) - share of its cluster (each alone of 2: 0.5)
    assert release.rewards == pytest.approx([0.0, -1.5])
    paper = score_challenger_batch([challenger_group("p0", texts)], [[SPLIT, []]], PAPER)[0]
    assert paper.rewards == pytest.approx([0.5, 0.0])  # §2.2: max(0, 1 − 2|½ − ½| − ½), and 0 for the failure


def test_the_release_format_check_wants_the_challengers_boxed_answer_too():
    assert challenger_question("<question>What is 2 + 2 ?</question>", "paper") == "What is 2 + 2 ?"
    assert challenger_question("<question>What is 2 + 2 ?</question>", "release") is None
    assert challenger_question("<question>What is 2 + 2 ?</question> \\boxed{4}", "release") == "What is 2 + 2 ?"


def test_the_release_counts_agreement_over_the_boxed_answers_only():
    answers = ["4"] * 4 + [None] * 6
    assert solver_agreement(answers, "release") == 1.0 and uncertainty_reward(answers, "release") == 0.0
    assert solver_agreement(answers, "paper") == 0.4
    halves = ["1/2"] * 3 + ["0.5"] * 3 + ["2"] * 4
    assert uncertainty_reward(halves, "release") == pytest.approx(0.4)  # min(0.6, 0.4)


def test_the_release_keeps_questions_by_the_share_of_boxed_answers():
    three_of_ten = ["4"] * 3 + [None] * 7  # 3 of the 10 agree, but every boxed answer does
    assert keep_for_solver(three_of_ten, 3, 7)
    assert not keep_for_solver(three_of_ten, 3, 7, "release", m=10)  # upload.py: 0.3 <= score <= 0.7, score 1.0
    assert keep_for_solver(["4"] * 5 + ["5"] * 5, 3, 7, "release", m=10)
