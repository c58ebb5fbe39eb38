import threading
import time

import pytest
from hypothesis import given, strategies as st

from rl.answers import answers_equal, extract_boxed, majority_vote, normalize_answer


class TestExtractBoxed:
    def test_it_returns_the_content_of_the_last_box(self):
        assert extract_boxed(r"first \boxed{1} then \boxed{ 42 }.") == "42"

    def test_it_balances_nested_braces(self):
        assert extract_boxed(r"so \boxed{\frac{1}{2}} done") == r"\frac{1}{2}"

    def test_it_accepts_a_space_before_the_brace(self):
        assert extract_boxed(r"\boxed {x+1}") == "x+1"

    def test_it_reads_fbox_too(self):
        assert extract_boxed(r"\fbox{7}") == "7"

    def test_it_is_none_when_there_is_no_box(self):
        assert extract_boxed("the answer is 3") is None
        assert extract_boxed("") is None
        assert extract_boxed(None) is None

    def test_it_is_none_for_a_truncated_box(self):
        assert extract_boxed(r"\boxed{\frac{1}{2}") is None

    def test_escaped_braces_do_not_count(self):
        assert extract_boxed(r"\boxed{\{1, 2\}}") == r"\{1, 2\}"

    def test_a_box_without_braces_takes_the_next_token(self):
        assert extract_boxed(r"$\boxed 5$") == "5"

    def test_it_does_not_mistake_longer_commands_for_a_box(self):
        assert extract_boxed(r"\boxedx{3}") is None


class TestAnswersEqual:
    @pytest.mark.parametrize("a, b", [(r"\frac{1}{2}", "0.5"), ("1/2", "0.5"), (r"\frac{1}{2}", "1/2"), (r"\dfrac12", "0.5")])
    def test_equivalent_forms_are_equal(self, a, b):
        assert answers_equal(a, b)

    def test_different_numbers_are_not_equal(self):
        assert not answers_equal("2", "3")

    def test_none_is_never_equal(self):
        assert not answers_equal(None, "1")
        assert not answers_equal(None, None)

    def test_equal_strings_take_the_fast_path(self):
        assert answers_equal("  x + 1 ", "x+1", timeout_s=0.0)

    def test_a_pathological_input_times_out_instead_of_hanging(self):
        # 10^(10^10) makes SymPy build a 10-billion-digit integer inside one C call.
        start = time.monotonic()
        assert not answers_equal(r"10^{10^{10}}", "5", timeout_s=1.0)
        assert time.monotonic() - start < 5.0
        assert answers_equal(r"\frac{1}{2}", "0.5")  # the verifier recovered

    def test_it_works_off_the_main_thread(self):
        results = []
        worker = threading.Thread(target=lambda: results.append(answers_equal(r"\frac{3}{4}", "0.75")))
        worker.start()
        worker.join(timeout=30)
        assert results == [True]


class TestMajorityVote:
    def test_it_picks_the_most_common_answer(self):
        assert majority_vote(["1", "2", "2", None, None, None]) == "2"

    def test_a_tie_goes_to_the_answer_seen_first(self):
        assert majority_vote(["3", "5", "5", "3"]) == "3"

    def test_votes_are_counted_on_normalised_strings(self):
        assert majority_vote(["x + 1", "2", "x+1"]) == "x + 1"

    def test_it_is_none_when_every_answer_is_none(self):
        assert majority_vote([None, None]) is None
        assert majority_vote([]) is None


def test_normalisation_removes_spacing_and_dollars():
    assert normalize_answer(r"$\left( 1, 2 \right)$.") == "(1,2)"


def test_a_forked_process_gets_its_own_verifier():
    import os

    assert answers_equal("1/4", "0.25")  # the parent's child is running
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the fork
        try:
            ok = answers_equal("3/4", "0.75") and not answers_equal("3/4", "0.7")
            os.write(write_end, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    assert os.read(read_end, 1) == b"1"
    assert answers_equal("1/8", "0.125")  # the parent's verifier still answers correctly


class TestProperties:
    @given(st.text(alphabet="0123456789+-x{}^\\ ", max_size=20).filter(lambda s: s.count("{") == s.count("}")))
    def test_boxed_content_without_braces_round_trips(self, content):
        content = content.replace("{", "").replace("}", "").replace("\\", "")
        assert extract_boxed("text \\boxed{" + content + "} end") == content.strip()

    @given(st.lists(st.sampled_from(["1", "2", "3", None]), max_size=15))
    def test_the_majority_has_the_most_votes_and_was_seen_first_among_ties(self, answers):
        winner = majority_vote(answers)
        counts = {a: answers.count(a) for a in answers if a is not None}
        if not counts:
            assert winner is None
            return
        best = max(counts.values())
        assert counts[winner] == best
        tied = [a for a in answers if a is not None and counts[a] == best]
        assert winner == tied[0]
