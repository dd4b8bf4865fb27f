"""The paper's fine-tuning recipe as settings (§4.1-4.4, A.3), and the one home of each: every task's learning rate,
batch size, epochs, input length and dev evaluations (and a run's count of them); the optimiser's warmup, weight decay
and clipping; the grids; SQuAD's windows and span search; the dev batches. No torch here, so that the command lines
(part4/command_line/fine_tune_settings.py, part4/command_line/script_settings.py) show and check them at once; the
recipe itself (bert_part4_finetune.py) and every room that reads one of them import it from here."""

from dataclasses import dataclass

GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")   # GLUE's order (part4/data/readers.py)
GLUE_BATCH_SIZE, GLUE_EPOCHS = 32, 3   # §4.1: "a batch size of 32 and fine-tune for 3 epochs ... for all GLUE tasks"
# SQuAD's windows, the article's "overlapping windows with a stride of 128 tokens (the settings of the released code)".
# STRIDE is the tokens two consecutive windows share, as the article means it and as Hugging Face tokenizers' `stride`
# (the log's "stride 128"). run_squad.py's doc_stride, the same number, is instead the step from one window's start to
# the next's: there two consecutive windows share a window's passage tokens (max_seq_length less the question, [CLS]
# and two [SEP]) less doc_stride. The released code's numbers, then, not its windows.
MAX_LEN, STRIDE = 384, 128             # run_squad.py's max_seq_length; the stride, as above
N_BEST, MAX_ANSWER = 20, 30            # run_squad.py: the 20 best starts and ends, answers of at most 30 tokens
SPAN_BATCH_SIZE = 64                   # windows per forward pass of the span search
EVAL_BATCH_SIZE = 128                  # dev inputs per forward pass of a GLUE or SWAG run (--eval-batch-size)
TAU_SWEEP = (-6.0, 6.0, 0.25)          # tau from, to, step (article: -6 to +6 in steps of 0.25)
WARMUP = 0.1                           # run_classifier.py's warmup_proportion: the share of steps with a rising lr
WEIGHT_DECAY = 0.01                    # paper A.2 (not on biases and LayerNorm weights)
CLIP = 1.0                             # Google's optimization.py: gradients clipped to a global norm of 1.0
CUT_EVAL_EVERY = 10                    # a run cut by --max-train-examples: a dev evaluation every 10 steps at most


@dataclass(frozen=True)
class Recipe:
    lr: float
    batch_size: int
    epochs: int
    max_len: int
    evals: int = None      # dev evaluations asked per run (--evals); None: one per epoch. A run makes
    #                        evaluations_made of them: 30 asked of SST-2's 6,315 steps, 31 made (below)


GLUE_RECIPE = Recipe(lr=2e-5, batch_size=GLUE_BATCH_SIZE, epochs=GLUE_EPOCHS, max_len=128, evals=30)  # lr, ~30: the article's
RECIPES = {**{name: GLUE_RECIPE for name in GLUE_TASKS},                                        # §4.1
           "squad": Recipe(lr=5e-5, batch_size=32, epochs=3, max_len=MAX_LEN),                 # §4.2
           "squad_v2": Recipe(lr=5e-5, batch_size=48, epochs=2, max_len=MAX_LEN),              # §4.3
           "swag": Recipe(lr=2e-5, batch_size=16, epochs=3, max_len=128)}                      # §4.4
ONCE_PER_EPOCH = ("mnli", "qqp")   # the glue command evaluates these once per epoch: dev sets of 9,815 + 9,832 and
                                  # 40,430 pairs, ~30 evaluations would cost 20-40% of the run
GRIDS = {"glue": {"lr": (5e-5, 4e-5, 3e-5, 2e-5)},                        # §4.1: the lr, at the batch size and epochs given
         "a3": {"batch_size": (16, 32), "lr": (5e-5, 3e-5, 2e-5), "epochs": (2, 3, 4)}}   # A.3: the whole product
GRID_SOURCES = {"glue": "paper §4.1", "a3": "paper A.3"}


def eval_every(evals, steps, cut):
    """The steps between two dev evaluations of a run, its one home (the run, its preamble and the reproduction's plan
    of work read it here): steps // evals (evals: the run's count, Job.dev_evaluations); a run cut by
    --max-train-examples (cut) evaluates no more often than every CUT_EVAL_EVERY steps (its curve has fewer points; a
    full run keeps the recipe's, the article's ~30), unless --evals was given (cut is then False)."""
    every = max(1, steps // evals)
    return max(every, min(CUT_EVAL_EVERY, steps)) if cut else every


def evaluations_made(steps, every):
    """The dev evaluations a run of `steps` steps makes at one every `every` steps: at each multiple of every, and at
    its last step when that is not one (15 steps, every 10: at steps 10 and 15, 2; the article's SST-2 run, "including
    31 evaluations on the dev set": its 6,315 steps at one every 210, the last at its last step; the untrained head's
    score before training is not one of them)."""
    return -(-steps // every)


def lr_tag(lr):
    """2e-05 -> '2e-5', 2.5e-05 -> '2.5e-5': the learning rate as the article's file names write it."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


# '5e-5, 4e-5, 3e-5, 2e-5': the learning rates of grid glue (§4.1) as the paper writes them
GLUE_GRID_LRS = ", ".join(lr_tag(lr) for lr in GRIDS["glue"]["lr"])


def grid_points(name, batch_size, epochs):
    """The (batch_size, lr, epochs) of every run of a grid, in its order; what it does not vary, as given."""
    axes = {"batch_size": (batch_size,), "epochs": (epochs,), **GRIDS[name]}
    return [(b, lr, e) for b in axes["batch_size"] for lr in axes["lr"] for e in axes["epochs"]]


def grid_description(name, batch_size, epochs):
    """grid a3 (paper A.3): batch {16, 32} x lr {5e-5, 3e-5, 2e-5} x epochs {2, 3, 4} = 2 x 3 x 3 = 18 runs"""
    axes = GRIDS[name]
    named = [(label, [lr_tag(v) if key == "lr" else str(v) for v in axes[key]])
             for key, label in (("batch_size", "batch"), ("lr", "lr"), ("epochs", "epochs")) if key in axes]
    product = f" = {' x '.join(str(len(a)) for _, a in named)}" if len(named) > 1 else ""
    return (f"grid {name} ({GRID_SOURCES[name]}): " + " x ".join(f"{n} {{{', '.join(a)}}}" for n, a in named)
            + f"{product} = {len(grid_points(name, batch_size, epochs))} runs")
