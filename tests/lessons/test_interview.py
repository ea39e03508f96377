"""The interview bank: well-formed, covering every lesson, its self-check tells right from wrong for the practice
questions (the graded ones' key is the master's: see tests/grading/test_fair_by_exercise.py), a graded question shows
its strong answer only once it is answered, and no surface pattern of the choices gives the answers away."""

import math
import re
from pathlib import Path

import pytest

from crashlab.lessons import interview
from master_files import master_value

KEY = master_value(Path(__file__).resolve().parents[2] / "solutions" / "11_side_by_side.ipynb", "ex3_self_check",
                   "my_answers")


def test_every_question_is_complete_and_its_choices_distinct():
    ids = [q.qid for q in interview.BANK]
    assert len(ids) == len(set(ids))
    for q in interview.BANK:
        assert q.question and q.weak and q.strong and q.follow_up, q.qid
        assert len(q.choices) == 3 and len(set(q.choices)) == 3, q.qid
        assert q.weak not in q.choices, f"{q.qid}: the weak answer should be a mistake people make, not a choice"
        assert KEY[q.qid] in "ABC"[:len(q.choices)], q.qid
        if q.qid in interview.PRACTICE:
            assert sum(interview.check({q.qid: letter})[q.qid] for letter in "ABC") == 1, q.qid


def test_the_bank_covers_every_lesson_and_the_topics_an_interviewer_asks():
    assert {q.lesson for q in interview.BANK} >= {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"}
    text = " ".join(q.question + " " + q.strong for q in interview.BANK).lower()
    for topic in ("compensat", "continue-as-new", "zombie", "tool_use blocks", "forget idempotency keys", "page cache",
                  "@task", "one database transaction", "sticky_queue_schedule_to_start_timeout",
                  "virtual object", "awakeable", "push", "deployment it started on", "stripe-should-retry",
                  "datasource transaction", "is_continue_as_new_suggested", "inactivity_timeout", "cannot itself be "
                  "cancelled", "holds the object's key", "must refuse with a 400", "does not derive idempotency keys",
                  "turnstile", "auto_wrap_tools", "parallel_execution_mode", "heartbeat timeout"):
        assert topic in text, f"no question teaches {topic!r}"


def test_a_graded_question_shows_its_strong_answer_only_once_answered():
    graded = next(q for q in interview.BANK if q.graded)
    practice = next(q for q in interview.BANK if not q.graded)
    for unanswered in (graded.reveal(), graded.reveal(None)):
        assert graded.strong not in unanswered and "answer it first" in unanswered, unanswered
    assert graded.strong not in graded.reveal("D") and "not one of its letters" in graded.reveal("D")
    for letter in "ABCabc":
        shown = graded.reveal(letter)
        flat, strong = " ".join(shown.split()), " ".join(graded.strong.split())  # long lines wrap at words
        assert strong in flat and " ".join(graded.choices["ABC".index(letter.upper())].split()) in flat, shown
        assert "the strong answer" not in shown, "a graded question must not say whether the letter is right"
    assert " ".join(practice.strong.split()) in " ".join(practice.reveal().split())
    said = [practice.reveal(letter) for letter in "ABC"]
    assert sum("(the strong answer)" in text for text in said) == 1, said


def test_the_right_answers_are_not_all_in_one_position():
    assert set(KEY) == {q.qid for q in interview.BANK}
    assert len(set(KEY.values())) == 3, KEY


def test_an_unknown_question_is_a_clear_error():
    with pytest.raises(KeyError, match="no such question"):
        interview.check({"q99": "A"})


# --- surface patterns ------------------------------------------------------------------------------------------
# A learner who has not read the lessons may still pick by form: the longest choice, the one without "always", the
# one that shares most words with the others. Each rule below picks choices by form alone; none may find the strong
# answer more often than chance does (z above Z_LIMIT, about one chance in forty), and neither may the best of them
# learnt from the other questions, as a test-wise learner would learn it.
Z_LIMIT = 2.0
ABSOLUTE = re.compile(r"\b(always|never|only|nothing|every|everything|all|any|none|guaranteed?|exactly|forever|"
                      r"completely|whatever|cannot|must)\b", re.I)
HEDGE = re.compile(r"\b(may|might|can|could|usually|often|unless|if|some|depends|until|once)\b", re.I)
STOP = set("a an the of to in on for and or is it its by as at be with from that this so not no yes".split())
FLAGS = {
    "an absolute word": lambda c: bool(ABSOLUTE.search(c)),
    "a hedge": lambda c: bool(HEDGE.search(c)),
    "a leading yes": lambda c: c.lower().startswith("yes"),
    "a leading no, nothing or not": lambda c: bool(re.match(r"(no|nothing|not)\b", c, re.I)),
    "a semicolon": lambda c: ";" in c,
    "a colon": lambda c: ":" in c,
    "a comma": lambda c: "," in c,
    "a code-like token": lambda c: bool(re.search(r"[_()`.]\w|\w[_()`]", c)),
    "a digit": lambda c: bool(re.search(r"\d", c)),
    "because, so, since or as": lambda c: bool(re.search(r"\b(because|so|since|as)\b", c, re.I)),
}


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_]+", text.lower()) if w not in STOP and len(w) > 2}


def ranked(values: list, which: str) -> list[int]:
    """The choices a rank picks: the highest, the middle one or the lowest value (all those tied with it)."""
    target = {"top": max(values), "bottom": min(values), "middle": sorted(values)[len(values) // 2]}[which]
    return [i for i, v in enumerate(values) if v == target]


def measures(question: str, choices: tuple[str, ...]) -> dict[str, list]:
    sets = [words(c) for c in choices]
    return {"length": [len(c) for c in choices], "word count": [len(re.findall(r"\S+", c)) for c in choices],
            "words shared with the question": [len(s & words(question)) for s in sets],
            "words shared with the other choices": [sum(len(s & t) for t in sets if t is not s) for s in sets]}


def rules() -> dict[str, list[list[int]]]:
    """Every rule: for each question, the choices it picks (empty where it cannot tell the choices apart). Each rule
    comes with its opposite, so a pattern that is never right (and lets a learner strike a choice) counts too."""
    found: dict[str, list[list[int]]] = {}
    for q in interview.BANK:
        n = len(q.choices)
        picks = {f"position {letter}": [i] for i, letter in enumerate("ABC")}
        for measure, values in measures(q.question, q.choices).items():
            for which in ("top", "middle", "bottom"):
                picks[f"{measure}: {which}"] = ranked(values, which) if len(set(values)) > 1 else []
        for name, flag in FLAGS.items():
            having = [i for i, c in enumerate(q.choices) if flag(c)]
            picks[f"with {name}"] = having if 0 < len(having) < n else []
        for name, chosen in list(picks.items()):
            picks[f"not {name}"] = [i for i in range(n) if i not in chosen] if 0 < len(chosen) < n else []
        for name, chosen in picks.items():
            found.setdefault(name, []).append(chosen)
    return found


def score(picks: list[list[int]], rights: list[int]) -> tuple[float, float, float]:
    """A rule's hits (1/k for a question where it picks k choices, the right one among them), what chance would
    give (1/3 per question it picks in), and the z of the difference under chance."""
    hits = expected = variance = 0.0
    for chosen, right in zip(picks, rights):
        if chosen:
            k = len(chosen)
            hits += (right in chosen) / k
            expected += 1 / 3
            variance += 1 / (3 * k) - 1 / 9
    return hits, expected, (hits - expected) / math.sqrt(variance) if variance else 0.0


RIGHTS = ["ABC".index(KEY[q.qid]) for q in interview.BANK]


def test_the_longest_the_median_and_the_shortest_choice_are_each_right_about_a_third_of_the_time():
    lengths = [[len(c) for c in q.choices] for q in interview.BANK]
    for which in ("top", "middle", "bottom"):
        right = sum(ranked(values, which) == [r] for values, r in zip(lengths, RIGHTS))
        assert len(interview.BANK) / 3 - 2 <= right <= len(interview.BANK) / 3 + 2, \
            f"the {which} length is the right one in {right} of {len(interview.BANK)} questions"


def test_no_surface_pattern_finds_the_answers_above_chance():
    above = {name: score(picks, RIGHTS) for name, picks in rules().items()}
    above = {name: f"{hits:.1f} right where chance gives {expected:.1f} (z {z:.1f})"
             for name, (hits, expected, z) in above.items() if z > Z_LIMIT}
    assert not above, f"a learner who picks by form alone beats chance: {above}"


def test_the_best_pattern_learnt_from_the_other_questions_does_not_beat_chance_either():
    """Leave one question out, find the rule that did best on the rest, and let it pick in the one left out."""
    found = rules()
    picks = []
    for held in range(len(interview.BANK)):
        def train(name: str) -> float:
            rest = [(p, r) for i, (p, r) in enumerate(zip(found[name], RIGHTS)) if i != held]
            hits, expected, _ = score([p for p, _ in rest], [r for _, r in rest])
            return hits - expected
        best = max(sorted(found), key=train)
        picks.append(found[best][held] or [0, 1, 2])
    hits, expected, z = score(picks, RIGHTS)
    assert z <= Z_LIMIT, f"the learnt rule finds {hits:.1f} answers where chance gives {expected:.1f} (z {z:.1f})"
