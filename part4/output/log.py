"""What the scripts print: the log (each line printed and kept, then written with the numbers it is given as
results/<name>.log and .json, each atomically, with the command line, the device, the seconds and the library
versions), how a line is formatted (a score in points with two decimals, 88.50, a list as the article prints it, the
article's number labelled beside ours), and the plots, drawn to files when matplotlib is installed. The fine-tuning
command's own lines are part4/run/'s, a family's part4/tasks/families.py's, each script's the script's."""

import json
import os
import platform
import sys
import time

import numpy as np
import tokenizers
import torch
import transformers

from part4.output.results_files import portable, write_atomic


class Report:
    """Prints each log line to stdout and keeps a copy; `save` writes the .log and the .json."""

    def __init__(self, name, results_dir, quiet=False):
        self.name, self.results_dir, self.quiet = name, results_dir, quiet
        self.lines = []
        self.started = time.time()

    def say(self, line=""):
        if not self.quiet:
            print(line, flush=True)
        self.lines.append(line)

    def say_again(self, lines):
        """The lines of an interrupted run, printed and kept again (a resumed run's log continues them)."""
        for line in lines:
            self.say(line)

    def save(self, payload, cli=None, device=None, also=""):
        """Write results/<name>.log and results/<name>.json, each atomically, the log ending with the line that says
        so ("written: results/<name>.log, .json", in the folder as the user gave it; also: what else the command
        wrote, on the same line). cli: the command line as recorded by command_line."""
        payload = dict(payload)
        versions = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
                    "tokenizers": tokenizers.__version__, "numpy": np.__version__}
        payload["run"] = {**(cli or command_line(None, None)), "device": str(device) if device is not None else None,
                          "seconds": round(time.time() - self.started, 3), "versions": versions}
        os.makedirs(self.results_dir, exist_ok=True)
        base = os.path.join(self.results_dir, self.name)
        self.say(f"written: {base}.log, .json{also}")
        write_atomic(base + ".log", "\n".join(self.lines) + "\n")
        write_atomic(base + ".json", json.dumps(payload, indent=2, default=_jsonable) + "\n")
        return base + ".json"


def command_line(argv, flags):
    """What a results file records of the command that made it: its argv and its parsed flags (a dict), each with
    local paths made portable."""
    return {"argv": [portable(a) for a in list(sys.argv[:1]) + list(argv if argv is not None else sys.argv[1:])],
            "config": {k: portable(v) for k, v in flags.items()} if flags is not None else None}


def _jsonable(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, torch.Tensor):
        return x.tolist()
    return str(x)


# --- How lines are formatted: scores as printed, a list as the article prints it, the article's number beside ours ---

def fmt(scores, missing="n/a"):
    """Scores as the logs and tables print them, with two decimals: 88.5 -> '88.50'; several (MNLI's matched and
    mismatched) joined by '/': [84.1, 83.4] -> '84.10/83.40'; None or none at all -> missing."""
    if scores is None:
        return missing
    values = scores if isinstance(scores, (list, tuple)) else [scores]
    return "/".join(f"{v:.2f}" for v in values) if values else missing


def rounded(values, digits):
    """A list printed as the article prints it: [-0.1763, -0.9611, 0.0659]."""
    return str([round(float(v), digits) for v in values])


RANDOM_HEAD = "the article's own random head, not expected to match"
UNTRAINED_HEAD = "from a trained head; ours is untrained, not expected to match"


def article(value, note=None):
    """The article's number, labelled, printed after ours on every route. Where ours comes from a randomly
    initialised head, the note says that the two are not expected to match."""
    return f"   [article: {value}" + (f"; {note}]" if note else "]")


# --- Plots, drawn to files when matplotlib is installed (an optional package: without it one line says they were skipped) ---

_PLOT_NOTICE = []


def pyplot():
    """matplotlib.pyplot drawing to files (no screen needed), or None when matplotlib is not installed
    (then one line on stderr, once, says so and how to get the plots)."""
    try:
        import matplotlib
    except ImportError:
        if not _PLOT_NOTICE:
            _PLOT_NOTICE.append(1)
            print("plots skipped: matplotlib is not installed (pip install matplotlib to get them)", file=sys.stderr)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def line_plot(path, x, series, xlabel, ylabel=None, right=None):
    """One figure of lines against x, saved to path when matplotlib is installed: series {label: values} on the
    left axis, right = (label, values) on a second axis. Returns the path, or None without matplotlib."""
    plt = pyplot()
    if plt is None:
        return None
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, values in series.items():
        ax.plot(x, values, label=label)
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if right:
        ax.twinx().plot(x, right[1], color="C1", label=right[0])
        fig.legend(loc="lower center", ncol=2)
    else:
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
