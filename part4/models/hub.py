"""The Hugging Face Hub, asked as little as possible: offline (HF_HUB_OFFLINE) or reachable (one quick probe per
process), a model or dataset in the local cache, a dataset loaded from it or from the local cache, and whether a data
input can be read (a local file, else the Hub's dataset)."""

import os
import socket
import sys
from urllib.parse import urlparse

from huggingface_hub import constants as hub_constants
from huggingface_hub import try_to_load_from_cache

from part4.command_line.errors import Fatal, not_a_script
from part4.output.results_files import WEIGHT_FILES

_HUB_PROBES = {}


def hub_offline():
    """HF_HUB_OFFLINE=1: use the local caches only."""
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")


def hub_reachable(timeout=3.0):
    """A quick TCP probe of the Hub's endpoint (HF_ENDPOINT: its host and port, https's 443 unless it names one), once
    per process, so that an offline machine fails in seconds."""
    if hub_offline():
        return False
    url = urlparse(hub_constants.ENDPOINT)
    try:
        where = (url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443))
    except ValueError:                       # a port that is not a number: nothing answers there
        return False
    if where not in _HUB_PROBES:
        try:
            socket.create_connection(where, timeout=timeout).close()
            _HUB_PROBES[where] = True
        except OSError:
            _HUB_PROBES[where] = False
    return _HUB_PROBES[where]


def model_cached(name):
    """Is the Hub model `name` in the local Hub cache: its config.json and a weight file?"""
    return isinstance(try_to_load_from_cache(name, "config.json"), str) and \
        any(isinstance(try_to_load_from_cache(name, f), str) for f in WEIGHT_FILES)


def dataset_cached(name):
    """Is the Hub dataset `name` in a local cache (the datasets cache, or the Hub's download cache)?"""
    import datasets

    return (os.path.isdir(os.path.join(datasets.config.HF_DATASETS_CACHE, name.replace("/", "___")))
            or os.path.isdir(os.path.join(hub_constants.HF_HUB_CACHE, "datasets--" + name.replace("/", "--"))))


def file_problem(path, flag, hub_name=None):
    """Why a data file cannot be read, or None; with no path, whether the Hub dataset can be fetched."""
    if path is None:
        if hub_name and hub_offline() and not dataset_cached(hub_name):
            return (f"HF_HUB_OFFLINE is set and the dataset '{hub_name}' is not in the local datasets cache; pass "
                    f"local files with {flag}")
        if hub_name and not hub_offline() and not hub_reachable():
            return (f"the Hugging Face Hub cannot be reached to download the dataset '{hub_name}'; pass local files "
                    f"with {flag} (or set HF_HUB_OFFLINE=1 to use a local datasets cache)")
        return None
    return None if os.path.isfile(os.path.expanduser(path)) else f"{flag} {path}: no such file"


def load_hub_dataset(name, config, split, flag):
    """datasets.load_dataset(name, config, split=split), with one clear line when the Hub is out of reach.

    With HF_HUB_OFFLINE=1 the local datasets cache is used; otherwise an unreachable Hub fails at once.
    """
    problem = file_problem(None, flag, name)
    if problem:
        raise Fatal(problem)
    import datasets

    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as e:  # datasets raises many kinds (ConnectionError, OSError, DatasetNotFoundError)
        raise Fatal(f"could not load the dataset '{name}' ({type(e).__name__}: {str(e).splitlines()[0]}); "
                    f"pass local files with {flag}")


if __name__ == "__main__":
    sys.exit(not_a_script("part4/models/hub.py"))
