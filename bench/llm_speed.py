"""LLM runtime benchmark: prefill and decode tokens/s of the bundled GGUF, with references.

Prints one JSON object. Each measurement of ``localkg.llm`` comes with a
reference measured in the same run on the same model file and threads, so
the ratios mean something on any machine:

* prefill: our canonical evaluation (512-token chunks aligned at position 0,
  see engine.py) against llama-cpp-python's ``Llama.eval`` (default batches);
* decode: ``LLM.generate`` against a bare ``create_completion`` (wrapper
  overhead; both greedy, both from an empty cache);
* constrained decode: our grammar decoding (top candidates first) against
  llama-cpp-python's own grammar sampling (``create_completion(grammar=...)``)
  on the same JSON grammar, prompt and Llama object, from an empty cache;
  both must produce the same text (``same_text``);
* scoring: ``score_options`` over 10 options, calls per second.

Each number is the best of ``--repeat`` runs (the least disturbed by other
processes; ours and the reference alternate). Usage::

    python bench/llm_speed.py [--model PATH] [--threads N] [--prompt-tokens 512] [--tokens 64] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from typing import Any, Callable

from llama_cpp import Llama, LlamaGrammar

from localkg.llm import LLM
from localkg.llm.grammars import bounded_json_grammar


def best_seconds(action: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - started)
    return best, result


def paired(ours: Callable[[], Any], reference: Callable[[], Any], repeat: int) -> tuple[tuple[float, Any], ...]:
    """Best of ``repeat`` for both, run alternately so a busy spell on the machine hits both alike."""
    results = [(float("inf"), None), (float("inf"), None)]
    for _ in range(repeat):
        for i, action in enumerate((ours, reference)):
            seconds, value = best_seconds(action, 1)
            if seconds < results[i][0]:
                results[i] = (seconds, value)
    return results[0], results[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="GGUF file (default: the bundled Gemma 3 270M)")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: llama-cpp's)")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=64, help="tokens to decode")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    started = time.perf_counter()
    llm = LLM(model_path=args.model, n_ctx=2048, n_threads=args.threads)
    engine = llm.engine
    load_seconds = time.perf_counter() - started
    raw = Llama(model_path=str(llm.model_path), n_ctx=2048, n_threads=args.threads, n_threads_batch=args.threads,
                verbose=False)  # llama-cpp-python defaults: n_batch 512

    words = " ".join(f"fact{i} relates entity{i} to entity{i + 1}." for i in range(args.prompt_tokens))
    prompt_tokens = engine.tokenize(words)[: args.prompt_tokens]

    def ours_prefill() -> None:
        engine.llama.reset()
        engine.next_logprobs(prompt_tokens, len(prompt_tokens))

    def raw_prefill() -> None:
        raw.reset()
        raw.eval(prompt_tokens)

    (ours_prefill_s, _), (raw_prefill_s, _) = paired(ours_prefill, raw_prefill, args.repeat)

    short = "The story of the film begins in a small town where"
    short_tokens = len(engine.tokenize(short))

    def raw_generate() -> dict:
        raw.reset()
        return raw.create_completion(short, max_tokens=args.tokens, temperature=0.0, stop=[])

    def ours_generate() -> str:
        return llm.generate(short, step="bench", max_tokens=args.tokens)

    (ours_gen_s, _), (raw_gen_s, raw_response) = paired(ours_generate, raw_generate, args.repeat)
    generated = raw_response["usage"]["completion_tokens"]
    ours_generated = llm.calls[-1].completion_tokens
    short_prefill_s = best_seconds(lambda: (raw.reset(), raw.eval(raw.tokenize(short.encode()))), args.repeat)[0]

    schema = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40},
                                               "year": {"type": "integer"},
                                               "genres": {"type": "array", "items": {"type": "string",
                                                                                     "maxLength": 12},
                                                          "maxItems": 3}},
              "required": ["title", "year", "genres"]}
    bounded = bounded_json_grammar(schema, 96)
    json_prompt = llm.json_prompt("Describe the 1935 film Top Hat as JSON with its title, year and genres.")
    json_tokens = engine.tokenize(json_prompt)

    def ours_constrained() -> tuple[str, int]:
        engine.llama.reset()
        return engine.constrained(json_tokens, bounded.grammar, max_tokens=bounded.max_tokens)

    def raw_constrained() -> dict:  # same Llama object, so the prompt's numbers are identical
        engine.llama.reset()
        return engine.llama.create_completion(json_prompt, max_tokens=bounded.max_tokens, temperature=0.0,
                                     grammar=LlamaGrammar.from_string(bounded.grammar, verbose=False))

    (ours_json_s, (ours_json, ours_json_tokens)), (raw_json_s, raw_json) = paired(ours_constrained, raw_constrained,
                                                                                   args.repeat)

    options = [f"relation_{i}" for i in range(10)]
    score_s, _ = best_seconds(lambda: llm.score_options("Question: who directed Top Hat?", options, step="bench"),
                              args.repeat)

    def rate(tokens: int, seconds: float) -> float:
        return round(tokens / seconds, 1) if seconds > 0 else float("nan")

    report = {
        "model": llm.model_name,
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                    "threads": raw.n_threads, "load_average": os.getloadavg()},
        "load_seconds": round(load_seconds, 2),
        "prefill": {"tokens": len(prompt_tokens), "ours_tokens_per_s": rate(len(prompt_tokens), ours_prefill_s),
                    "llama_cpp_batch512_tokens_per_s": rate(len(prompt_tokens), raw_prefill_s),
                    "ratio": round(raw_prefill_s / ours_prefill_s, 3)},
        "decode": {"tokens": generated, "prompt_tokens": short_tokens,
                   "llama_cpp_tokens_per_s": rate(generated, raw_gen_s - short_prefill_s),
                   "ours_tokens_per_s": rate(ours_generated, ours_gen_s - short_prefill_s),
                   "wrapper_overhead_ratio": round(ours_gen_s / raw_gen_s, 3)},
        "constrained_json": {"tokens": ours_json_tokens, "same_text": ours_json == raw_json["choices"][0]["text"],
                             "ours_seconds": round(ours_json_s, 3), "llama_cpp_grammar_seconds": round(raw_json_s, 3),
                             "ours_tokens_per_s": rate(ours_json_tokens, ours_json_s),
                             "llama_cpp_grammar_tokens_per_s": rate(raw_json["usage"]["completion_tokens"],
                                                                    raw_json_s),
                             "speedup": round(raw_json_s / ours_json_s, 2)},
        "score_options_10": {"calls_per_s": round(1 / score_s, 2)},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
