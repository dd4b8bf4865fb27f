"""BERT, explained - Part 4: SQuAD v1.1 and v2.0 with our own span search (paper §4.2, §4.3).

Reproduces, in the article's order (each step's code in brackets: this script's functions, and those of
part4/tasks/squad_spans.py unless another file is named):
  1. the span head of a SQuAD v1.1 checkpoint: W is (2, H), row 0 = S, row 1 = E, plus a bias [demo_v1];
  2. the four abstract questions: answer, span score S.T_i + E.T_j, runners-up, P_start, a hand check [demo_v1;
     demo_one, span_logits, n_best_span_search];
  3. the full SQuAD v1.1 dev set [dev_v1]:
     - windows of 384 tokens, consecutive ones sharing 128 (the article's stride, beside run_squad.py's doc_stride:
       part4/paper/recipe.py) [make_windows];
     - the n_best best starts x n_best best ends of each window, as run_squad.py searches (the article's best_span,
       below, tries every i <= j) [score_windows, n_best_span_search];
     - each question's best span over its windows [best_per_question];
     - the official answer normalisation and EM/F1 [score_v1; part4/tasks/squad_metric.py's normalize_answer,
       squad_f1], the article's beside ours;
  4. SQuAD v2.0: s_null = S.C + E.C against the best span on four abstract questions [demo_v2, with the article's own
     best_span];
  5. the full SQuAD v2.0 dev set and the tau sweep [dev_v2]: answer iff s_hat > s_null + tau, where a question's s_hat
     is the score of its best span over its windows and its s_null the smallest S.C + E.C among them (run_squad.py's
     s_null; its max-context check on the spans is not applied) [best_per_question]; tau chosen on dev to maximize F1
     [score_v2, tau_sweep]; the article's best tau and F1 beside ours (every number of the article is in
     part4/paper/article.py).
Beyond the article's lines, the log gives each part's model and its weight files, the windows per question, a warning
where windows stop before the end of their passage, the scores of the questions with and without an answer at the best
tau, the exact best threshold (as evaluate-v2.0.py searches it) and the whole sweep. The article's rule with real
numbers ('tau = +4.00: 23.25 > 14.18 ?  yes -> answer') and its EM/F1 worked examples ('shared words 3, precision
1.000, ...') are bert_part4_math.py's sections 4 and 5 [its null_scores, f1_examples].
Writes the official prediction files (squad_v1_predictions.json, squad_v2_predictions.json,
squad_v2_nonnull_predictions.json, squad_v2_null_odds.json; with --max-dev-examples N, of the first N questions of each
dev set only) and results/part4_squad.{log,json}.
"""

import sys

from part4.command_line import declarations, script_settings

if __name__ == "__main__":       # --help and a refused flag are answered before torch loads (seconds on a busy machine)
    declarations.answer_now(script_settings.parse_squad, sys.argv[1:])

import collections
import json
import os
from dataclasses import dataclass

import torch

from part4.command_line.declarations import preflight
from part4.data.readers import HUB_DATASETS, file_problem, read_squad
from part4.models.loading import (
    DTYPE_NAMES,
    Processes,
    all_agree,
    autocast_dtype,
    load_qa_model,
    loaded_record,
    model_problem,
    model_type_note,
    precision_note,
    read_model_folders,
    run_cli,
    start_processes,
    weights_line,
)
from part4.output.results_files import (
    Log,
    beside_article,
    check_results_kept,
    check_writable_dir,
    command_line,
    fmt,
    line_plot,
    portable,
    write_atomic,
)
from part4.paper.article import (
    PASSAGE,
    SQUAD_LABELS,
    SQUAD_V1,
    SQUAD_V2,
    V1_QUESTIONS,
    V2_QUESTIONS,
    WINDOWS_LABEL,
    value,
)
from part4.tasks.squad_spans import (
    SpanSearch,
    coverage_line,
    demo_one,
    predict,
    score_v1,
    score_v2,
    tau_grid,
)

VERSIONS = {"v1": "1.1", "v2": "2.0"}   # the parts of --only that score a dev set, and their SQuAD version
ARTICLE_MODELS = {"v1": SQUAD_V1, "v2": SQUAD_V2}      # the article's public checkpoints (part4/paper/article.py)
# What the article printed (SQUAD_LABELS, from part4/paper/article.py) is shown
# beside ours on every route. The passage of every demo is the article's, the BERT abstract (PASSAGE), and its
# questions the article's (V1_QUESTIONS, V2_QUESTIONS), all in part4/paper/article.py.


# --- The span score S.T_i + E.T_j, best over j >= i, inside the passage, at most max_answer tokens ---

def best_span(start, end, passage_tokens, max_len=30):   # max_len: the longest answer (max_answer), not --max-len
    """max over i <= j of S.T_i + E.T_j, inside the passage, at most 30 tokens long"""
    best = None
    for i in passage_tokens:
        for j in passage_tokens:
            if i <= j < i + max_len and (best is None or start[i] + end[j] > best[0]):
                best = (start[i] + end[j], i, j)
    return best


# The dev set is searched as run_squad.py searches it, batched: only the n_best best starts and the n_best best ends of
# each window are paired (n_best_span_search, in part4/tasks/squad_spans.py, checked against best_span in the tests).


def questions_by_windows(per_question):
    """{windows: questions with that many}, e.g. {1: 10387, 2: 152, 3: 31}: the 10,570 questions of the v1.1 dev set in
    10,784 windows at 384 / 128 with the bert-base-uncased vocabulary and any tokenizers but 0.23.1 and 0.23.2, which
    cut them short: the article's 10,753 (docs/squad-evaluation.md)."""
    return dict(sorted(collections.Counter(per_question).items()))


def window_breakdown(per_question):
    """windows per question: 1 -> 10387 questions, 2 -> 152, 3 -> 31"""
    return "windows per question: " + ", ".join(f"{k} -> {n} questions" for k, n in questions_by_windows(per_question).items())


# --- 1-2. The span head of the v1.1 checkpoint, on the BERT abstract ---

# demo_one (part4/tasks/squad_spans.py, which bert_part4_math.py reads too): for one question on the passage, one forward
# pass gives the 3 best spans (n_best_span_search), the 3 likeliest start tokens (softmax of S.T_i over the passage),
# S.T_i by hand (span_logits) against the model's start logit, the bias's effect on that softmax, and s_null = S.C + E.C.

def demo_v1(model, tok, *, device, search, log):
    """The v1.1 span head (its shape and bias) and the four abstract questions: the log lines and the results."""
    W, b = model.qa_outputs.weight, model.qa_outputs.bias
    log.say(f"SQuAD v1.1 model: the output layer is {tuple(W.shape)} -> row 0 is the start vector S, "
               f"row 1 the end vector E (H = {W.shape[1]})")
    log.say(f"  it also has a bias: start {b[0].item():+.4f}, end {b[1].item():+.4f} (a constant added to every "
               f"position, so it cancels in the softmax)" + beside_article(SQUAD_LABELS["bias"]))
    results = []
    for q in V1_QUESTIONS:
        d = demo_one(model, tok, q, PASSAGE, device=device, search=search)
        (text, i, j, score), runners = d["spans"][0], d["spans"][1:]
        log.say(f"Q: {q}")
        log.say(f'   answer: "{text}"  (tokens {i}..{j}, span score S.T_i + E.T_j = {score:.2f})'
                   + beside_article(SQUAD_LABELS["v1_demo"][q]))
        log.say("   runner-up spans: " + "; ".join(f'"{t}" {s:.2f}' for t, _, _, s in runners))
        log.say("   most likely start tokens: " + ", ".join(f"{t} {p:.3f}" for t, p in d["start_top"]))
        log.say(f"   check: |S.T_i by hand - model start logit| max = {d['hand_gap']:.1e}; "
                   f"softmax with vs without bias differs by {d['bias_gap']:.1e}")
        results.append({k: d[k] for k in ("question", "spans", "start_top", "hand_gap", "bias_gap")})
    return {"v1_head": {"W_shape": list(W.shape), "bias": b.tolist()}, "v1_demo": results}


@dataclass(frozen=True)
class DevScoring:
    """How a dev set is scored, the same for v1.1 and v2.0: the span search, where it runs, the label of the
    article's numbers beside ours, and the thresholds of the v2.0 tau sweep."""
    search: SpanSearch
    device: torch.device
    processes: Processes
    labels: dict                # {"v1": the label of the article's numbers beside ours (article_label), "v2": ...}
    taus: tuple


def article_label(v, examples, cut):
    """The label of the article's numbers beside ours: 'article', or what sets our dev set apart from its: the first
    `cut` questions (--max-dev-examples), or another file of another number of questions (the offline evaluation part
    of ../shared/data), whose numbers are not the dev set's."""
    if cut is not None:
        return f"article, on the full dev set (this run: the first {cut})"
    n = int(value(f"{v}.dev.n"))
    return "article" if examples is None or len(examples) == n else \
        f"article, on the dev set's {n:,} questions (this file: {len(examples):,}, another split)"


# --- 3. The full SQuAD v1.1 dev set: every window scored, each question's best span, the official EM and F1 ---

def dev_v1(model, tok, examples, scoring, log):
    """The v1.1 dev questions scored: the log lines, the prediction file and the results."""
    search, label = scoring.search, scoring.labels["v1"]
    answers, timing = predict(model, tok, examples, search, device=scoring.device, processes=scoring.processes)
    em, f1, f1_per_question = score_v1(examples, answers)
    secs = timing["seconds"]
    log.say(f"SQuAD v1.1 dev: {len(examples)} questions ({timing['windows']} windows of {search.max_len} tokens, "
               f"stride {search.stride}): EM {em:.2f}, F1 {f1:.2f}  ({minutes_or_seconds(secs)})"
               + f"   [{label}: {SQUAD_LABELS['v1_dev']}]")
    log.say("   " + window_breakdown(timing["per_question"]) + f"   [{label}: {WINDOWS_LABEL}]")
    if timing["uncovered"]:
        log.say("   " + coverage_line(timing["uncovered"], len(examples)))
    misses = [k for k in range(len(examples)) if f1_per_question[k] == 0][:3]
    for k in misses:
        log.say(f'   a miss: Q "{examples[k]["question"]}" predicted "{answers[k]["text"]}", '
                   f'gold "{examples[k]["golds"][0]}"')
    files = {"squad_v1_predictions.json": {ex["id"]: a["text"] for ex, a in zip(examples, answers)}}
    return files, {"n": len(examples), "windows": timing["windows"], "uncovered_questions": timing["uncovered"],
                   "em": em, "f1": f1,
                   "seconds": secs, "tokenize_seconds": timing["tokenize_seconds"],
                   "questions_by_windows": {str(k): n for k, n in questions_by_windows(timing["per_question"]).items()},
                   "model_seconds": timing["model_seconds"],
                   "misses": [{"id": examples[k]["id"], "question": examples[k]["question"],
                               "prediction": answers[k]["text"], "gold": examples[k]["golds"]} for k in misses]}


def minutes_or_seconds(seconds):
    """'9.3 min', '41.0 s': a dev set's time as the article's lines print it."""
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.1f} s"


# --- 4. SQuAD v2.0: the no-answer score s_null = S.C + E.C (paper §4.3) ---
# (The article's rule with real numbers, 's_null = 5.08 + 5.10 = 10.18 ... tau = +4.00: 23.25 > 14.18 ? yes -> answer',
# and its EM/F1 worked examples are bert_part4_math.py's sections 4 and 5 (null_scores, f1_examples), whose tau is read
# from the results/part4_squad.json this script writes.)

def demo_v2(model, tok, *, device, search, log):
    """s_null against the best span on the four abstract questions: the log lines and the results."""
    results = []
    for q in V2_QUESTIONS:
        d = demo_one(model, tok, q, PASSAGE, device=device, search=search)   # its logits and s_null = S.C + E.C
        start, end, passage_tokens = d["start"].cpu(), d["end"].cpu(), d["passage"].nonzero().flatten().tolist()
        # s_hat as the article's v2.0 code takes it: best_span over every i <= j. demo_one's spans (v1's lines here,
        # bert_part4_math.py's section 4) come from the n_best x n_best search the dev sets use too, which finds this
        # same span whenever its start and its end are each among the n_best best
        s_hat, i, j = best_span(start, end, passage_tokens, search.max_answer)
        text, s_hat = PASSAGE[d["offsets"][i][0]:d["offsets"][j][1]], float(s_hat)
        log.say(f"SQuAD 2.0 Q: {q}")
        log.say(f'   s_null = S.C + E.C = {d["s_null"]:.2f};  best span "{text}" scores {s_hat:.2f};  '
                   f"difference {s_hat - d['s_null']:+.2f}" + beside_article(SQUAD_LABELS["v2_demo"][q]))
        results.append({"question": q, "s_null": d["s_null"], "best_span": text, "s_hat": s_hat,
                        "difference": s_hat - d["s_null"]})
    return {"v2_demo": results}


# --- 5. The full SQuAD v2.0 dev set: answer iff s_hat > s_null + tau, the tau sweep and the best tau ---

def dev_v2(model, tok, examples, scoring, log):
    """The v2.0 dev questions scored at every tau: the log lines, the three official files and the results."""
    label = scoring.labels["v2"]
    answers, timing = predict(model, tok, examples, scoring.search, device=scoring.device, processes=scoring.processes)
    r, diff, chosen = score_v2(examples, answers, scoring.taus)
    at0, best, exact = r["at0"], r["best"], r["exact_best"]
    secs = timing["seconds"]
    log.say(f"SQuAD v2.0 dev: {len(examples)} questions, {r['n_noans']} have no answer")
    if timing["uncovered"]:
        log.say("   " + coverage_line(timing["uncovered"], len(examples)))
    log.say(f"   tau = 0:    F1 {at0['f1']:.2f}, EM {at0['em']:.2f}, answers {at0['answered']:.1f}% of questions"
               + f"   [{label}: {SQUAD_LABELS['v2_at0']}]")
    log.say(f"   best tau = {best['tau']:+.2f}: F1 {best['f1']:.2f}, EM {best['em']:.2f}, answers "
               f"{best['answered']:.1f}% of questions  ({minutes_or_seconds(secs)})"
               + f"   [{label}: {SQUAD_LABELS['v2_best']}]")
    log.say(f"   at the best tau: HasAns ({r['has_ans']['n']}) EM {fmt(r['has_ans']['em'])} "
               f"F1 {fmt(r['has_ans']['f1'])};  NoAns ({r['no_ans']['n']}) EM {fmt(r['no_ans']['em'])} "
               f"F1 {fmt(r['no_ans']['f1'])}")
    log.say("   " + exact_best_line(exact))
    log.say(f"   the sweep (answer iff s_hat > s_null + tau), {len(r['sweep'])} steps; * = the best tau:")
    for row in r["sweep"]:
        log.say(f"   {'*' if row is best else ' '} tau {row['tau']:+6.2f}   F1 {row['f1']:6.2f}   EM {row['em']:6.2f}   "
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


def plot_sweep(sweep, path):
    """F1, EM and % answered against tau, when matplotlib is installed."""
    series = {label: [r[key] for r in sweep] for key, label in (("f1", "F1"), ("em", "EM"), ("answered", "% answered"))}
    return line_plot(path, [r["tau"] for r in sweep], series, xlabel="tau (answer iff s_hat > s_null + tau)",
                     ylabel="percent")


DEMOS, DEV_SETS = {"v1": demo_v1, "v2": demo_v2}, {"v1": dev_v1, "v2": dev_v2}    # each part's sections, by version


def check_every_input(results_dir, only, models, data, cut, ours):
    """Every input before any work: the results folder, the models of the parts that run (each read for what it holds:
    read_model_folder) and their dev files, all problems at once; then the results there, never replaced by a run of
    other settings (ours: the command line's settings as the results record them, --dtype as it resolves here, compared
    as run). models, data: {"v1": ..., "v2": ...}. Returns the first `cut` dev questions of each part (--max-dev-examples;
    None if not run) and {part: its model, read}."""
    check_writable_dir(results_dir, "--results-dir")
    used = [v for v in VERSIONS if "demo" in only or v in only]              # 1-3 on v1.1, then 4-5 on v2.0
    preflight([model_problem(models[v], f"--{v}-model") for v in used]
              + [v in only and file_problem(data[v], f"--{v}-data", HUB_DATASETS[VERSIONS[v]]) for v in VERSIONS])
    folders = read_model_folders({f"--{v}-model": models[v] for v in used})
    examples = {v: read_squad(data[v], VERSIONS[v], f"--{v}-data")[:cut] if v in only else None for v in VERSIONS}
    check_results_kept(os.path.join(results_dir, "part4_squad.json"), ours, as_run=("dtype",))
    return examples, {v: folders[f"--{v}-model"] for v in used}


def part_model_lines(v, folder, model):
    """What the log says of a part's model: its name (and type, if not a BERT) beside the article's, its weight files
    and their dtype, its span head (the checkpoint's, kept) and any warning its folder gave."""
    return [f"SQuAD v{VERSIONS[v]} model: {portable(folder.name)}{model_type_note(model)}   "
            f"(article: {ARTICLE_MODELS[v]})",
            "   " + weights_line(folder, "the checkpoint's start and end vectors S, E, kept"),
            *("   " + note for note in folder.notes)]


def main(argv=None):
    args = script_settings.parse_squad(argv)   # the command line as settings, without torch (part4/command_line)
    device, processes = start_processes(args.device)
    dtype = autocast_dtype(device, args.dtype, inference=True)
    models, data = {"v1": args.v1_model, "v2": args.v2_model}, {"v1": args.v1_data, "v2": args.v2_data}
    with all_agree(processes):                  # a bad input on any process: every process stops, with its one line
        examples, folders = check_every_input(args.results_dir, args.only, models, data, cut=args.max_dev_examples,
                                              ours={**command_line(argv, vars(args))["config"], "dtype": DTYPE_NAMES[dtype]})
    loaded = {v: load_qa_model(folders[v], device, args.max_len) for v in folders}   # refused before a line
    log = Log("part4_squad", args.results_dir, quiet=not processes.is_main)
    if processes.world > 1:
        log.say(f"work split: {processes.world} processes ({processes.backend}), each scores every "
                   f"{processes.world}th batch of windows; the scores are gathered before the span search")
    if note := precision_note(device, dtype):      # bf16 where it is emulated: one line, slow
        log.say(note)
    search = SpanSearch(max_len=args.max_len, stride=args.stride, batch_size=args.batch_size, n_best=args.n_best,
                        max_answer=args.max_answer, dtype=dtype)
    scoring = DevScoring(search=search, device=device, processes=processes,
                         labels={v: article_label(v, examples[v], args.max_dev_examples) for v in VERSIONS},
                         taus=tuple(tau_grid(args.tau_min, args.tau_max, args.tau_step)))
    payload, files = {"config": {"max_len": search.max_len, "stride": search.stride, "n_best": search.n_best,
                                 "max_answer": search.max_answer, "dtype": DTYPE_NAMES[dtype]},  # as run
                      "models": {v: loaded_record(folders[v]) for v in loaded}}, {}
    for v, (model, tok) in loaded.items():                                       # 1-3 on v1.1, then 4-5 on v2.0
        for line in part_model_lines(v, folders[v], model):
            log.say(line)
        if "demo" in args.only:
            payload |= DEMOS[v](model, tok, device=device, search=search, log=log)   # v1: the span head too
        if v in args.only:
            dev_files, payload[f"{v}_dev"] = DEV_SETS[v](model, tok, examples[v], scoring, log=log)
            files.update(dev_files)
    if processes.is_main:
        if "v2" in args.only:
            plot_sweep(payload["v2_dev"]["sweep"], os.path.join(args.results_dir, "part4_squad_tau_sweep.png"))
        os.makedirs(args.results_dir, exist_ok=True)
        for name, obj in files.items():             # the official prediction files
            write_atomic(os.path.join(args.results_dir, name), json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
        log.save(payload, cli=command_line(argv, vars(args)), device=device, also="".join(f", {n}" for n in files))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
