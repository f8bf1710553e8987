"""Re-run ``fog`` on the model outputs an evaluation recorded, to judge answer-side changes for free.

A ``localkg eval`` run keeps every model call's output in ``predictions.jsonl``. Replaying those
outputs in the same order (``ScriptedLLM``) reproduces the run's answers exactly as long as the
prompts do not change, which holds for everything that happens after the model has spoken: how
the answer is read off the scored graph, how many rounds the answer reads, what it is scored
against. A change there costs a second of scoring per question instead of the model's seconds.
With ``--set rounds=1`` on a two-round run, the first round's outputs are replayed and the rest
go unused, which is exactly a one-round run. Changes that alter what the model is shown are not
measured by this (the replayed outputs no longer answer those prompts).

Prints one JSON object: the recorded and the replayed Hits@1 over the run's questions. Usage::

    python bench/fog_replay.py ../shared/data/metaqa/1-hop/qa_dev.txt --db dbs/metaqa \\
        --run runs/fog/metaqa-1hop --set rounds=1
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections import deque
from pathlib import Path

from localkg.datasets import read_questions, resolve_topics
from localkg.evaluation.metrics import Prediction, score_question
from localkg.llm.scripted import ScriptedLLM
from localkg.reasoners.base import Context
from localkg.reasoners.fog import FoGReasoner
from localkg.store.kg import KG


def recorded_outputs(record: dict) -> dict[str, list]:
    """Per step, the JSON outputs of the run's model calls in call order ({} for an unparsable one)."""
    outputs: dict[str, list] = {}
    for call in record["trace"]["llm"]:
        try:
            output = json.loads(call["output"])
        except (TypeError, ValueError):
            output = {}
        outputs.setdefault(call["step"], []).append(output)
    return outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions", type=Path)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--run", type=Path, required=True, help="a `localkg eval --reasoner fog` output folder")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

    records = {r["qid"]: r for r in map(json.loads, (args.run / "predictions.jsonl").open())}
    questions = [q for q in read_questions(args.questions) if q.id in records]
    settings = dict(item.split("=", 1) for item in args.settings)
    replayed, recorded = [], []
    queues: dict[str, deque] = {}

    def replay(step: str, prompt: str, options: list[str] | None) -> dict:
        return queues[step].popleft() if queues.get(step) else {}

    with KG.open(args.db, read_only=True) as kg:
        model = ScriptedLLM(replay)
        reasoner = FoGReasoner(Context(kg, llm_factory=lambda: model), **settings)
        for question in questions:
            queues.clear()
            queues.update((step, deque(outputs)) for step, outputs in recorded_outputs(records[question.id]).items())
            result = reasoner.answer(question.text, resolve_topics(kg, question))
            predictions = [Prediction(a.id, a.name) for a in result.answers]
            replayed.append(score_question(predictions, question.answers).hits_at_1)
            recorded.append(records[question.id]["metrics"]["hits@1"])
    print(json.dumps({"questions": len(replayed), "settings": settings,
                      "recorded_hits@1": round(statistics.mean(recorded), 3) if recorded else None,
                      "replayed_hits@1": round(statistics.mean(replayed), 3) if replayed else None}))


if __name__ == "__main__":
    main()
