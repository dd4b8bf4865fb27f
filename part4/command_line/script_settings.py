"""The command lines of bert_part4_heads.py, bert_part4_squad.py and bert_part4_math.py: their flags (every default
named with where it comes from) and their checks before any work. No torch here (nor anything that imports it), so
that --help and a refused flag answer at once, before a script loads torch. bert_part4_finetune.py's command line is
part4/command_line/fine_tune_parser.py; bert_part4_report.py keeps its own (it loads no torch at all). The defaults
are the recipe's (part4/paper/recipe.py) and the article's models (part4/paper/article.py).
"""

import sys

from part4.command_line.declarations import ArgumentParser, add_common_flags, check_positive
from part4.command_line.errors import Fatal, not_a_script
from part4.paper.article import ARTICLE_MODEL, SQUAD_V1, SQUAD_V2, SST2
from part4.paper.recipe import MAX_ANSWER, MAX_LEN, N_BEST, SPAN_BATCH_SIZE, STRIDE, TAU_SWEEP, check_windows

# --- bert_part4_heads.py ---

def heads_parser():
    p = ArgumentParser(
        description="Part 4, 'Checking the formula in code': the GLUE, SWAG and SQuAD heads of BERT "
                    "computed by hand and compared with Hugging Face on the same weights.")
    p.add_argument("--model", default=ARTICLE_MODEL,
                   help="Hub id or local folder of a pre-trained BERT (default: bert-base-uncased, "
                        "as in the article)")
    add_common_flags(p)
    p.add_argument("--seed", type=int, default=0, help="seed for the randomly initialised heads (default: 0)")
    return p


def parse_heads(argv):
    return heads_parser().parse_args(argv)


# --- bert_part4_squad.py ---

def squad_parser():
    p = ArgumentParser(
        description="Part 4, SQuAD: span search on SQuAD v1.1 and v2.0 dev, official EM/F1, the "
                    "no-answer score s_null and the tau sweep (paper §4.2, §4.3).",
        epilog="Windows follow the Hugging Face tokenizer's `stride`: consecutive windows share "
               "--stride tokens of the passage (Google's "
               "run_squad.py instead moves each window on by doc_stride tokens).")
    p.add_argument("--v1-model", default=SQUAD_V1, help=f"SQuAD v1.1 QA model, Hub id or folder (default, article: {SQUAD_V1})")
    p.add_argument("--v2-model", default=SQUAD_V2, help=f"SQuAD v2.0 QA model, Hub id or folder (default, article: {SQUAD_V2})")
    p.add_argument("--v1-data", help="official dev-v1.1.json (default: the Hub dataset rajpurkar/squad)")
    p.add_argument("--v2-data", help="official dev-v2.0.json (default: the Hub dataset rajpurkar/squad_v2)")
    p.add_argument("--only", action="append", choices=["demo", "v1", "v2"],
                   help="run only these parts (repeatable; default: all)")
    p.add_argument("--limit", type=int, help="only the first N questions of each dev file, in file order")
    p.add_argument("--batch-size", type=int, default=SPAN_BATCH_SIZE,
                   help=f"windows per forward pass (default {SPAN_BATCH_SIZE})")
    p.add_argument("--max-len", type=int, default=MAX_LEN,
                   help=f"window length in tokens (default {MAX_LEN}, as paper/run_squad.py)")
    p.add_argument("--stride", type=int, default=STRIDE, help=f"tokens shared by consecutive windows (default {STRIDE}: "
                                                              f"run_squad.py's doc_stride, which there is the step; see below)")
    p.add_argument("--n-best", type=int, default=N_BEST,
                   help=f"best starts and best ends tried per window (default {N_BEST}, as run_squad.py)")
    p.add_argument("--max-answer", type=int, default=MAX_ANSWER,
                   help=f"longest answer in tokens (default {MAX_ANSWER}, as run_squad.py)")
    p.add_argument("--tau-min", type=float, default=TAU_SWEEP[0], help="tau sweep start (default -6, as the article)")
    p.add_argument("--tau-max", type=float, default=TAU_SWEEP[1], help="tau sweep end (default +6, as the article)")
    p.add_argument("--tau-step", type=float, default=TAU_SWEEP[2], help="tau sweep step (default 0.25, as the article)")
    p.add_argument("--dtype", default="auto", help="auto (the default: bf16 on CUDA, fp16 on MPS, fp32 on the CPU), "
                                                   "fp32, bf16 or fp16")
    add_common_flags(p)
    return p


def parse_squad(argv):
    p = squad_parser()
    args = p.parse_args(argv)
    args.only = sorted(set(args.only or ["demo", "v1", "v2"]))
    if args.limit is not None and args.limit <= 0:
        raise Fatal(f"--limit {args.limit}: must be a positive number of questions")
    check_windows(args.max_len, args.stride)
    check_positive({"--batch-size": args.batch_size, "--n-best": args.n_best, "--max-answer": args.max_answer})
    if args.tau_step <= 0 or args.tau_max < args.tau_min:
        raise Fatal("--tau-step must be positive and --tau-max at least --tau-min")
    return args


# --- bert_part4_math.py ---

def math_parser():
    p = ArgumentParser(description="Part 4: the article's hand arithmetic (GLUE, span and SWAG heads, EM/F1, "
                                   "s_null vs tau) and the attention flow across the packed pair.")
    p.add_argument("--only", choices=["toys", "all"], default="all",
                   help="toys: only the sections that need no model (1a, 3a, 5, 6, 8); default: all")
    p.add_argument("--sst2-model", default=SST2, help=f"SST-2 classifier, Hub id or folder (default and article: {SST2})")
    p.add_argument("--squad-model", default=SQUAD_V1, help=f"SQuAD v1.1 model, Hub id or folder (default and "
                                                           f"article: {SQUAD_V1})")
    p.add_argument("--squad2-model", default=SQUAD_V2, help=f"SQuAD v2.0 model, Hub id or folder (default and "
                                                            f"article: {SQUAD_V2})")
    p.add_argument("--tau", type=float, help="tau for section 4 (default: the best tau in results/part4_squad.json "
                                             "when it is there for the same model, else the article's +4.00)")
    p.add_argument("--flow-questions", type=int, default=100,
                   help="questions for the attention flow over a dev file (default: 100; 0: skip)")
    p.add_argument("--flow-data", help="SQuAD JSON for the flow (default: the Hub dataset rajpurkar/squad)")
    add_common_flags(p)
    return p


def parse_math(argv):
    p = math_parser()
    args = p.parse_args(argv)
    if args.flow_questions < 0:
        p.error(f"--flow-questions {args.flow_questions}: must be 0 or more")
    return args


if __name__ == "__main__":
    sys.exit(not_a_script("part4/command_line/script_settings.py",
                          "bert_part4_heads.py, bert_part4_squad.py or bert_part4_math.py (each with --help)"))
