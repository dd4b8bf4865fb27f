"""BERT, explained - Part 4: SQuAD v1.1 and v2.0 with our own span search (paper §4.2, §4.3).

Reproduces, in the article's order:
  1. the span head of a SQuAD v1.1 checkpoint: W is (2, H), row 0 = S, row 1 = E, plus a bias;
  2. the four abstract questions: answer, span score S.T_i + E.T_j, runners-up, P_start, a hand check;
  3. the full SQuAD v1.1 dev set: 384-token windows overlapping by 128, the 20 best starts x 20 best
     ends per window, official EM/F1 (article: EM 80.79, F1 88.08);
  4. SQuAD v2.0: s_null = S.C + E.C against the best span on four abstract questions;
  5. the full SQuAD v2.0 dev set and the tau sweep: answer iff s_hat > s_null + tau (article: best
     tau +4.00, F1 78.98).
Writes the official prediction files (squad_v1_predictions.json, squad_v2_predictions.json,
squad_v2_nonnull_predictions.json, squad_v2_null_odds.json) and results/part4_squad.{log,json}.
"""

import collections
import json
import math
import os
import re
import string
import sys
import time
from dataclasses import dataclass
from functools import partial

import numpy as np
import tokenizers
import torch
import transformers
from tqdm import tqdm
from transformers import AutoTokenizer, BertForQuestionAnswering

from bert_part4_common import (
    ALONE,
    ArgumentParser,
    Fatal,
    Report,
    add_common_flags,
    all_agree,
    article,
    autocast,
    autocast_dtype,
    check_positions,
    check_positive,
    check_writable_dir,
    command_line,
    file_problem,
    fresh_head,
    gather,
    line_plot,
    load_hub_dataset,
    load_pretrained,
    model_problem,
    portable,
    preflight,
    run_cli,
    start_processes,
    write_atomic,
)
from bert_part4_heads import PASSAGE, softmax_bias_gap, span_logits
from bert_part4_runs import batches_by_length, padded

V1_MODEL = "csarron/bert-base-uncased-squad-v1"
V2_MODEL = "deepset/bert-base-uncased-squad2"
V1_QUESTIONS = ["What does BERT stand for?", "What is the GLUE score of BERT?",
                "On how many tasks does BERT get new results?", "What does BERT learn from?"]
N_BEST, MAX_ANSWER = 20, 30             # run_squad.py: the 20 best starts and ends, answers of at most 30 tokens
TAU_SWEEP = (-6.0, 6.0, 0.25)          # tau from, to, step (article: -6 to +6 in steps of 0.25)
V2_QUESTIONS = ["What does BERT stand for?", "What is the GLUE score of BERT?",
                "Who won the football world cup in 2018?", "How many layers does BERT have?"]
VERSIONS = {"v1": "1.1", "v2": "2.0"}   # the parts of --only that score a dev set, and their SQuAD version
ARTICLE_MODELS = {"v1": V1_MODEL, "v2": V2_MODEL}
PUNCTUATION = set(string.punctuation)
HUB_DATASETS = {"1.1": "rajpurkar/squad", "2.0": "rajpurkar/squad_v2"}

# What the article printed (reference_logs/part4_squad_stdout.txt), shown beside our numbers on every
# route; the run's header names the checkpoints the article used.
ARTICLE = {
    "bias": "start +0.0049, end +0.0048",
    "v1_demo": {V1_QUESTIONS[0]: "15.16", V1_QUESTIONS[1]: "16.81", V1_QUESTIONS[2]: "11.59",
                V1_QUESTIONS[3]: "9.87"},
    "v1_dev": "EM 80.79, F1 88.08, 10753 windows, 9.3 min",
    "v2_demo": {V2_QUESTIONS[0]: "+13.07", V2_QUESTIONS[1]: "+11.24", V2_QUESTIONS[2]: "-19.92",
                V2_QUESTIONS[3]: "+2.97"},
    "v2_at0": "F1 78.47, EM 75.47, 56.7%", "v2_best": "tau +4.00, F1 78.98, EM 76.22, 52.1%, 8.2 min",
}


def build_parser():
    p = ArgumentParser(
        description="Part 4, SQuAD: span search on SQuAD v1.1 and v2.0 dev, official EM/F1, the "
                    "no-answer score s_null and the tau sweep (paper §4.2, §4.3).",
        epilog="Windows follow the Hugging Face tokenizer's `stride`: consecutive windows share "
               "--stride tokens of the passage (Google's "
               "run_squad.py instead moves each window on by doc_stride tokens).")
    p.add_argument("--v1-model", default=V1_MODEL, help=f"SQuAD v1.1 QA model, Hub id or folder (default, article: {V1_MODEL})")
    p.add_argument("--v2-model", default=V2_MODEL, help=f"SQuAD v2.0 QA model, Hub id or folder (default, article: {V2_MODEL})")
    p.add_argument("--v1-data", help="official dev-v1.1.json (default: the Hub dataset rajpurkar/squad)")
    p.add_argument("--v2-data", help="official dev-v2.0.json (default: the Hub dataset rajpurkar/squad_v2)")
    p.add_argument("--only", action="append", choices=["demo", "v1", "v2"],
                   help="run only these parts (repeatable; default: all)")
    p.add_argument("--limit", type=int, help="only the first N questions of each dev file, in file order")
    p.add_argument("--batch-size", type=int, default=64, help="windows per forward pass (default 64)")
    p.add_argument("--max-len", type=int, default=384, help="window length in tokens (default 384, as paper/run_squad.py)")
    p.add_argument("--stride", type=int, default=128, help="tokens shared by consecutive windows (default 128: run_squad.py's "
                                                           "doc_stride, which there is the step; see below)")
    p.add_argument("--n-best", type=int, default=N_BEST,
                   help="best starts and best ends tried per window (default 20, as run_squad.py)")
    p.add_argument("--max-answer", type=int, default=MAX_ANSWER, help="longest answer in tokens (default 30, as run_squad.py)")
    p.add_argument("--tau-min", type=float, default=TAU_SWEEP[0], help="tau sweep start (default -6, as the article)")
    p.add_argument("--tau-max", type=float, default=TAU_SWEEP[1], help="tau sweep end (default +6, as the article)")
    p.add_argument("--tau-step", type=float, default=TAU_SWEEP[2], help="tau sweep step (default 0.25, as the article)")
    p.add_argument("--dtype", default="auto", help="auto (the default: bf16 on CUDA, fp16 on MPS, fp32 on the CPU), "
                                                   "fp32, bf16 or fp16")
    add_common_flags(p)
    return p


def parse_args(argv):
    p = build_parser()
    args = p.parse_args(argv)
    args.only = sorted(set(args.only or ["demo", "v1", "v2"]))
    if args.limit is not None and args.limit <= 0:
        raise Fatal(f"--limit {args.limit}: must be a positive number of questions")
    if not 0 <= args.stride < args.max_len:
        raise Fatal(f"--stride {args.stride}: must be at least 0 and below --max-len {args.max_len}")
    check_positive({"--batch-size": args.batch_size, "--n-best": args.n_best, "--max-answer": args.max_answer})
    if args.tau_step <= 0 or args.tau_max < args.tau_min:
        raise Fatal("--tau-step must be positive and --tau-max at least --tau-min")
    return args


# --- The official answer normalisation and scores (evaluate-v1.1.py / evaluate-v2.0.py) ---

def normalize_answer(s):
    """Lower case, drop punctuation, the articles a/an/the, and extra white space."""
    s = "".join(ch for ch in s.lower() if ch not in PUNCTUATION)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def exact_match(prediction, gold):
    return int(normalize_answer(prediction) == normalize_answer(gold))


def squad_f1(prediction, gold, version="2.0"):
    """F1 = 2 P R / (P + R) over the shared words of the normalised texts.

    Both official scripts agree except when a text normalises to nothing: v2.0 then scores 1 if
    both are empty (a correct "no answer"), v1.1 scores 0.
    """
    same, n_pred, n_gold = shared_words(prediction, gold)
    if version == "2.0" and (not n_pred or not n_gold):
        return float(n_pred == n_gold == 0)
    if same == 0:
        return 0.0
    precision, recall = same / n_pred, same / n_gold
    return 2 * precision * recall / (precision + recall)


def shared_words(prediction, gold):
    """How many normalised words the two share (a repeated word counts as often as in both), and their lengths."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    return sum((collections.Counter(pred) & collections.Counter(ref)).values()), len(pred), len(ref)


def question_scores(prediction, golds, version):
    """EM and F1 of one prediction against the best-matching gold answer.

    v2.0 drops gold answers that normalise to nothing; a question left with none is unanswerable,
    and then only the empty prediction is right.
    """
    if version == "2.0":
        golds = [g for g in golds if normalize_answer(g)] or [""]
    return (max(exact_match(prediction, g) for g in golds),
            max(squad_f1(prediction, g, version) for g in golds))


# --- Reading the data: official SQuAD JSON, or the Hub datasets ---

def read_squad_json(path, version, flag):
    """Questions in file order: dicts with id, question, context, golds (texts), starts (their answer_start),
    impossible."""
    if not os.path.isfile(path):
        raise Fatal(f"{flag} {path}: no such file")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)["data"]
        examples = [{"id": qa["id"], "question": qa["question"], "context": par["context"],
                     "golds": [a["text"] for a in qa["answers"]], "starts": [a["answer_start"] for a in qa["answers"]],
                     "impossible": bool(qa.get("is_impossible", False)),
                     "v2": "is_impossible" in qa}
                    for doc in data for par in doc["paragraphs"] for qa in par["qas"]]
    except (ValueError, KeyError, TypeError) as e:
        raise Fatal(f"{flag} {path}: not an official SQuAD JSON file ({type(e).__name__}: {e})")
    if not examples:
        raise Fatal(f"{flag} {path}: holds no questions")
    is_v2 = any(ex["v2"] for ex in examples)
    if version == "2.0" and not is_v2:
        raise Fatal(f"{flag} {path}: looks like SQuAD v1.1 (no 'is_impossible' field); pass a v2.0 file")
    if version == "1.1" and is_v2:
        raise Fatal(f"{flag} {path}: looks like SQuAD v2.0 (it has 'is_impossible'); pass a v1.1 file")
    return examples


def read_squad(path, version, flag, split="validation"):
    if path:
        return read_squad_json(path, version, flag)
    rows = load_hub_dataset(HUB_DATASETS[version], None, split, flag)
    return [{"id": r["id"], "question": r["question"], "context": r["context"], "golds": r["answers"]["text"],
             "starts": r["answers"]["answer_start"], "impossible": not r["answers"]["text"], "v2": version == "2.0"}
            for r in rows]


# --- Long passages: overlapping windows of max_len tokens ---

def make_windows(tok, examples, max_len, stride):
    """One batched tokenizer call; each window keeps its question index, offsets and passage mask.

    Worked example (max_len 12, stride 2, a question of 2 tokens): 12 - 2 - 3 = 7 passage tokens fit,
    so passage tokens 0-6 go in window 1 and tokens 5-11 in window 2: the two share 2 tokens.
    """
    enc = tok([ex["question"].lstrip() for ex in examples], [ex["context"] for ex in examples],
              truncation="only_second", max_length=max_len, stride=stride,
              return_overflowing_tokens=True, return_offsets_mapping=True)
    windows = []
    for w, ids in enumerate(enc["input_ids"]):
        seq = enc.sequence_ids(w)
        windows.append({"example": enc["overflow_to_sample_mapping"][w], "input_ids": ids,
                        "token_type_ids": enc["token_type_ids"][w], "offsets": enc["offset_mapping"][w],
                        "passage": [s == 1 for s in seq]})
    return windows


def uncovered_questions(tok, examples, windows):
    """The questions whose windows stop before the end of their passage: no window holds the passage's last token.

    The windows of a question must, together, cover its passage. tokenizers 0.23.1 and 0.23.2 cut the overflow
    short: on SQuAD v1.1 dev the 183 questions that need several windows get at most two, the 31 that need three
    lose their third, and the windows of 161 of them stop before the end of the passage (10,753 windows instead of
    10,784). Checked from the offsets: each passage, tokenized alone, ends at the end offset of
    its last token, and some window of the question must reach it."""
    contexts = list(dict.fromkeys(ex["context"] for ex in examples))
    alone = tok(contexts, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    end = {c: (offsets[-1][1] if offsets else 0) for c, offsets in zip(contexts, alone)}
    reach = [0] * len(examples)
    for w in windows:
        last = max((o[1] for o, p in zip(w["offsets"], w["passage"]) if p), default=0)
        reach[w["example"]] = max(reach[w["example"]], last)
    return [q for q, ex in enumerate(examples) if reach[q] < end[ex["context"]]]


def coverage_line(n_uncovered, n_questions):
    """The log line when some passages are not fully covered (empty when all are), naming the library versions."""
    if not n_uncovered:
        return ""
    return (f"WARNING: the windows of {n_uncovered} of {n_questions} questions stop before the end of their passage "
            f"(transformers {transformers.__version__}, tokenizers {tokenizers.__version__}; tokenizers 0.23.1 and 0.23.2 "
            f"cut the overflow short: install another version for full coverage)")


# --- Training targets: the answer's first and last token in each window (paper §4.2, §4.3) ---

def span_targets(offsets, passage, answer_start, answer_end):
    """The start and end token of the answer's characters [answer_start, answer_end) in one window, or
    (0, 0), the [CLS] token, when the window does not hold the whole answer (paper §4.2, §4.3).

    Worked example: context "Ada was born in London in 1815.", answer "London" = characters [16, 22).
    A window [CLS] where ? [SEP] ada was born in london in 1815 . [SEP] has passage tokens 4..11 with
    offsets (0,3) (4,7) (8,12) (13,15) (16,22) ...: the start is the last passage token that begins at
    or before 16, token 8 ("london"), the end the first that ends at or after 22, token 8 again: (8, 8).
    A window whose passage starts at "in 1815" (offset 23) cannot hold it: (0, 0).
    """
    tokens = [t for t, p in enumerate(passage) if p]
    if not tokens or offsets[tokens[0]][0] > answer_start or offsets[tokens[-1]][1] < answer_end:
        return 0, 0
    i = max(t for t in tokens if offsets[t][0] <= answer_start)
    j = min(t for t in tokens if offsets[t][1] >= answer_end)
    return i, j


def answer_chars(example):
    """[start, end) of the first gold answer in the context, white space trimmed; None when the file's
    answer_start does not point at the answer's text (or there is no answer)."""
    if not example["golds"]:
        return None
    text, start = example["golds"][0], example["starts"][0]
    if example["context"][start:start + len(text)] != text or not text.strip():
        return None
    start += len(text) - len(text.lstrip())
    return start, start + len(text.strip())


def encode_squad(tok, examples, max_len, stride):
    """Training windows: make_windows' windows, each with its start and end token (or [CLS] for none).

    A question whose answer_start does not match its context is left out of training and counted."""
    chars = [None if ex["impossible"] else answer_chars(ex) for ex in examples]
    kept = [k for k, (ex, c) in enumerate(zip(examples, chars)) if c is not None or ex["impossible"]]
    kept_examples = [examples[k] for k in kept]
    windows = make_windows(tok, kept_examples, max_len, stride)
    starts, ends = [], []
    for w in windows:
        c = chars[kept[w["example"]]]
        i, j = span_targets(w["offsets"], w["passage"], *c) if c else (0, 0)
        starts.append(i)
        ends.append(j)
    per_question = np.asarray(windows_per_question(windows, len(kept)))
    return {"input_ids": [w["input_ids"] for w in windows], "token_type_ids": [w["token_type_ids"] for w in windows],
            "start_positions": starts, "end_positions": ends, "full_lengths": [len(w["input_ids"]) for w in windows],
            "targets": ("start_positions", "end_positions"), "questions": len(kept),
            "skipped": len(examples) - len(kept), "uncovered": len(uncovered_questions(tok, kept_examples, windows)),
            "multi_window": int((per_question > 1).sum()), "to_cls": sum(1 for i in starts if i == 0)}


# --- The span score S.T_i + E.T_j, best over j >= i, inside the passage, at most max_answer tokens ---

def best_span(start, end, passage_tokens, max_len=30):   # max_len: the longest answer (max_answer), not --max-len
    """max over i <= j of S.T_i + E.T_j, inside the passage, at most 30 tokens long"""
    best = None
    for i in passage_tokens:
        for j in passage_tokens:
            if i <= j < i + max_len and (best is None or start[i] + end[j] > best[0]):
                best = (start[i] + end[j], i, j)
    return best


# The article's best_span above is the reference (the tests check best_spans against it); below, the same
# search batched. Worked example, the article's 4-token toy (bert_part4_math.py's TOY_START and TOY_END):
#   S.T_i = [0.5, 1.0, 3.0, 0.2], E.T_j = [2.8, 0.1, 1.0, 1.5]; every cell is S.T_i + E.T_j:
#            j=0   j=1   j=2   j=3
#     i=0    3.3   0.6   1.5   2.0
#     i=1    3.8   1.1   2.0   2.5
#     i=2    5.8   3.1   4.0   4.5
#     i=3    3.0   0.3   1.2   1.7
#   The largest cell, 5.8 at (i=2, j=0), ends before it starts (j < i): rejected. The best with j >= i is
#   4.5 at (2, 3). With n_best = 2, only the starts i = 2, 1 and the ends j = 0, 3 are paired: (2, 0) and
#   (1, 0) are rejected, (2, 3) scores 4.5 and (1, 3) 2.5, so the search still finds (2, 3).

def best_spans(start, end, passage, n_best, max_answer, top=1, window=None):
    """For each window of a batch: the `top` best spans, searched as run_squad.py does.

    The n_best highest start scores and the n_best highest end scores of the window (padding left
    out) are paired; a pair counts if both tokens are in the passage and i <= j < i + max_answer.
    start, end: (B, L) scores S.T_i and E.T_j; passage, window: (B, L) bool. Returns scores, i, j,
    each (B, top); a window with no valid span scores -inf.
    """
    neg = torch.tensor(float("-inf"), device=start.device)
    start, end = start.float(), end.float()
    if window is not None:
        start, end = torch.where(window, start, neg), torch.where(window, end, neg)
    k = min(n_best, start.shape[1])
    s_val, s_idx = start.topk(k, -1)                              # (B, k) the best starts
    e_val, e_idx = end.topk(k, -1)                                # (B, k) the best ends
    s_val = torch.where(passage.gather(1, s_idx), s_val, neg)     # inside the passage only
    e_val = torch.where(passage.gather(1, e_idx), e_val, neg)
    score = s_val[:, :, None] + e_val[:, None, :]                 # (B, k, k): S.T_i + E.T_j
    length = e_idx[:, None, :] - s_idx[:, :, None] + 1            # j - i + 1
    score = torch.where((length >= 1) & (length <= max_answer), score, neg)
    val, flat = score.flatten(1).topk(min(top, k * k), -1)        # (B, top)
    return val, s_idx.gather(1, flat // k), e_idx.gather(1, flat % k)


def null_score(start, end):
    """s_null = S.C + E.C: the 'span' that starts and ends at [CLS], token 0."""
    return start[:, 0].float() + end[:, 0].float()


# --- Running the model over all windows: sorted by length, padded per batch ---

@dataclass(frozen=True)
class SpanSearch:
    """How the dev set is cut and searched (run_squad.py's settings by default)."""
    max_len: int = 384           # window length in tokens
    stride: int = 128            # tokens shared by consecutive windows
    batch_size: int = 64         # windows per forward pass
    n_best: int = N_BEST         # best starts and best ends tried per window
    max_answer: int = MAX_ANSWER  # longest answer in tokens


def pad_batch(windows, idx, device):
    """The windows idx as model inputs padded to the longest of them, and their passage mask."""
    rows = [windows[w] for w in idx]
    inputs = {"input_ids": padded([w["input_ids"] for w in rows]), "token_type_ids": padded([w["token_type_ids"] for w in rows]),
              "attention_mask": padded([[1] * len(w["input_ids"]) for w in rows])}
    passage = padded([w["passage"] for w in rows], value=False, dtype=torch.bool)
    return {k: v.to(device) for k, v in inputs.items()}, passage.to(device)


def score_windows(model, windows, device, dtype, batch_size, n_best, max_answer, team=ALONE):
    """Per window: the best span score, its (i, j), and s_null. Also the seconds spent in the model.
    Under torchrun each process scores every N-th batch, and all the scores are gathered on every process."""
    n = len(windows)
    best, i_best, j_best, s_null = np.zeros(n), np.zeros(n, int), np.zeros(n, int), np.zeros(n)
    model_seconds = 0.0
    batches = batches_by_length([len(w["input_ids"]) for w in windows], batch_size)[team.rank::team.world]
    with torch.inference_mode():
        bar = tqdm(total=sum(map(len, batches)), desc="windows", unit="window", file=sys.stderr, leave=False,
                   disable=not team.main)
        for idx in batches:
            inputs, passage = pad_batch(windows, idx, device)
            t0 = time.perf_counter()
            with autocast(device, dtype):
                out = model(**inputs)
            if device.type == "cuda":
                torch.cuda.synchronize()
            model_seconds += time.perf_counter() - t0
            val, i, j = best_spans(out.start_logits, out.end_logits, passage, n_best, max_answer,
                                   window=inputs["attention_mask"].bool())
            best[idx], i_best[idx], j_best[idx] = val[:, 0].cpu().numpy(), i[:, 0].cpu().numpy(), j[:, 0].cpu().numpy()
            s_null[idx] = null_score(out.start_logits, out.end_logits).cpu().numpy()
            bar.update(len(idx))
        bar.close()
    if team.world > 1:                                  # every process's windows, into the same arrays
        mine = [i for idx in batches for i in idx]
        for rows, parts in gather(team, (mine, [best[mine], i_best[mine], j_best[mine], s_null[mine]])):
            best[rows], i_best[rows], j_best[rows], s_null[rows] = parts
    return {"best": best, "i": i_best, "j": j_best, "s_null": s_null, "model_seconds": model_seconds}


def best_per_question(examples, windows, scored):
    """The best span over all windows of a question, its text, and s_null = the minimum over its windows (as
    run_squad.py: the smallest null score of the question's features; its max-context check is not applied)."""
    out = [{"score": float("-inf"), "text": "", "s_null": float("inf")} for _ in examples]
    for w, win in enumerate(windows):
        q = out[win["example"]]
        q["s_null"] = min(q["s_null"], scored["s_null"][w])
        if scored["best"][w] > q["score"]:
            a, b = win["offsets"][scored["i"][w]][0], win["offsets"][scored["j"][w]][1]
            q.update(score=float(scored["best"][w]), text=examples[win["example"]]["context"][a:b])
    return out


def predict(model, tok, examples, search, device, dtype, team=ALONE):
    """Windows -> model -> span search -> the best answer of every question, with timings. search: a SpanSearch."""
    t0 = time.perf_counter()
    windows = make_windows(tok, examples, search.max_len, search.stride)
    tokenize_seconds = time.perf_counter() - t0
    uncovered = len(uncovered_questions(tok, examples, windows))
    scored = score_windows(model, windows, device, dtype, search.batch_size, search.n_best, search.max_answer, team)
    answers = best_per_question(examples, windows, scored)
    per_question = windows_per_question(windows, len(examples))
    return answers, {"windows": len(windows), "uncovered": uncovered, "tokenize_seconds": tokenize_seconds,
                     "per_question": per_question,
                     "model_seconds": scored["model_seconds"], "seconds": time.perf_counter() - t0}


def windows_per_question(windows, n_questions):
    """How many windows each question has."""
    return np.bincount([w["example"] for w in windows], minlength=n_questions).tolist()


def questions_by_windows(per_question):
    """{windows: questions with that many}, e.g. {1: 10387, 2: 152, 3: 31}."""
    return dict(sorted(collections.Counter(per_question).items()))


def window_breakdown(per_question):
    """windows per question: 1 -> 10387 questions, 2 -> 152, 3 -> 31"""
    return "windows per question: " + ", ".join(f"{k} -> {n} questions" for k, n in questions_by_windows(per_question).items())


def load_qa_model(name, flag, device, max_len, **kwargs):
    model, info = load_pretrained(BertForQuestionAnswering, name, flag=flag, output_loading_info=True, **kwargs)
    if fresh_head(info, "qa_outputs"):
        raise Fatal(f"{flag} {name}: has no question-answering head (qa_outputs); pass a model fine-tuned on SQuAD")
    check_positions(max_len, model.config)
    return model.to(device).eval(), load_pretrained(AutoTokenizer, name, flag=flag)


# --- 1-2. The span head of the v1.1 checkpoint, on the BERT abstract ---

@torch.inference_mode()
def demo_one(model, tok, question, device, n_best, max_answer):
    """Everything the article prints for one abstract question, from one forward pass."""
    enc = tok(question, PASSAGE, return_tensors="pt", return_offsets_mapping=True)
    offsets = enc.pop("offset_mapping")[0].tolist()
    passage = torch.tensor([s == 1 for s in enc.sequence_ids(0)], device=device)
    out = model(**enc.to(device), output_hidden_states=True)
    T = out.hidden_states[-1][0]                                  # T_i for every token, (tokens, H)
    W, b = model.qa_outputs.weight, model.qa_outputs.bias        # (2, H): row 0 = S, row 1 = E
    start, end = out.start_logits[0].float(), out.end_logits[0].float()
    val, i, j = best_spans(start[None], end[None], passage[None], n_best, max_answer, top=3)
    spans = [(PASSAGE[offsets[a][0]:offsets[c][1]], int(a), int(c), float(v))
             for v, a, c in zip(val[0], i[0], j[0])]
    by_hand, _ = span_logits(T, W, b)
    p_start = torch.softmax(start[passage], -1)                   # P_start over the passage tokens
    top_p, top_i = p_start.topk(3)
    passage_tokens = tok.convert_ids_to_tokens(enc["input_ids"][0][passage])
    return {"question": question, "spans": spans,
            "start_top": [(passage_tokens[t], float(p)) for p, t in zip(top_p, top_i)],
            "start": start, "end": end, "passage": passage, "offsets": offsets, "S": W[0], "E": W[1],
            "tokens": tok.convert_ids_to_tokens(enc["input_ids"][0]),
            "hand_gap": (by_hand - start).abs().max().item(),
            "bias_gap": max(softmax_bias_gap(start, b[0], passage), softmax_bias_gap(end, b[1], passage)),
            "s_null": float(start[0] + end[0]), "s_null_parts": (float(start[0]), float(end[0]))}


def demo_v1(model, tok, device, search, report):
    W, b = model.qa_outputs.weight, model.qa_outputs.bias
    report.say(f"SQuAD v1.1 model: the output layer is {tuple(W.shape)} -> row 0 is the start vector S, "
               f"row 1 the end vector E (H = {W.shape[1]})")
    report.say(f"  it also has a bias: start {b[0].item():+.4f}, end {b[1].item():+.4f} (a constant added to every "
               f"position, so it cancels in the softmax)" + article(ARTICLE["bias"]))
    results = []
    for q in V1_QUESTIONS:
        d = demo_one(model, tok, q, device, search.n_best, search.max_answer)
        (text, i, j, score), runners = d["spans"][0], d["spans"][1:]
        report.say(f"Q: {q}")
        report.say(f'   answer: "{text}"  (tokens {i}..{j}, span score S.T_i + E.T_j = {score:.2f})'
                   + article(ARTICLE["v1_demo"][q]))
        report.say("   runner-up spans: " + "; ".join(f'"{t}" {s:.2f}' for t, _, _, s in runners))
        report.say("   most likely start tokens: " + ", ".join(f"{t} {p:.3f}" for t, p in d["start_top"]))
        report.say(f"   check: |S.T_i by hand - model start logit| max = {d['hand_gap']:.1e}; "
                   f"softmax with vs without bias differs by {d['bias_gap']:.1e}")
        results.append({k: d[k] for k in ("question", "spans", "start_top", "hand_gap", "bias_gap")})
    return results


# --- 3. The full SQuAD v1.1 dev set ---

def score_v1(examples, answers):
    em, f1 = zip(*(question_scores(a["text"], ex["golds"], "1.1") for ex, a in zip(examples, answers)))
    return 100 * np.mean(em), 100 * np.mean(f1), np.array(f1)


def dev_v1(model, tok, examples, search, device, dtype, report, label, team):
    """The v1.1 dev questions scored: the log lines, the prediction file and the results."""
    answers, timing = predict(model, tok, examples, search, device, dtype, team)
    em, f1, per_q = score_v1(examples, answers)
    secs = timing["seconds"]
    report.say(f"SQuAD v1.1 dev: {len(examples)} questions ({timing['windows']} windows of {search.max_len} tokens, "
               f"stride {search.stride}): EM {em:.2f}, F1 {f1:.2f}  ({duration(secs)})"
               + f"   [{label}: {ARTICLE['v1_dev']}]")
    report.say("   " + window_breakdown(timing["per_question"]) + f"   [{label}: 10753 windows, no breakdown printed]")
    if timing["uncovered"]:
        report.say("   " + coverage_line(timing["uncovered"], len(examples)))
    misses = [k for k in range(len(examples)) if per_q[k] == 0][:3]
    for k in misses:
        report.say(f'   a miss: Q "{examples[k]["question"]}" predicted "{answers[k]["text"]}", '
                   f'gold "{examples[k]["golds"][0]}"')
    files = {"squad_v1_predictions.json": {ex["id"]: a["text"] for ex, a in zip(examples, answers)}}
    return files, {"n": len(examples), "windows": timing["windows"], "uncovered_questions": timing["uncovered"],
                   "em": em, "f1": f1,
                   "seconds": secs, "tokenize_seconds": timing["tokenize_seconds"],
                   "questions_by_windows": {str(k): n for k, n in questions_by_windows(timing["per_question"]).items()},
                   "model_seconds": timing["model_seconds"],
                   "misses": [{"id": examples[k]["id"], "question": examples[k]["question"],
                               "prediction": answers[k]["text"], "gold": examples[k]["golds"]} for k in misses]}


def duration(seconds):
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.1f} s"


# --- 4. SQuAD v2.0: the no-answer score s_null = S.C + E.C (paper §4.3) ---

def demo_v2(model, tok, device, search, report):
    results = []
    for q in V2_QUESTIONS:
        d = demo_one(model, tok, q, device, search.n_best, search.max_answer)
        text, _, _, s_hat = d["spans"][0]
        report.say(f"SQuAD 2.0 Q: {q}")
        report.say(f'   s_null = S.C + E.C = {d["s_null"]:.2f};  best span "{text}" scores {s_hat:.2f};  '
                   f"difference {s_hat - d['s_null']:+.2f}" + article(ARTICLE["v2_demo"][q]))
        results.append({"question": q, "s_null": d["s_null"], "best_span": text, "s_hat": s_hat,
                        "difference": s_hat - d["s_null"]})
    return results


# --- 5. Choosing tau on the dev set: answer iff s_hat > s_null + tau ---

def tau_sweep(s_hat, s_null, em_ans, f1_ans, em_null, f1_null, taus):
    """EM, F1 and % answered at each tau. s_hat, s_null: per question, the best span's score and the
    no-answer score; *_ans are the scores of the best span's text, *_null those of the empty answer."""
    rows = []
    for tau in taus:
        answered = s_hat > s_null + tau
        rows.append({"tau": float(tau), "f1": 100 * float(np.where(answered, f1_ans, f1_null).mean()),
                     "em": 100 * float(np.where(answered, em_ans, em_null).mean()),
                     "answered": 100 * float(answered.mean())})
    return rows


def exact_best_threshold(diff, score_ans, has_ans, nonempty):
    """The best score over every distinct threshold, searched as evaluate-v2.0.py's find_best_thresh does on
    squad_v2_nonnull_predictions.json with -n squad_v2_null_odds.json: start by answering nothing, then answer
    questions in order of decreasing s_hat - s_null. A question with an answer gains its score; one without loses
    1 if the prediction is not empty. Returns the official threshold on s_null - s_hat and tau = -threshold. The
    official rule answers iff s_null - s_hat <= threshold, that is s_hat - s_null >= tau: the question at the
    threshold itself is answered, where the sweep's strict s_hat > s_null + tau would not answer it."""
    order = np.argsort(-diff, kind="stable")
    gains = np.where(has_ans, score_ans, np.where(nonempty, -1.0, 0.0))[order]
    totals = (~has_ans).sum() + np.concatenate([[0.0], np.cumsum(gains)])   # after answering the first k
    k = int(np.argmax(totals))                                              # the first of any ties
    threshold = float(-diff[order[k - 1]]) if k > 0 else 0.0
    return {"f1": 100 * totals[k] / len(diff), "answered": 100 * k / len(diff), "threshold": threshold,
            "tau": -threshold if threshold else 0.0}


def tau_grid(tau_min, tau_max, tau_step):
    """The thresholds of the sweep: tau_min, tau_min + tau_step, ..., up to tau_max (never past it)."""
    n_steps = math.floor((tau_max - tau_min) / tau_step + 1e-9)
    return tau_min + tau_step * np.arange(n_steps + 1)


def score_v2(examples, answers, taus):
    """Everything the v2.0 dev set is scored by: tau = 0, the sweep and its best tau, the exact best
    threshold of evaluate-v2.0.py, and the HasAns / NoAns split at the best tau. Also, per question,
    s_hat - s_null and whether it is answered at the best tau (for the prediction files)."""
    s_hat, s_null = np.array([a["score"] for a in answers]), np.array([a["s_null"] for a in answers])
    diff = s_hat - s_null
    em_ans, f1_ans = map(np.array, zip(*(question_scores(a["text"], ex["golds"], "2.0")
                                         for ex, a in zip(examples, answers))))
    has = np.array([bool(ex["golds"]) for ex in examples])                  # as evaluate-v2.0.py: any gold text
    em_null = f1_null = (~has).astype(float)                                # "no answer" is right iff none
    sweep = tau_sweep(s_hat, s_null, em_ans, f1_ans, em_null, f1_null, taus)
    at0 = tau_sweep(s_hat, s_null, em_ans, f1_ans, em_null, f1_null, [0.0])[0]
    best = max(sweep, key=lambda r: r["f1"])                                 # the first of any ties
    exact = exact_best_threshold(diff, f1_ans, has, np.array([bool(a["text"]) for a in answers]))
    tau = best["tau"]
    chosen = s_hat > s_null + tau                                           # at the best tau
    split = {name: {"n": int(mask.sum()),
                    "em": 100 * float(np.where(chosen, em_ans, em_null)[mask].mean()) if mask.any() else None,
                    "f1": 100 * float(np.where(chosen, f1_ans, f1_null)[mask].mean()) if mask.any() else None}
             for name, mask in (("has_ans", has), ("no_ans", ~has))}
    return {"n": len(examples), "n_noans": int((~has).sum()), "at0": at0, "best": best, "sweep": sweep,
            "exact_best": exact, "has_ans": split["has_ans"], "no_ans": split["no_ans"]}, diff, chosen


def dev_v2(model, tok, examples, search, device, dtype, report, label, team, taus):
    """The v2.0 dev questions scored at every tau: the log lines, the three official files and the results."""
    answers, timing = predict(model, tok, examples, search, device, dtype, team)
    r, diff, chosen = score_v2(examples, answers, taus)
    at0, best, exact = r["at0"], r["best"], r["exact_best"]
    secs = timing["seconds"]
    report.say(f"SQuAD v2.0 dev: {len(examples)} questions, {r['n_noans']} have no answer")
    if timing["uncovered"]:
        report.say("   " + coverage_line(timing["uncovered"], len(examples)))
    report.say(f"   tau = 0:    F1 {at0['f1']:.2f}, EM {at0['em']:.2f}, answers {at0['answered']:.1f}% of questions"
               + f"   [{label}: {ARTICLE['v2_at0']}]")
    report.say(f"   best tau = {best['tau']:+.2f}: F1 {best['f1']:.2f}, EM {best['em']:.2f}, answers "
               f"{best['answered']:.1f}% of questions  ({duration(secs)})"
               + f"   [{label}: {ARTICLE['v2_best']}]")
    report.say(f"   at the best tau: HasAns ({r['has_ans']['n']}) EM {fmt(r['has_ans']['em'])} "
               f"F1 {fmt(r['has_ans']['f1'])};  NoAns ({r['no_ans']['n']}) EM {fmt(r['no_ans']['em'])} "
               f"F1 {fmt(r['no_ans']['f1'])}")
    report.say("   " + exact_best_line(exact))
    report.say(f"   the sweep (answer iff s_hat > s_null + tau), {len(r['sweep'])} steps; * = the best tau:")
    for row in r["sweep"]:
        report.say(f"   {'*' if row is best else ' '} tau {row['tau']:+6.2f}   F1 {row['f1']:6.2f}   EM {row['em']:6.2f}   "
                   f"answers {row['answered']:5.1f}%")
    files = {"squad_v2_predictions.json": {ex["id"]: (a["text"] if c else "")
                                           for ex, a, c in zip(examples, answers, chosen)},
             "squad_v2_nonnull_predictions.json": {ex["id"]: a["text"] for ex, a in zip(examples, answers)},
             "squad_v2_null_odds.json": {ex["id"]: -float(d) for ex, d in zip(examples, diff)}}
    return files, {**r, "windows": timing["windows"], "uncovered_questions": timing["uncovered"], "seconds": secs,
                   "model_seconds": timing["model_seconds"]}


def exact_best_line(exact):
    """The exact best threshold in words; answering nothing at all has no threshold to print."""
    if exact["answered"] == 0:
        return (f"exact best over all distinct thresholds (as evaluate-v2.0.py searches): F1 {exact['f1']:.2f} "
                f"by answering no question at all (every threshold that answers some question scores lower)")
    return (f"exact best over all distinct thresholds (as evaluate-v2.0.py searches): F1 {exact['f1']:.2f} "
            f"at tau = {exact['tau']:+.3f} (best_f1_thresh = {exact['threshold']:+.3f}), answers {exact['answered']:.1f}%")


def fmt(x):
    return "n/a" if x is None else f"{x:.2f}"


def plot_sweep(sweep, path):
    """F1, EM and % answered against tau, when matplotlib is installed."""
    series = {label: [r[key] for r in sweep] for key, label in (("f1", "F1"), ("em", "EM"), ("answered", "% answered"))}
    return line_plot(path, [r["tau"] for r in sweep], series, "tau (answer iff s_hat > s_null + tau)", "percent")


def write_json(folder, name, obj):
    os.makedirs(folder, exist_ok=True)
    write_atomic(os.path.join(folder, name), json.dumps(obj, indent=1, ensure_ascii=False) + "\n")


def check_inputs(results_dir, only, models, data, limit):
    """Every input before any work: the results folder, both models and both dev files, all problems at once.
    models, data: {"v1": ..., "v2": ...}. Returns the first `limit` dev questions of each part (None if not run)."""
    check_writable_dir(results_dir, "--results-dir")
    preflight([("demo" in only or v in only) and model_problem(models[v], f"--{v}-model") for v in VERSIONS]
              + [v in only and file_problem(data[v], f"--{v}-data", HUB_DATASETS[VERSIONS[v]]) for v in VERSIONS])
    return {v: read_squad(data[v], VERSIONS[v], f"--{v}-data")[:limit] if v in only else None for v in VERSIONS}


def main(argv=None):
    args = parse_args(argv)
    device, team = start_processes(args.device)
    dtype = autocast_dtype(device, args.dtype, inference=True)
    models, data = {"v1": args.v1_model, "v2": args.v2_model}, {"v1": args.v1_data, "v2": args.v2_data}
    examples = all_agree(team, partial(check_inputs, args.results_dir, args.only, models, data, args.limit))
    report = Report("part4_squad", args.results_dir, quiet=not team.main)
    if team.world > 1:
        report.say(f"work split: {team.world} processes ({team.backend}), each scores every {team.world}th batch of "
                   f"windows; the scores are gathered before the span search")
    label = "article" if args.limit is None else f"article, on the full dev set (this run: the first {args.limit})"
    search = SpanSearch(args.max_len, args.stride, args.batch_size, args.n_best, args.max_answer)
    demo = {"v1": demo_v1, "v2": demo_v2}
    dev = {"v1": dev_v1, "v2": partial(dev_v2, taus=tau_grid(args.tau_min, args.tau_max, args.tau_step))}
    payload, files = {"config": {"max_len": search.max_len, "stride": search.stride, "n_best": search.n_best,
                                 "max_answer": search.max_answer, "dtype": str(dtype)}}, {}
    for v in [v for v in VERSIONS if "demo" in args.only or v in args.only]:      # 1-3 on v1.1, then 4-5 on v2.0
        model, tok = load_qa_model(models[v], f"--{v}-model", device, search.max_len)
        report.say(f"SQuAD v{VERSIONS[v]} model: {portable(models[v])}   (article: {ARTICLE_MODELS[v]})")
        if "demo" in args.only:
            payload[f"{v}_demo"] = demo[v](model, tok, device, search, report)
        if v in args.only:
            dev_files, payload[f"{v}_dev"] = dev[v](model, tok, examples[v], search, device, dtype, report, label, team)
            files.update(dev_files)
    if team.main:
        if "v2" in args.only:
            plot_sweep(payload["v2_dev"]["sweep"], os.path.join(args.results_dir, "part4_squad_tau_sweep.png"))
        for name, obj in files.items():
            write_json(args.results_dir, name, obj)
        report.save(payload, cli=command_line(argv, vars(args)), device=device)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
