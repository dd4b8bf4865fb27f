"""Fixtures: tiny BERT models built in-process from a BertConfig, saved with a tokenizer to a folder.

Random weights are enough: every hand-vs-library check holds on any weights. Nothing is downloaded.
"""

import os
import re
import string
import subprocess
import sys

import pytest
import torch
from transformers import BertConfig, BertModel, BertTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SHARED_DATA = os.path.join(ROOT, "..", "shared", "data")

needs_shared_data = pytest.mark.skipif(
    not os.path.isdir(SHARED_DATA),
    reason="../shared/data (real vocab, SQuAD and GLUE files) is not beside this checkout")

# Every word of the article's examples, so that the tiny tokenizer splits them into real words.
TEXTS = [
    "A man is playing a guitar. A person is making music.",
    "She opened the fridge and took out a carton of milk. flew to the moon. the fridge sang a song. "
    "painted the ocean blue.",
    "We introduce a new language representation model called BERT, which stands for Bidirectional "
    "Encoder Representations from Transformers. BERT is designed to pre-train deep bidirectional "
    "representations from unlabeled text by jointly conditioning on both left and right context in "
    "all layers. It obtains new state-of-the-art results on eleven natural language processing tasks, "
    "including pushing the GLUE score to 80.5% and SQuAD v1.1 question answering Test F1 to 93.2.",
    "What does BERT stand for? What is the GLUE score of BERT? On how many tasks does BERT get new "
    "results? What does BERT learn from? Who won the football world cup in 2018? How many layers does "
    "BERT have? Where was Ada born? Ada Lovelace was born in London in 1815.",
    "a gorgeous, witty, seductive movie. the plot is dull and the acting is worse. good bad film great",
]


def tiny_vocab_words():
    words = set()
    for t in TEXTS:
        words.update(re.findall(r"\w+|[^\w\s]", t.lower()))
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    return specials + sorted(words - set(chars)) + chars + ["##" + c for c in string.ascii_lowercase + string.digits]


def write_vocab(folder):
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w") as f:
        f.write("\n".join(tiny_vocab_words()) + "\n")
    return path


def tiny_config(vocab_size, **kw):
    base = dict(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=37, max_position_embeddings=512, initializer_range=0.2)
    base.update(kw)
    return BertConfig(**base)


def save_tiny(folder, model_class=BertModel, seed=0, **config_kw):
    """Build a tiny model of `model_class`, save it and its tokenizer into `folder`."""
    os.makedirs(folder, exist_ok=True)
    tok = BertTokenizer(vocab=write_vocab(folder))
    torch.manual_seed(seed)
    model = model_class(tiny_config(len(tok), **config_kw)).eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


class ProcessRefused(subprocess.Popen):
    """subprocess.Popen inside a test that is not marked slow: refused, naming the test."""

    test = "this test"

    def __init__(self, args, *rest, **kwargs):
        self._child_created = False                    # what Popen's __del__ reads; no process was started
        raise AssertionError(f"{self.test} starts a process ({args!r:.80}): a test that starts one is marked "
                             f"@pytest.mark.slow, so that the quick subset (-m 'not slow') leaves it out")


@pytest.fixture(autouse=True)
def a_quick_test_starts_no_process(request):
    """The quick subset (`pytest -m "not slow"`) leaves out the tests marked slow (pyproject.toml says which): every
    test that starts a process of its own (a script, torchrun, a bench) and every test measured at 2 s or more in
    one process. A test not so marked that starts a process fails here, naming itself, so the subset stays quick
    as tests are added."""
    if request.node.get_closest_marker("slow"):
        yield
        return
    refused = type("ProcessRefused", (ProcessRefused,), {"test": request.node.nodeid})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess, "Popen", refused)
        yield


@pytest.fixture(autouse=True)
def signals_stay_with_pytest():
    """A SIGTERM or Ctrl-C sent to the test session is meant for pytest, not for a run a test started in-process:
    left to the run (part4/run/training_run.py STOP_SIGNALS), it would stop that run at its next step and fail whichever
    test was training then, while the session went on. The scripts' own handling of SIGTERM is tested on real
    subprocesses (test_processes.py)."""
    from part4.run import training_run
    with pytest.MonkeyPatch.context() as patch:        # its own patch: a test's monkeypatch.undo() keeps it
        patch.setattr(training_run, "STOP_SIGNALS", {})
        yield


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    """A tiny pre-trained-style BERT (encoder + pooler, no task head)."""
    return save_tiny(str(tmp_path_factory.mktemp("tiny_bert")))


@pytest.fixture(scope="session")
def tiny_qa_dir(tmp_path_factory):
    """A tiny BERT with a span head (qa_outputs), as a SQuAD checkpoint would have."""
    from transformers import BertForQuestionAnswering
    return save_tiny(str(tmp_path_factory.mktemp("tiny_qa")), BertForQuestionAnswering, seed=3)


@pytest.fixture(scope="session")
def tiny_sst2_dir(tmp_path_factory):
    """A tiny two-label sequence classifier, as an SST-2 checkpoint would have."""
    from transformers import BertForSequenceClassification
    return save_tiny(str(tmp_path_factory.mktemp("tiny_sst2")), BertForSequenceClassification, seed=4, num_labels=2)
