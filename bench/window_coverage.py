"""Window coverage of SQuAD v1.1 dev, and what the uncovered questions cost in EM/F1 (issue 14).

squad_spans.make_windows (as bert_part4_squad.py runs it) cuts each passage into windows of --max-len tokens that share --stride
tokens, in one tokenizer call (return_overflowing_tokens). Some tokenizers releases (0.23.1, 0.23.2)
stop the overflow early: the last window ends before the passage does. This script, run under the
python environment to be checked, tokenises the dev set exactly as make_windows does and measures:

  - windows, and questions by number of windows;
  - "short" questions: no window's passage tokens reach the passage's last token (the end offset of
    the last token of the passage tokenised alone), and how many characters are left uncovered;
  - of those, the questions whose gold answers all start (answer_start) in the uncovered part, and
    those with only some answers starting there; also the looser count of answers that end past the
    covered part (answer_start + len(text) > covered end: not wholly inside any window);
  - where the short questions come from: the offline train split, the offline eval split, or neither
    (matched by question id);
  - for each --predictions file (official {id: text}), official v1.1 EM/F1 overall, on the short
    questions, on each of the answers-uncovered sets above, and on the short questions whose answers all
    lie wholly in the covered part.

One run in an environment with the short overflow scores both prediction files (say, one made
with tokenizers 0.23.3 and one with 0.23.2) on the short set found there:

    /tmp/venv-tok0232/bin/python bench/window_coverage.py --tokenizer path/to/qa_model \\
        --predictions results/a/squad_v1_predictions.json results/b/squad_v1_predictions.json \\
        --out results/window_coverage/coverage.json
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tokenizers  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

import bert_part4_squad as sq
from part4.data import readers  # noqa: E402
from part4.output.results_files import portable  # noqa: E402
from part4.tasks import squad_metric, squad_spans  # noqa: E402

SQUAD = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "squad"))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="Prints one line per number; --out gets the same numbers as JSON, with the "
                                       "tokenizers/transformers versions and the short question ids.")
    p.add_argument("--tokenizer", required=True, help="model folder (or tokenizer folder) whose tokenizer "
                                                     "bert_part4_squad.py uses, e.g. the fine-tuned QA model")
    p.add_argument("--data", default=os.path.join(SQUAD, "dev-v1.1.json"), help="official SQuAD v1.1 dev file "
                                                                               "(default ../shared/data/squad/dev-v1.1.json)")
    p.add_argument("--train", default=os.path.join(SQUAD, "offline-train-v1.1.json"),
                   help="offline train split, to count the short questions it holds")
    p.add_argument("--eval", default=os.path.join(SQUAD, "offline-eval-v1.1.json"),
                   help="offline eval split, to count the short questions it holds")
    p.add_argument("--predictions", nargs="+", default=[], metavar="PRED.json",
                   help="one or two official prediction files {id: text} to score")
    p.add_argument("--max-len", type=int, default=384, help="window length in tokens (default 384, as bert_part4_squad.py)")
    p.add_argument("--stride", type=int, default=128, help="tokens shared by consecutive windows (default 128)")
    p.add_argument("--out", required=True, help="JSON file to write")
    args = p.parse_args(argv)
    if len(args.predictions) > 2:
        p.error("--predictions: at most two files")
    return args


def coverage(tok, examples, max_len, stride):
    """Per question: windows, covered end (largest passage-token end offset), passage end (last token's
    end offset when the passage is tokenised alone)."""
    windows = squad_spans.make_windows(tok, examples, max_len, stride)
    covered = [0] * len(examples)
    for win in windows:
        ends = [off[1] for off, is_passage in zip(win["offsets"], win["passage"]) if is_passage]
        q = win["example"]
        covered[q] = max([covered[q]] + ends)
    alone = tok([ex["context"] for ex in examples], add_special_tokens=False, return_offsets_mapping=True)
    passage_end = [offs[-1][1] if offs else 0 for offs in alone["offset_mapping"]]
    per_question = squad_spans.windows_per_question(windows, len(examples))
    return windows, per_question, covered, passage_end


def beyond(examples, subset, outside):
    """The questions of subset whose gold answers are all outside(k, answer_start, text), and those with some
    (not all) outside."""
    every, some = [], []
    for k in subset:
        out = [outside(k, start, text) for start, text in zip(examples[k]["starts"], examples[k]["golds"])]
        if all(out):
            every.append(k)
        elif any(out):
            some.append(k)
    return every, some


def ids_in(path):
    with open(path, encoding="utf-8") as f:
        return {qa["id"] for article in json.load(f)["data"] for par in article["paragraphs"] for qa in par["qas"]}


def official(examples, predictions, subset):
    """Official v1.1 EM/F1 (in %) over the questions in subset (indices); a missing prediction scores 0, as in
    evaluate-v1.1.py."""
    if not subset:
        return {"n": 0, "em": None, "f1": None}
    em, f1 = zip(*(squad_metric.question_scores(predictions[examples[k]["id"]], examples[k]["golds"], "1.1")
                   if examples[k]["id"] in predictions else (0, 0.0) for k in subset))
    return {"n": len(subset), "em": 100 * float(np.mean(em)), "f1": 100 * float(np.mean(f1))}


def fmt(score):
    return "-" if score["em"] is None else f"EM {score['em']:.2f}  F1 {score['f1']:.2f}"


def main(argv=None):
    args = parse_args(argv)
    say = print
    examples = readers.read_squad_json(args.data, "1.1", "--data")
    transformers.logging.set_verbosity_error()      # no "longer than 512 tokens" warning: windows are cut on purpose
    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    say(f"tokenizers {tokenizers.__version__}, transformers {transformers.__version__}, tokenizer {portable(args.tokenizer)} "
        f"({type(tok).__name__})")
    say(f"dev file: {portable(args.data)}: {len(examples)} questions; windows of {args.max_len} tokens, stride {args.stride}")

    windows, per_question, covered, passage_end = coverage(tok, examples, args.max_len, args.stride)
    by_windows = sq.questions_by_windows(per_question)
    rstrip_diff = [k for k, ex in enumerate(examples) if passage_end[k] != len(ex["context"].rstrip())]
    short = [k for k in range(len(examples)) if covered[k] < passage_end[k]]
    same = short == squad_spans.uncovered_questions(tok, examples, windows)
    say(f"the same questions as bert_part4_squad.uncovered_questions finds: {same}")
    all_beyond, some_beyond = beyond(examples, short, lambda k, start, text: start >= covered[k])
    all_cut, some_cut = beyond(examples, short, lambda k, start, text: start + len(text) > covered[k])
    inside = [k for k in short if k not in all_cut and k not in some_cut]       # every gold answer wholly covered
    uncovered = [passage_end[k] - covered[k] for k in short]
    multi = [k for k in range(len(examples)) if per_question[k] > 1]
    short_ids = [examples[k]["id"] for k in short]
    train_ids, eval_ids = ids_in(args.train), ids_in(args.eval)
    in_train = sum(i in train_ids for i in short_ids)
    in_eval = sum(i in eval_ids for i in short_ids)
    neither = sum(i not in train_ids and i not in eval_ids for i in short_ids)

    say(f"windows: {len(windows)}")
    for n, count in by_windows.items():
        say(f"questions with {n} window(s): {count}")
    say(f"questions whose passage end (last token of the passage tokenised alone) differs from len(context.rstrip()): "
        f"{len(rstrip_diff)}")
    say(f"questions covered to the passage end: {len(examples) - len(short)}")
    say(f"short questions (no window reaches the passage's last token): {len(short)}")
    say(f"  of them with more than one window: {sum(per_question[k] > 1 for k in short)}  "
        f"(questions with more than one window: {len(multi)})")
    if short:
        say(f"  characters left uncovered: median {int(np.median(uncovered))}, max {max(uncovered)}")
    say(f"short questions whose gold answers all start in the uncovered part: {len(all_beyond)}")
    say(f"short questions with some (not all) gold answers starting in the uncovered part: {len(some_beyond)}")
    say(f"short questions whose gold answers all end past the covered part (start + length > covered end): {len(all_cut)}")
    say(f"short questions with some (not all) gold answers ending past the covered part: {len(some_cut)}")
    say(f"short questions whose gold answers all lie wholly in the covered part: {len(inside)}")
    say(f"short questions in the offline train split ({os.path.basename(args.train)}): {in_train}")
    say(f"short questions in the offline eval split ({os.path.basename(args.eval)}): {in_eval}")
    say(f"short questions in neither split: {neither}")

    uncovered_sets = {"all_answers_start_uncovered": all_beyond, "some_answers_start_uncovered": some_beyond,
                      "all_answers_end_uncovered": all_cut, "some_answers_end_uncovered": some_cut,
                      "answers_covered": inside}
    sets = {"all": list(range(len(examples))), "short": short, **uncovered_sets}
    scores = {}
    loaded = []
    for path in args.predictions:
        with open(path, encoding="utf-8") as f:
            predictions = json.load(f)
        loaded.append(predictions)
        missing = sum(ex["id"] not in predictions for ex in examples)
        scores[path] = {name: official(examples, predictions, subset) for name, subset in sets.items()}
        scores[path]["missing_predictions"] = missing
        say(f"predictions {path}: {len(predictions)} answers, {missing} dev questions without one")
        for name, subset in sets.items():
            say(f"  {name} ({len(subset)} questions): {fmt(scores[path][name])}")
    differ = None
    if len(loaded) == 2:
        differ = {name: sum(loaded[0].get(examples[k]["id"]) != loaded[1].get(examples[k]["id"]) for k in subset)
                  for name, subset in sets.items()}
        for name, n in differ.items():
            say(f"questions where the two prediction files differ, {name}: {n} of {len(sets[name])}")

    result = {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
              "tokenizer": portable(args.tokenizer), "data": portable(args.data), "max_len": args.max_len, "stride": args.stride,
              "questions": len(examples), "windows": len(windows),
              "questions_by_windows": {str(n): c for n, c in by_windows.items()},
              "passage_end_differs_from_rstrip": len(rstrip_diff),
              "covered": len(examples) - len(short), "short": len(short),
              "short_with_several_windows": sum(per_question[k] > 1 for k in short), "several_windows": len(multi),
              "uncovered_chars_median": int(np.median(uncovered)) if short else None,
              "uncovered_chars_max": max(uncovered) if short else None,
              **{name: len(subset) for name, subset in uncovered_sets.items()},
              "short_in_train": in_train, "short_in_eval": in_eval, "short_in_neither": neither,
              "scores": scores, "predictions_differ": differ,
              "short_ids": short_ids,
              **{name + "_ids": [examples[k]["id"] for k in subset] for name, subset in uncovered_sets.items()}}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    say(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
