"""Plots, drawn to files when matplotlib is installed (an optional package: without it one line says they were
skipped)."""

import os
import sys

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
