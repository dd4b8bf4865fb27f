"""Part 4, number by number: every number the article prints beside ours, with a status for each.

    python bert_part4_report.py            # results/ -> results/REPRODUCTION.md and .json
    python bert_part4_report.py results/part4_mrpc_lr5e-5_all-MiniLM-L6-v2.json     # one run against the article's lines

The article's numbers come from part4/paper/article.py; ours from the results JSON the scripts wrote (part4_*.json, in
--results-dir and the folders below it), each checked whole (part4/reproduction/our_numbers.py). The statuses (same,
within spread, within tolerance, differs, another model, another split, another setting, cut run, shown, unusable, not
run yet) and the rules that decide them are part4/reproduction/statuses.py's, its docstring saying each; the report's
text is part4/reproduction/report.py's. No torch here: the report reads JSON.
"""

import json
import os
import sys

from part4.command_line import script_settings
from part4.command_line.declarations import run_main
from part4.output.results_files import write_atomic
from part4.reproduction import report
from part4.reproduction.our_numbers import REPORT_JSON, REPORT_MD, checked_runs
from part4.reproduction.statuses import read_requirements, rows


def main(argv=None):
    args = script_settings.parse_report(argv)   # the command line as settings (part4/command_line)
    if args.run:                                # one run against the article's lines, printed
        return report.one_run(args.run, read_requirements())
    runs = checked_runs(args.results_dir)                    # every results file, each checked whole
    table = rows(runs, args.results_dir, read_requirements())    # each number beside ours, with its status
    report.warn_unusable(table, args.results_dir)
    counts, split, line = report.status_summary(table, runs)
    md = report.report_markdown(table, line, report.plots_by_section(args.results_dir), report.report_notes(runs),
                                results_dir=args.results_dir)
    write_atomic(os.path.join(args.results_dir, REPORT_MD), md)
    write_atomic(os.path.join(args.results_dir, REPORT_JSON),
                 json.dumps({"summary": line, "counts": counts, "reproduced": split, "rows": table}, indent=1) + "\n")
    if not runs:
        print(f"{args.results_dir}: {report.NO_RESULTS}")
    print(line)
    print(f"written: {os.path.join(args.results_dir, REPORT_MD)}, {REPORT_JSON}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
