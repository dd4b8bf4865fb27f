"""How lines are formatted: the pieces every script's lines are made of (scores with two decimals, a list as the
article prints it, the article's number labelled beside ours). The fine-tuning command's own lines are in
part4/run/training_run.py (a run's) and part4/run/records.py (the summaries), a family's in part4/tasks/families.py,
each script's in the script."""

# --- What lines are made of: scores as printed, the article's number beside ours ---

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
