"""SQuAD's shared machinery, used by bert_part4_squad.py and by the fine-tuning of SQuAD (the official JSON is read in
part4/data/readers.py): the windows, the span targets, the span head by hand (`span_logits`), the batched span
search, one question on the article's passage (`demo_one`, which bert_part4_squad.py and bert_part4_math.py print),
and the dev set scored with the official metric (part4/tasks/squad_metric.py) over the tau sweep; and SQuAD's head
family as the fine-tuning runs it (`SpanExtraction`, one of part4/tasks/families.py's three, made there for a SQuAD
task only: a GLUE or SWAG run imports nothing of SQuAD)."""

import math
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import tokenizers
import torch
import transformers
from tqdm import tqdm
from transformers import AutoModelForQuestionAnswering

from part4.command_line.declarations import Fatal
from part4.data.batches import batches_by_length, collate
from part4.data.readers import HUB_DATASETS, SQUAD_VERSION, file_problem, read_squad_task
from part4.models.loading import ALONE, autocast, gather
from part4.output.results_files import fmt
from part4.paper.article import PAPER_SQUAD
from part4.paper.recipe import MAX_ANSWER, MAX_LEN, N_BEST, SPAN_BATCH_SIZE, STRIDE, TAU_SWEEP  # run_squad.py's, the recipe's
from part4.tasks.squad_metric import best_threshold, question_scores


def make_windows(tok, examples, max_len, stride):
    """One batched tokenizer call; each window keeps its question index, offsets and passage mask.

    Worked example (max_len 12, stride 2, a question of 2 tokens): 12 - 2 - 3 = 7 passage tokens fit,
    so passage tokens 0-6 go in window 1 and tokens 5-11 in window 2: the two share 2 tokens. The passage tokens a
    window holds must be more than the stride (else no window would move on): checked on the longest question first,
    a one-line refusal that says the --max-len this stride needs.
    """
    questions = [ex["question"].lstrip() for ex in examples]
    longest = max((len(ids) for ids in tok(questions, add_special_tokens=False)["input_ids"]), default=0)
    specials = tok.num_special_tokens_to_add(pair=True)                  # [CLS] question [SEP] passage [SEP]: 3
    room = max_len - longest - specials                                  # the passage tokens a window holds
    if room <= stride:
        raise Fatal(f"--max-len {max_len} with --stride {stride}: the longest question ({longest} tokens) leaves room for "
                    f"{max(room, 0)} passage tokens in a window, not more than the {stride} that two windows share; pass "
                    f"--max-len {longest + specials + stride + 1} or more, or a smaller --stride")
    enc = tok(questions, [ex["context"] for ex in examples],
              truncation="only_second", max_length=max_len, stride=stride,
              return_overflowing_tokens=True, return_offsets_mapping=True)
    windows = []
    for w, ids in enumerate(enc["input_ids"]):
        seq = enc.sequence_ids(w)
        windows.append({"example": enc["overflow_to_sample_mapping"][w], "input_ids": ids,
                        **({"token_type_ids": enc["token_type_ids"][w]} if "token_type_ids" in enc else {}),
                        "offsets": enc["offset_mapping"][w],
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
    segments = {"token_type_ids": [w["token_type_ids"] for w in windows]} if windows and "token_type_ids" in windows[0] else {}
    return {"input_ids": [w["input_ids"] for w in windows], **segments,
            "start_positions": starts, "end_positions": ends, "full_lengths": [len(w["input_ids"]) for w in windows],
            "targets": ("start_positions", "end_positions"), "questions": len(kept),
            "skipped": len(examples) - len(kept), "uncovered": len(uncovered_questions(tok, kept_examples, windows)),
            "multi_window": int((per_question > 1).sum()), "to_cls": sum(1 for i in starts if i == 0)}


# --- The span head by hand: start_i = S.T_i, end_j = E.T_j, W = [S; E] is (2, H) (paper §4.2) ---

def span_logits(T, W, b):
    """Row 0 of W is S, row 1 is E; b adds one constant to every start and every end score."""
    S, E = W[0], W[1]                                     # (H,) each
    return T @ S + b[0], T @ E + b[1]                     # S . T_i, E . T_j: (tokens,) each


def softmax_bias_gap(logits, bias, positions):
    """max |softmax(x + bias) - softmax(x)| over the passage: a constant cancels in a softmax."""
    x = logits[positions]
    return (torch.softmax(x, -1) - torch.softmax(x - bias, -1)).abs().max().item()


# --- The span search of run_squad.py: the n_best starts x the n_best ends, batched ---

# The article's best_span (bert_part4_squad.py: every i and j of the passage) is the reference: the tests check
# n_best_span_search against it, with n_best covering every token. Worked example, the article's 4-token toy
# (bert_part4_math.py's TOY_START and TOY_END):
#   S.T_i = [0.5, 1.0, 3.0, 0.2], E.T_j = [2.8, 0.1, 1.0, 1.5]; every cell is S.T_i + E.T_j:
#            j=0   j=1   j=2   j=3
#     i=0    3.3   0.6   1.5   2.0
#     i=1    3.8   1.1   2.0   2.5
#     i=2    5.8   3.1   4.0   4.5
#     i=3    3.0   0.3   1.2   1.7
#   The largest cell, 5.8 at (i=2, j=0), ends before it starts (j < i): rejected. The best with j >= i is
#   4.5 at (2, 3). With n_best = 2, only the starts i = 2, 1 and the ends j = 0, 3 are paired: (2, 0) and
#   (1, 0) are rejected, (2, 3) scores 4.5 and (1, 3) 2.5, so the search still finds (2, 3).

def n_best_span_search(start, end, passage, n_best, max_answer, top=1):
    """For each window of a batch: the `top` best spans, searched as run_squad.py does.

    The n_best highest start scores and the n_best highest end scores of the window are paired; a pair
    counts if both tokens are in the passage and i <= j < i + max_answer. start, end: (B, L) scores
    S.T_i and E.T_j, -inf on padding (never among the best); passage: (B, L) bool. Returns scores, i, j,
    each (B, top); a window with no valid span scores -inf.
    """
    neg = torch.tensor(float("-inf"), device=start.device)
    start, end = start.float(), end.float()
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


@torch.inference_mode()
def demo_one(model, tok, question, text, *, device, search):
    """Everything the article prints for one question on one passage (text: the article's, the BERT abstract), from
    one forward pass (in search.dtype where the search sets one, else under the caller's autocast: fp32 outside any):
    the 3 best spans (search: its n_best and max_answer), the 3 likeliest starts, S.T_i by hand against the model's
    start logit, the bias's effect on the softmax, s_null."""
    enc = tok(question, text, return_tensors="pt", return_offsets_mapping=True)
    offsets = enc.pop("offset_mapping")[0].tolist()
    passage = torch.tensor([s == 1 for s in enc.sequence_ids(0)], device=device)
    with autocast(device, search.dtype) if search.dtype else nullcontext():   # the search's dtype, else the caller's
        out = model(**enc.to(device), output_hidden_states=True)
        T = out.hidden_states[-1][0]                              # T_i for every token, (tokens, H)
        W, b = model.qa_outputs.weight, model.qa_outputs.bias    # (2, H): row 0 = S, row 1 = E
        by_hand, _ = span_logits(T, W, b)
    start, end = out.start_logits[0].float(), out.end_logits[0].float()
    val, i, j = n_best_span_search(start[None], end[None], passage[None], n_best=search.n_best,
                                   max_answer=search.max_answer, top=3)
    spans = [(text[offsets[a][0]:offsets[c][1]], int(a), int(c), float(v))
             for v, a, c in zip(val[0], i[0], j[0])]
    p_start = torch.softmax(start[passage], -1)                   # P_start over the passage tokens
    top_p, top_i = p_start.topk(3)
    passage_tokens = tok.convert_ids_to_tokens(enc["input_ids"][0][passage])
    return {"question": question, "spans": spans,
            "start_top": [(passage_tokens[t], float(p)) for p, t in zip(top_p, top_i)],
            "start": start, "end": end, "passage": passage, "offsets": offsets, "S": W[0], "E": W[1],
            "tokens": tok.convert_ids_to_tokens(enc["input_ids"][0]),
            "hand_gap": (by_hand.float() - start).abs().max().item(),
            "bias_gap": max(softmax_bias_gap(start, b[0], passage), softmax_bias_gap(end, b[1], passage)),
            "s_null": float(start[0] + end[0]), "s_null_parts": (float(start[0]), float(end[0]))}


# --- Running the model over all windows: sorted by length, padded per batch ---

@dataclass(frozen=True)
class SpanSearch:
    """How the dev set is cut and searched, by default with the numbers of run_squad.py (the stride beside its
    doc_stride: part4/paper/recipe.py)."""
    max_len: int = MAX_LEN       # window length in tokens
    stride: int = STRIDE         # tokens shared by consecutive windows
    batch_size: int = SPAN_BATCH_SIZE  # windows per forward pass
    n_best: int = N_BEST         # best starts and best ends tried per window
    max_answer: int = MAX_ANSWER  # longest answer in tokens
    dtype: torch.dtype | None = None  # autocast dtype of the forward passes (None: fp32)


def score_windows(model, windows, search, device, processes=ALONE):
    """Per window: the best span score, its (i, j), and s_null. Also the seconds spent in the model.
    Under torchrun each process scores every N-th batch, and all the scores are gathered on every process."""
    n = len(windows)
    best, i_best, j_best, s_null = np.zeros(n), np.zeros(n, int), np.zeros(n, int), np.zeros(n)
    model_seconds = 0.0
    batches = batches_by_length([w["input_ids"] for w in windows], search.batch_size)[processes.rank::processes.world]
    columns = {key: [w[key] for w in windows] for key in ("input_ids", "token_type_ids", "passage")
               if windows and key in windows[0]}                             # no token_type_ids: RoBERTa, DistilBERT
    columns |= {"targets": (), "masks": ("passage",)}           # padded as training batches are (part4/data/batches.py)
    # one autocast around every batch (the span search does no matmul): in bf16 each weight is cast once for the whole
    # dev set, not once a batch
    with torch.inference_mode(), autocast(device, search.dtype):
        bar = tqdm(total=sum(map(len, batches)), desc="windows", unit="window", file=sys.stderr, leave=False,
                   disable=not processes.is_main)
        for idx in batches:
            inputs = collate(columns, idx, device)
            passage = inputs.pop("passage")                     # (B, L): the passage's tokens
            t0 = time.perf_counter()
            out = model(**inputs)
            if device.type == "cuda":
                torch.cuda.synchronize()
            model_seconds += time.perf_counter() - t0
            pad = ~inputs["attention_mask"].bool()             # (B, L): never among the n_best
            start, end = out.start_logits.masked_fill(pad, float("-inf")), out.end_logits.masked_fill(pad, float("-inf"))
            val, i, j = n_best_span_search(start, end, passage, n_best=search.n_best, max_answer=search.max_answer)
            best[idx], i_best[idx], j_best[idx] = val[:, 0].cpu().numpy(), i[:, 0].cpu().numpy(), j[:, 0].cpu().numpy()
            s_null[idx] = null_score(out.start_logits, out.end_logits).cpu().numpy()
            bar.update(len(idx))
        bar.close()
    if processes.world > 1:                                  # every process's windows, into the same arrays
        mine = [i for idx in batches for i in idx]
        for rows, parts in gather(processes, (mine, [best[mine], i_best[mine], j_best[mine], s_null[mine]])):
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


def windows_per_question(windows, n_questions):
    """How many windows each question has."""
    return np.bincount([w["example"] for w in windows], minlength=n_questions).tolist()


def predict(model, tok, examples, search, *, device, processes=ALONE):
    """Windows -> model -> span search -> the best answer of every question, with timings. search: a SpanSearch."""
    t0 = time.perf_counter()
    windows = make_windows(tok, examples, search.max_len, search.stride)
    tokenize_seconds = time.perf_counter() - t0
    uncovered = len(uncovered_questions(tok, examples, windows))
    scored = score_windows(model, windows, search, device, processes=processes)
    answers = best_per_question(examples, windows, scored)
    per_question = windows_per_question(windows, len(examples))
    return answers, {"windows": len(windows), "uncovered": uncovered, "tokenize_seconds": tokenize_seconds,
                     "per_question": per_question,
                     "model_seconds": scored["model_seconds"], "seconds": time.perf_counter() - t0}


# --- Scoring a dev set: official EM and F1 (v1.1) ---

def score_v1(examples, answers):
    em, f1 = zip(*(question_scores(a["text"], ex["golds"], "1.1") for ex, a in zip(examples, answers)))
    return 100 * np.mean(em), 100 * np.mean(f1), np.array(f1)


# --- SQuAD v2.0: answer iff s_hat > s_null + tau, over the tau sweep ---

def tau_sweep(s_hat, s_null, em_ans, f1_ans, em_f1_null, taus):
    """EM, F1 and % answered at each tau. s_hat, s_null: per question, the best span's score and the
    no-answer score; *_ans are the scores of the best span's text, em_f1_null the EM and F1 of the empty
    answer (the same: 1 where the question has no answer, else 0)."""
    rows = []
    for tau in taus:
        answered = s_hat > s_null + tau
        rows.append({"tau": float(tau), "f1": 100 * float(np.where(answered, f1_ans, em_f1_null).mean()),
                     "em": 100 * float(np.where(answered, em_ans, em_f1_null).mean()),
                     "answered": 100 * float(answered.mean())})
    return rows


def official_best_tau(diff, f1_ans, has_ans, nonempty):
    """The official best threshold (squad_metric.best_threshold, evaluate-v2.0.py's search, as it runs on
    squad_v2_nonnull_predictions.json with -n squad_v2_null_odds.json) on the span search's arrays, given as tau too,
    beside the sweep's grid of taus. diff: s_hat - s_null per question, whose odds of no answer are s_null - s_hat;
    f1_ans: the F1 of the best span's text against the gold answers (what the official script scores an answer by);
    has_ans: whether the question has a gold answer; nonempty: whether the best span's text is. Returns the official
    threshold on s_null - s_hat, tau = -threshold, the best F1 and the share answered. The official rule answers iff
    s_null - s_hat <= threshold, that is s_hat - s_null >= tau: the question at the threshold itself is answered,
    where the sweep's strict s_hat > s_null + tau would not answer it."""
    questions = range(len(diff))
    f1, threshold, answered = best_threshold(dict(zip(questions, nonempty)), dict(zip(questions, f1_ans)),
                                             dict(zip(questions, -diff)), dict(zip(questions, has_ans)))
    threshold = float(threshold)
    return {"f1": f1, "answered": 100 * answered / len(diff), "threshold": threshold, "tau": -threshold if threshold else 0.0}


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
    em_f1_null = (~has).astype(float)                                      # "no answer" is right iff none
    sweep = tau_sweep(s_hat, s_null, em_ans, f1_ans, em_f1_null=em_f1_null, taus=taus)
    at0 = tau_sweep(s_hat, s_null, em_ans, f1_ans, em_f1_null=em_f1_null, taus=[0.0])[0]
    best = max(sweep, key=lambda r: r["f1"])       # the paper's tau, "on the dev set to maximize F1"; the first of ties
    exact = official_best_tau(diff, f1_ans, has, np.array([bool(a["text"]) for a in answers]))
    tau = best["tau"]
    chosen = s_hat > s_null + tau                                           # at the best tau
    split = {name: {"n": int(mask.sum()),
                    "em": 100 * float(np.where(chosen, em_ans, em_f1_null)[mask].mean()) if mask.any() else None,
                    "f1": 100 * float(np.where(chosen, f1_ans, em_f1_null)[mask].mean()) if mask.any() else None}
             for name, mask in (("has_ans", has), ("no_ans", ~has))}
    return {"n": len(examples), "n_noans": int((~has).sum()), "at0": at0, "best": best, "sweep": sweep,
            "exact_best": exact, "has_ans": split["has_ans"], "no_ans": split["no_ans"]}, diff, chosen


# --- The span extraction family: SQuAD as the fine-tuning runs it (part4/tasks/families.py's Family) ---

class SpanExtraction:
    """SQuAD (paper §4.2, §4.3): start and end vectors S and E over the tokens of overlapping windows."""
    model_class = AutoModelForQuestionAnswering
    model_kwargs = {}
    fresh = "random start and end vectors S, E"
    new_head, kept_head = "new start and end vectors S, E", "the checkpoint's start and end vectors S, E, kept"
    label_names = None
    eval_batch_size = SPAN_BATCH_SIZE  # windows per forward pass, as bert_part4_squad.py
    grouped = True                     # windows run from a short passage's to the full window length
    metrics = ("em", "f1")
    selection_metric = "f1"            # runs are ranked and selected by F1 (at tau = 0 for v2.0)
    selection_name = "F1"              # as its lines name it (part4/tasks/families.py's METRIC_NAMES["f1"])

    def __init__(self, name, max_len, stride, eval_batch_size=None):
        self.name, self.version, self.max_len, self.stride = name, SQUAD_VERSION[name], max_len, stride
        self.eval_batch_size = eval_batch_size or type(self).eval_batch_size
        self.hub = HUB_DATASETS[self.version]
        self.references = [PAPER_SQUAD[self.version]]

    def data_problems(self, sources):
        return [file_problem(sources.train_data, "--train-data", self.hub),
                file_problem(sources.dev_data, "--dev-data", self.hub)]

    read = staticmethod(read_squad_task)

    def encode(self, tok, train, devs):
        """The training windows with their targets; the dev questions stay questions (predict windows them when
        they are evaluated), checked here once for windows that stop short of their passage: (uncovered,
        questions) of each dev set, kept with the training windows as dev_uncovered."""
        dev_uncovered = {name: (len(uncovered_questions(tok, d, make_windows(tok, d, self.max_len, self.stride))), len(d))
                         for name, d in devs.items()}
        return {**encode_squad(tok, train, self.max_len, self.stride), "dev_uncovered": dev_uncovered}, devs

    def describe(self, train):
        lines = [f"{len(train['input_ids'])} windows of at most {self.max_len} tokens (stride {self.stride}) from "
                 f"{train['questions']} questions; {train['multi_window']} questions need more than one window",
                 f"windows pointing at [CLS] (no answer, or not the whole answer, in the window): {train['to_cls']}",
                 f"questions skipped because answer_start does not match the context: {train['skipped']}",
                 "steps are counted in windows, every window once an epoch (paper's run_squad.py: "
                 "int(questions / batch x epochs) steps, fewer than its windows need)"]
        if train["uncovered"]:
            lines += [f"training set: {coverage_line(train['uncovered'], train['questions'])}"]
        lines += [f"{name} set: {coverage_line(n, size)}"
                  for name, (n, size) in train["dev_uncovered"].items() if n]
        return lines

    @staticmethod
    def loss(model, batch):
        """SQuAD: -(log P_start(s) + log P_end(e)) / 2, each softmax over the window's own tokens.

        The paper sums the two log-likelihoods; run_squad.py averages them, as here. Padding is left out
        of the softmax, so a window's loss does not depend on how far its batch is padded."""
        targets = {k: batch[k] for k in ("start_positions", "end_positions")}
        out = model(**{k: v for k, v in batch.items() if k not in targets})
        mask = batch["attention_mask"].bool()
        start = out.start_logits.float().masked_fill(~mask, float("-inf"))    # S.T_i
        end = out.end_logits.float().masked_fill(~mask, float("-inf"))        # E.T_j
        return (torch.nn.functional.cross_entropy(start, targets["start_positions"])
                + torch.nn.functional.cross_entropy(end, targets["end_positions"])) / 2

    def evaluate(self, model, devs, tok, device, dtype):
        """Every dev question answered by the span search bert_part4_squad.py uses too (predict) and scored
        with the official metric."""
        model.eval()
        search = SpanSearch(max_len=self.max_len, stride=self.stride, batch_size=self.eval_batch_size, n_best=N_BEST,
                            max_answer=MAX_ANSWER, dtype=dtype)
        out = {name: self.score(*predict(model, tok, examples, search, device=device), examples)
               for name, examples in devs.items()}
        model.train()
        return out

    def score(self, answers, timing, examples):
        """v1.1: EM and F1; v2.0: EM and F1 at tau = 0, and the whole sweep of bert_part4_squad.py."""
        if self.version == "1.1":
            em, f1, _ = score_v1(examples, answers)
            return {"em": float(em), "f1": float(f1), "n": len(examples), "windows": timing["windows"],
                    "uncovered": timing["uncovered"]}
        r, _, _ = score_v2(examples, answers, tau_grid(*TAU_SWEEP))
        return {"em": r["at0"]["em"], "f1": r["at0"]["f1"], **r, "windows": timing["windows"], "uncovered": timing["uncovered"]}

    def selection(self, scores):
        """The dev score runs are ranked and selected by, on the first dev set."""
        return next(iter(scores.values()))[self.selection_metric]

    def majority(self, train):
        return None

    def baseline(self, majority, devs):
        return ""

    def format(self, scores, final=False):
        s, v2 = next(iter(scores.values())), self.version == "2.0"
        if not final and v2:
            return (f"dev (tau = 0) EM {s['em']:.2f}  F1 {s['f1']:.2f}  best tau {s['best']['tau']:+.2f}: "
                    f"F1 {s['best']['f1']:.2f}")
        if not final:
            return f"dev EM {s['em']:.2f}  dev F1 {s['f1']:.2f}"
        if v2:
            return (f"dev at tau = 0: EM {s['em']:.2f}, F1 {s['f1']:.2f}; at the best tau {s['best']['tau']:+.2f}: "
                    f"EM {s['best']['em']:.2f}, F1 {s['best']['f1']:.2f}; HasAns ({s['has_ans']['n']}) EM "
                    f"{fmt(s['has_ans']['em'])} F1 {fmt(s['has_ans']['f1'])}, NoAns ({s['no_ans']['n']}) "
                    f"EM {fmt(s['no_ans']['em'])} F1 {fmt(s['no_ans']['f1'])}")
        return f"dev EM {s['em']:.2f}, F1 {s['f1']:.2f} ({s['n']} questions, {s['windows']} windows)"

    def extra_outputs(self, training, test_dir):
        """The questions whose answer no window covers, in the training set and each dev set (none go to a server)."""
        train = training.data.train
        return {"uncovered_questions": {"train": train["uncovered"],
                                        **{name: n for name, (n, _) in train["dev_uncovered"].items()}}}

    def read_tests(self, sources):
        return {}                      # SQuAD's test sets go to no server

    def encode_tests(self, tok, tests):
        return {}

    def majority_scores(self, majority, devs):
        return None
