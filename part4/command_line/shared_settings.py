"""The settings several scripts take, each declared once here (type, default, help, range or choices) and used by every
script that takes it: the model, the seed, the device, the results folder, the autocast dtype, SQuAD's windows, the
quick pass's cuts; and the check across two of them (a window longer than its overlap). A
script's settings take one with shared(name), adding only where its own results file records it. No torch here."""


from part4.command_line.declarations import POSITIVE, Range, setting
from part4.command_line.errors import Fatal
from part4.paper.article import ARTICLE_MODEL
from part4.paper.recipe import RECIPES, STRIDE

FAMILY_NAMES = {"cola": "GLUE", "squad": "SQuAD v1.1", "squad_v2": "SQuAD v2.0", "swag": "SWAG"}


def paper_defaults(field, text=str):
    """'GLUE 32, SQuAD v1.1 32, SQuAD v2.0 48, SWAG 16': a setting of RECIPES for each head family, for --help."""
    return ", ".join(f"{label} {text(getattr(RECIPES[task], field))}" for task, label in FAMILY_NAMES.items())


DEVICES = ("auto", "cuda", "mps", "cpu")
DTYPES = ("auto", "fp32", "bf16", "fp16")


SHARED = {           # {name: its declaration}: what setting() takes, the same in every script that takes it
    "model": dict(default=ARTICLE_MODEL,
                  help=f"pre-trained BERT: Hub id or local folder (default and article: {ARTICLE_MODEL})"),
    "seed": dict(default=0, help="the one fixed seed: the new output layers' random weights, and in fine-tuning the "
                                 "batches' order and dropout (default 0)"),
    "device": dict(default="auto", choices=DEVICES, help="auto (cuda, then mps, then cpu), cuda, mps or cpu (default: auto)"),
    "results_dir": dict(default="results", help="the results folder: where each script writes its logs, JSON and plots, "
                                                "and the report reads them and writes REPRODUCTION.md (default: results/)"),
    "dtype": dict(default="auto", choices=DTYPES,      # resolved on the device: part4/models/devices.py's autocast_dtype
                  help="autocast: auto (the default: bf16 on CUDA, fp16 on MPS for evaluation only, fp32 elsewhere), "
                       "fp32, bf16, or fp16 for evaluation only (training in fp16 needs loss scaling, which this suite "
                       "does not do)"),
    "max_len": dict(recipe=True, check=POSITIVE,
                    help=f"longest input in tokens (default: {paper_defaults('max_len')}: run_classifier.py's inputs, "
                         "run_squad.py's windows)"),
    "stride": dict(default=STRIDE, check=Range(0),
                   help=f"SQuAD: tokens two consecutive windows share (default {STRIDE}: run_squad.py's doc_stride, "
                        "which there is the step from one window to the next)"),
    "limit": dict(check=POSITIVE, metavar="N",
                  help="only the first N examples of each dev set, in file order (SQuAD: questions)"),
    "max_train_examples": dict(check=POSITIVE, cuts=True, metavar="N",
                               help="only the first N training examples of each fine-tune (SQuAD: questions): a cut "
                                    "run, which its log and the report mark"),
}


def shared(name, **where):
    """The declaration of a setting several scripts take, as SHARED holds it; where: only what a script's own results
    file adds to it (record, unless_default, path), never its type, default, help, range or choices."""
    unknown = sorted(set(where) - {"record", "unless_default", "path"})
    if unknown:
        raise TypeError(f"shared('{name}') takes the declaration as it is: {', '.join(unknown)} cannot differ")
    return setting(**SHARED[name], **where)


def check_windows(max_len, stride):
    """SQuAD's windows: the stride (the tokens two windows share, at least 0 by its declaration) must be below the
    window length."""
    if not 0 <= stride < max_len:
        raise Fatal(f"--stride {stride}: must be below the window length --max-len {max_len} (and at least 0)")
