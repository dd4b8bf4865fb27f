"""The models a script's sections read, for a script that runs every section it can (bert_part4_math.py): each section
with the inputs it reads (sections: {block: (section, inputs)}, the block of the results it writes, its number in the
article, the flags of its inputs); each model checked and read before any work, then loaded only while some section
still reads it; an input that cannot be used (a model refused, a data file missing) stops only the sections that read
it, each said in one line and marked in the results (not_run), and the run ends with one line naming them all."""

from part4.command_line.declarations import Fatal, preflight
from part4.models.loading import model_problem, not_bert, read_model_folder, weights_line
from part4.output.results_files import portable


def read_models(models, needs_bert, problems):
    """The models ({flag: name}), each read for what it holds before any work (a model whose sections read BERT's own
    modules, needs_bert {flag: why}, must be a BERT). Returns ({flag: ModelFolder} of those that can be used, problems
    ({input: why not, in one line}: those given, then each model that cannot be used))."""
    folders, problems = {}, dict(problems)
    for flag, name in models.items():
        try:
            preflight([model_problem(name, flag)])
            folder = read_model_folder(name, flag)
            preflight([flag in needs_bert and not_bert(folder, needs_bert[flag])])
            folders[flag] = folder
        except Fatal as e:
            problems[flag] = str(e)
    return folders, problems


def sections_not_run(sections, problems):
    """{block: why} of the sections whose inputs cannot be used (problems: {input: why})."""
    return {block: "; ".join(problems[i] for i in inputs if i in problems)
            for block, (_, inputs) in sections.items() if any(i in problems for i in inputs)}


def load_models(loaders, folders, sections, problems):
    """The models that some section can still use, each loaded by its loader ({flag: load(ModelFolder)}, in the
    sections' order) before the first line is printed. Returns ({flag: what its loader gives}, problems with each
    model refused as it loads)."""
    loaded, problems = {}, dict(problems)
    for flag, load in loaders.items():
        blocked = sections_not_run(sections, problems)
        wanted = [b for b, (_, inputs) in sections.items() if flag in inputs and b not in blocked]
        if flag in folders and wanted:
            try:
                loaded[flag] = load(folders[flag])
            except Fatal as e:
                problems[flag] = str(e)
    return loaded, problems


def first_lines(folders, loaded, heads, *, sections, not_run):
    """The lines a run with models starts with: each loaded model's weight files (and their dtype, where it is not the
    fp32 they are loaded in), its head (heads: {flag: what the log says of it}) and any warning its folder gave; then
    one line for each section that does not run, and why."""
    lines = []
    for flag in loaded:
        lines += [f"{flag} {portable(folders[flag].name)}: {weights_line(folders[flag], heads[flag])}", *folders[flag].notes]
    return lines + [f"== {sections[block][0]}. not run: {why}" for block, why in not_run.items()]


def not_run_error(sections, problems, not_run, path):
    """The one line a run that left sections out ends with (exit 2): each input that cannot be used, the sections it
    stopped, and where the rest is (path: the results file, with the toys, which read no input)."""
    stopped = {i: [sections[b][0] for b in not_run if i in sections[b][1]] for i in problems}
    said = "; ".join(f"{why} (section{'s' if len(stopped[i]) > 1 else ''} {', '.join(stopped[i])} not run)"
                     for i, why in problems.items())
    count = f"{len(problems)} inputs cannot be used: " if len(problems) > 1 else ""
    return f"{count}{said}; {path} holds the toys and every section that ran, and marks the others (not_run)"
