"""The Hugging Face Hub, asked as little as possible: offline (HF_HUB_OFFLINE) or reachable (one quick probe per
process), and a model in the local cache (a dataset read from the Hub: part4/data/readers.py)."""

import os
import socket
from urllib.parse import urlparse

from huggingface_hub import constants as hub_constants
from huggingface_hub import try_to_load_from_cache

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
