"""The article's numbers have one home (part4/paper/article.py): every number the article prints is an entry there or
on its list of numbers that are not results, every entry is a number the article or its reference logs print, and
no script types one of them again."""

import ast
import glob
import os
import re

import pytest
from conftest import ROOT

import bert_part4_math as math_script
import bert_part4_squad as squad
from part4.data.readers import GLUE
from part4.paper import article

ARTICLE_DIR = os.path.join(ROOT, "..", "shared", "article")
ARTICLE_TEXT = os.path.join(ARTICLE_DIR, "bert_part4_article.txt")
needs_article = pytest.mark.skipif(not os.path.isfile(ARTICLE_TEXT),
                                   reason="../shared/article/bert_part4_article.txt is not beside this checkout")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def unaccounted(text, entries, not_results):
    """The article's numbers that are neither an entry's nor on the list of non-results."""
    covered = {n for e in entries for n in article.numbers_in(e.value)}
    excluded = {n for numbers in not_results.values() for n in numbers}
    return sorted(set(article.numbers_in(text)) - covered - excluded)


def test_numbers_in_reads_the_articles_notations():
    assert article.numbers_in("W has $3 \\times 768 = 2{,}304$ numbers, plus 3: 2,307") == ["3", "768", "2,304", "3", "2,307"]
    assert article.numbers_in("tokens 21..30, tau = +4.00, max = 1.0e-05, logits [-0.65]") == ["21", "30", "4.00",
                                                                                             "1.0e-05", "-0.65"]
    assert article.numbers_in("CoNLL-2003 and e^{1.50}; h5 x2") == ["2003", "1.50"]


@needs_article
def test_every_number_of_the_article_is_an_entry_or_has_its_reason():
    text = read(ARTICLE_TEXT)
    assert unaccounted(text, article.ENTRIES, article.NOT_RESULTS) == []
    numbers = set(article.numbers_in(text))
    covered = numbers & {n for e in article.ENTRIES for n in article.numbers_in(e.value)}
    assert len(numbers) > 250 and len(covered) > 200          # the article has ~270 distinct numbers, most of them results


@needs_article
def test_removing_one_entry_fails_the_check():
    text = read(ARTICLE_TEXT)
    for key in ("v1.dev.em", "mrpc.lr5e-05.correct", "flow.born", "toy.glue.sumexp"):
        rest = [e for e in article.ENTRIES if e.key != key]
        assert unaccounted(text, rest, article.NOT_RESULTS) == article.numbers_in(article.value(key)), key
    dropped = {reason: numbers for reason, numbers in article.NOT_RESULTS.items() if "arXiv" not in reason}
    assert unaccounted(text, article.ENTRIES, dropped) == ["1810.04805"]


@needs_article
def test_no_number_is_both_a_result_and_a_non_result_and_every_exclusion_is_in_the_article():
    numbers = set(article.numbers_in(read(ARTICLE_TEXT)))
    covered = {n for e in article.ENTRIES for n in article.numbers_in(e.value)}
    excluded = {n for ns in article.NOT_RESULTS.values() for n in ns}
    assert covered & excluded == set()
    assert excluded - numbers == set()


@needs_article
def test_every_entry_is_printed_by_the_article_or_its_reference_logs():
    printed = set(article.numbers_in(read(ARTICLE_TEXT)))
    for log in glob.glob(os.path.join(ARTICLE_DIR, "reference_logs", "*.txt")):
        printed.update(article.numbers_in(read(log)))
    for e in article.ENTRIES:
        assert set(article.numbers_in(e.value)) <= printed, (e.key, e.value)


def test_every_entry_says_what_it_is_and_where_ours_comes_from():
    assert len(article.NUMBERS) == len(article.ENTRIES)          # keys are unique
    scripts = {article.FINETUNE, article.HEADS, article.SQUAD, article.MATH}
    for e in article.ENTRIES:
        assert e.what and e.where and e.kind in ("result", "timing", "random-head", "noise", "paper"), e.key
        assert (e.script in scripts) if e.kind != "paper" else e.script in scripts | {""}, e.key
        assert not e.field or e.script, e.key
        assert bool(e.model) == bool(e.flag), e.key


@needs_article
def test_the_sentence_the_math_script_quotes_is_the_articles():
    assert f'"{article.TABLE2_SENTENCE}"' in read(ARTICLE_TEXT)
    assert article.MATH_LABELS["table2_single"] == f"yes, '{article.TABLE2_SENTENCE}'"


def test_the_labels_are_built_from_the_entries():
    assert article.ARTICLE_FINAL[("mrpc", 5e-5)] == "0.8701 (355/408), F1 0.9094"
    assert article.SQUAD_LABELS["v1_dev"] == "EM 80.79, F1 88.08, 10753 windows, 9.3 min"
    assert article.SQUAD_LABELS["v2_best"] == "tau +4.00, F1 78.98, EM 76.22, 52.1%, 8.2 min"
    assert article.HEADS_LABELS["new_params"] == "2,307 out of 109,484,547 (0.0021%)"
    assert article.MATH_LABELS["null"][2] == {"s_null": "6.61 + 6.58 = 13.19", "s_hat": "8.45 + 7.71 = 16.16",
                                              "answer": ("yes", "no")}
    assert article.MATH_LABELS["flow"][11] == (0.087, 0.045, 0.740)
    assert list(article.SQUAD_LABELS["v1_demo"]) == squad.V1_QUESTIONS
    assert list(article.SQUAD_LABELS["v2_demo"]) == squad.V2_QUESTIONS
    assert [q for q, _ in math_script.GOLD_SPANS] == [squad.V1_QUESTIONS[0], squad.V1_QUESTIONS[3]]
    assert math_script.NULL_QUESTIONS == [squad.V2_QUESTIONS[0]] + squad.V2_QUESTIONS[2:]


def test_the_tasks_paper_numbers_are_table_1s():
    """part4/data/readers.py (GLUE) keeps each task's Table 1 number with the task; they must be the row this room quotes."""
    for name, task in GLUE.items():
        assert task.paper_test == article.TABLE1_BASE.get(name, ()), name
    assert GLUE["sst2"].paper_dev == article.value("sst2.paper_dev") and GLUE["mrpc"].paper_dev == article.value(
        "mrpc.paper_dev")
    columns = [v for values in article.TABLE1_BASE.values() for v in values]      # MNLI-m and MNLI-mm: two columns
    assert len(columns) == 9 and round(sum(columns) / 9, 1) == article.PAPER_AVERAGE


def typed_numbers(source, distinct):
    """(line, number) of the article's distinctive numbers in a module's code: string and number constants, but not
    docstrings (a worked example in a docstring is allowed)."""
    tree = ast.parse(source)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docs and not isinstance(node.value, bool):
            text = node.value if isinstance(node.value, str) else repr(node.value)
            found += [(node.lineno, n) for n in article.numbers_in(str(text)) if n in distinct]
    return found


def test_no_script_or_room_types_an_article_number_again():
    distinct = {n for e in article.ENTRIES for n in article.numbers_in(e.value) if len(re.sub(r"\D", "", n)) >= 4}
    assert typed_numbers('x = "FINAL 0.9255"\ny = 10753\n', distinct) == [(1, "0.9255"), (2, "10753")]
    assert typed_numbers('def f():\n    """0.9255, as printed"""\n', distinct) == []
    for path in glob.glob(os.path.join(ROOT, "*.py")) + glob.glob(os.path.join(ROOT, "part4", "**", "*.py"), recursive=True):
        if os.path.basename(path) != "article.py":
            assert typed_numbers(read(path), distinct) == [], path
