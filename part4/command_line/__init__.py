"""The command line and its settings, without torch (so that --help and a refused flag answer at once):

    declarations         a command line's ground: the one-line errors every script speaks (Fatal, Stopped), run_main,
                         answer_now, preflight, not_a_script; a setting declared once (flag, type, default, help, range,
                         where recorded), and what is made from the declarations: the parser's arguments, the checks,
                         the values, the recorded settings; the settings several scripts take, each declared once
    fine_tune_settings   bert_part4_finetune.py's command line: its Settings, each declared once; the parser, the checks
                         across flags, Settings made once (parse); settings recorded earlier read as now
    script_settings      the settings and command lines of the heads, SQuAD, math, report and reproduce scripts"""
