"""The log: each line printed and kept, then written with the numbers it is given as results/<name>.log and .json
(each atomically), with the command line, the device, the seconds and the library versions."""

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
        payload["run"] = {**(cli or command_line(None, None)), "device": str(device) if device is not None else None,
                          "seconds": round(time.time() - self.started, 3), "versions": library_versions()}
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


def library_versions():
    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "numpy": np.__version__}


def _jsonable(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, torch.Tensor):
        return x.tolist()
    return str(x)
