"""The command line and its settings, without torch (so that --help and a refused flag answer at once):

    errors               the one-line errors every script speaks (Fatal, Stopped), run_main, answer_now,
                         preflight, not_a_script
    declarations         a setting declared once (flag, type, default, help, range, where recorded), and what is made
                         from the declarations: the parser's arguments, the checks, the values, the recorded settings;
                         the settings several scripts take (device, results folder, dtype, ...), each declared once
    fine_tune_settings   the fine-tuning script's Settings, each declared once; the command as a results file records it
    fine_tune_parser     bert_part4_finetune.py's command line: the parser, the checks across flags, Settings made once
    script_settings      the settings and command lines of the heads, SQuAD, math, report and reproduce scripts"""
