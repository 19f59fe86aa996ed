"""LLM inference: one batch of requests on a system, prefill then decode.

Read in this order; each module imports only those above it:

- `request.py`   the user's question as a plain value (shapes, formats, decoding)
- `graphs.py`    the graphs one tensor/expert-parallel rank runs, for many requests at once
- `engine.py`    per-op cost of those graphs on many configurations at once (batching)
- `timeline.py`  phases, pipeline stages and steps: costs into TTFT, TPOT, energy
- `plans.py`     a job's plans as candidates (memory, worth costing, ranked), the search
- `inference.py` `simulate` and `simulate_many`: options into jobs, each costed group
                 (engine, then timeline) into results

`reference.py` states the same model as plain loops for one chip (the specification);
tests/test_reference.py holds the engine equal to it on random configurations.

Every memo on this path lives in the call's scope (xpusim/memo.py), none in the process.
"""
