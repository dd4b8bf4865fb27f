"""Each command bert_part4_reproduce.py runs, as a process of its own (torch is loaded there, never here): an
experiment's script, alone or side by side with the other runs of its grid; a stand-in's fine-tune, then its model
taken into the mirror; the report after each experiment; the calibration of the units not measured yet. Each comes
back as an Outcome (its status, its time beside its estimate, its one-line error, its peak memory) or its lines;
Ctrl-C and SIGTERM are passed on to what runs, which stops cleanly (a fine-tune saves its checkpoint)."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

from part4.command_line.declarations import Fatal
from part4.output.results_files import RU_MAXRSS_UNIT, portable, read_json, write_atomic
from part4.reproduction import estimates, experiments, stand_in

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))     # where the scripts stand
REPORT = os.path.join(ROOT, "bert_part4_report.py")


@dataclass
class Outcome:
    experiment: object         # an experiments.Experiment, or a stand_in.Step
    status: str                # done before | ran | failed | stopped
    seconds: float = 0.0
    estimate: float = None
    reason: str = ""
    peak: int = None           # bytes: its process's largest resident memory (with its own children's), where measured


class Terminated(Exception):
    """SIGTERM to this process: passed on to the running experiment, which stops as on Ctrl-C."""


def raise_terminated(signum, frame):
    raise Terminated()


def last_line(text):
    """A script's one-line error, from its stderr: its last line that says why it stopped, else its last line (a
    traceback's: the exception)."""
    lines = [part.strip() for line in text.splitlines() for part in line.split("\r") if part.strip()]
    said = [line for line in lines if line.startswith(("error:", "stopped", "interrupted"))]
    return (said or lines or [""])[-1]


def read_back(file):
    """All a temporary file holds, read from its start."""
    file.seek(0)
    return file.read()


# --- An experiment's command, alone or side by side ---

def run_experiment(experiment, inputs, estimate):
    """An experiment's command (part4/reproduction/experiments.py's), run as its script's own."""
    return run_command(experiment, experiments.command(experiment, inputs), estimate)


def run_command(item, words, estimate):
    """A script's command as a subprocess, its stdout on ours, its stderr kept for its one-line error. Ctrl-C and
    SIGTERM are passed on to it: it stops cleanly (a fine-tune saves its checkpoint) and we wait for it."""
    start = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as err:
        proc = subprocess.Popen([sys.executable, os.path.join(ROOT, words[0]), *words[1:]], stderr=err)
        try:
            _, status, usage = os.wait4(proc.pid, 0)          # proc.wait(), with the child's peak memory
            proc.returncode = code = os.waitstatus_to_exitcode(status)
        except (KeyboardInterrupt, Terminated) as stop:
            proc.send_signal(signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT)
            proc.wait()
            return Outcome(item, "stopped", seconds=time.perf_counter() - start, estimate=estimate,
                           reason=last_line(read_back(err)))
        status = "ran" if code == 0 else "failed"
        return Outcome(item, status, seconds=time.perf_counter() - start, estimate=estimate,
                       reason="" if code == 0 else last_line(read_back(err)) or f"exit status {code}",
                       peak=usage.ru_maxrss * RU_MAXRSS_UNIT)


def run_side_by_side(runs, n, costs, inputs):
    """The experiments runs, n processes at a time, each its own script's command (its own results file); each one's
    stdout kept and printed whole when it ends (not interleaved), its stderr for its one-line error. On the CPU each
    takes its share of the cores (OMP_NUM_THREADS, unless set). Ctrl-C and SIGTERM are passed on to every one running;
    those not started yet are not run. [Outcome] in the order they ended."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // n)))
    waiting, running, ended = list(runs), [], []
    try:
        while waiting or running:
            while waiting and len(running) < n:
                e = waiting.pop(0)
                running.append(Child(e, costs[e.name], inputs, env))
            time.sleep(0.2)
            for child in [c for c in running if c.proc.poll() is not None]:
                running.remove(child)
                ended.append(child.outcome("ran" if child.proc.returncode == 0 else "failed"))
    except (KeyboardInterrupt, Terminated) as stop:
        for child in running:
            child.proc.send_signal(signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT)
        for child in running:
            child.proc.wait()
            ended.append(child.outcome("stopped"))
    return ended


class Child:
    """An experiment's command started as a process of its own beside others, its stdout and stderr kept in files."""

    def __init__(self, experiment, estimate, inputs, env):
        self.experiment, self.estimate, self.start = experiment, estimate, time.perf_counter()
        words = experiments.command(experiment, inputs)
        self.out, self.err = (tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") for _ in range(2))
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, words[0]), *words[1:]], stdout=self.out,
                                     stderr=self.err, env=env)

    def outcome(self, status):
        """Its Outcome once it has ended, its stdout printed whole."""
        seconds = time.perf_counter() - self.start
        sys.stdout.write(read_back(self.out))
        sys.stdout.flush()
        reason = "" if status == "ran" else last_line(read_back(self.err)) or f"exit status {self.proc.returncode}"
        self.out.close()
        self.err.close()
        return Outcome(self.experiment, status, seconds=seconds, estimate=self.estimate, reason=reason)


# --- A stand-in built, the report rebuilt, the units measured ---

def build_stand_in(step, mirror, estimate):
    """One model of the stand-in mirror built: the base copied, or its fine-tune's command run as an experiment is,
    then its saved model taken in; each moved into place with its record (part4/reproduction/stand_in.py)."""
    start = time.perf_counter()
    stand_in.fresh_staging(mirror, step.build)
    if not step.build.task:
        stand_in.copy_base(step, mirror)
        return Outcome(step, "ran", seconds=time.perf_counter() - start, estimate=estimate)
    words = stand_in.fine_tune_command(step.build, mirror)
    outcome = run_command(step, words, estimate)
    if outcome.status == "ran":
        try:
            stand_in.take_fine_tuned(step, mirror, words)
        except Fatal as e:
            return Outcome(step, "failed", seconds=outcome.seconds, estimate=estimate, reason=str(e))
    return outcome


def rebuild_report(results_dir, log):
    """bert_part4_report.py on the results folder: its summary line, or its one-line error."""
    done = subprocess.run([sys.executable, REPORT, "--results-dir", results_dir], capture_output=True, text=True)
    lines = (done.stdout if done.returncode == 0 else done.stderr).strip().splitlines()
    log.say(f"report: {lines[-2] if done.returncode == 0 and len(lines) > 1 else (lines or ['?'])[-1]}")


def measured(works, device, cache, log, offline=False, names=None):
    """The units of works not in the cache measured by part4/reproduction/calibration.py in a process of its own (torch
    is loaded there, never here), its lines said as they come: (the cache filled, {model: why} for the models it could
    not load). offline: the Hub is out of reach, and the cached models are read without asking it."""
    with tempfile.TemporaryDirectory() as tmp:
        request = os.path.join(tmp, "calibration.json")
        names = {w.model: portable(w.model) for w in works} | (names or {})       # no folder of this machine in the log
        write_atomic(request, json.dumps({"works": [asdict(w) for w in works], "device": device, "cache": cache,
                                          "names": names}))
        env = dict(os.environ, HF_HUB_OFFLINE="1") if offline else None
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "part4.reproduction.calibration", request], cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for line in proc.stdout:
            if line.rstrip("\n") == estimates.IMPORTED:       # a script's start: a process of python importing what they import
                started = time.perf_counter() - start
                continue
            log.say(line.rstrip("\n"))
        err = proc.stderr.read()
        if proc.wait() != 0:
            raise Fatal(f"the calibration failed: {last_line(err) or f'exit status {proc.returncode}'}")
        answer = read_json(request)
    starts = {estimates.work_key(w, cache): started for w in works if w.kind == "start"}
    return {**answer["cache"], **starts}, answer["problems"]
