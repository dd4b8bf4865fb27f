"""Devices and processes, chosen once here for every script (the calibration, part4/reproduction/calibration.py, run in
a process of its own, resolves its --device in the same order itself): the device (cuda, then mps, then cpu), the
autocast dtype there, the attention kernels of a training step on CUDA, the seeds, and the processes torchrun starts (one per
device): joining and leaving their group, and what they share (an error every process stops on, objects gathered,
tensors summed)."""

import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.attention import SDPBackend, sdpa_kernel

from part4.command_line.errors import Fatal

# --- the device, the precision and the seeds ---

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
