"""The names of the files inside artifacts, in one place: what each stage writes and what
the stages after it, the orchestrator and the reports read.

    <artifact>/manifest.json   every stage: key, inputs, code version, metrics (orchestrator/store.py)
    <artifact>/card.md         every stage's card, shown in the Prefect UI as `<stage>-card` (a stage that
                               writes none gets one from its manifest: orchestrator/card.py)
    assets/assets.json         which model and tokenizers (dirs inside the artifact, or hub ids)
    cold_start/sft.parquet     the SFT conversations, `messages` + `tools`
    rl_curation/, decontaminate/, stage3_filter/
               problems.parquet  RL problems {id, source, problem, answer}
    rl_curation/agreement.parquet   the agreement filter's answers per problem
    decontaminate/removed.jsonl     the problems removed, with the benchmark n-gram that matched
    sft/, rl_stage*/
               model/            weights and tokenizer (with the chat template): `from_pretrained` loads it
               curves.csv, curves.png, tensorboard/
    rl_stage*/trainer_state/   optimizer, schedule and RNG states (accelerate's format)
    rl_stage*/rl_state.json    {"global_step": …}: where the next stage counts from
    stage3_filter/solve_rates.csv, solve_rates.png
    eval_*/results.json        evaluation/results.py; samples/<benchmark>.parquet, rejects/, accuracy.png
    eval_report/comparison.md, comparison.csv, gains.csv, comparison.png
    (data stages) rejects.jsonl   every row not used, with file, row and reason
"""

from __future__ import annotations

MANIFEST = "manifest.json"
CARD = "card.md"
REJECTS = "rejects.jsonl"

ASSETS = "assets.json"
CHATS = "sft.parquet"
PROBLEMS = "problems.parquet"
AGREEMENT = "agreement.parquet"
REMOVED = "removed.jsonl"

MODEL = "model"
CURVES = "curves.csv"
CURVES_PLOT = "curves.png"
TENSORBOARD = "tensorboard"
TRAINER_STATE = "trainer_state"
RL_STATE = "rl_state.json"

SOLVE_RATES = "solve_rates.csv"
SOLVE_RATES_PLOT = "solve_rates.png"

RESULTS = "results.json"
SAMPLES = "samples"  # a directory: one <benchmark>.parquet each
REJECTS_DIR = "rejects"  # evaluation: one <benchmark>.jsonl each
ACCURACY_PLOT = "accuracy.png"
COMPARISON = "comparison.md"
COMPARISON_TABLE = "comparison.csv"
COMPARISON_PLOT = "comparison.png"
GAINS_TABLE = "gains.csv"  # eval_report: each checkpoint over base and over SFT, paired by problem
