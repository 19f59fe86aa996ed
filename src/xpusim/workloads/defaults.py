"""The request shape a command assumes when none is given, one for every command: `run`,
`serve`, `sweep`, the API and the web page answer the same question unless told otherwise
(they once disagreed: run 128 prompt tokens, serve 1,024). 128 in and 128 out is the shape of
the published single-stream decode figures (gpt-fast, TensorRT-LLM's batch-1 tables) that
most comparisons start from; give --prompt and --gen for any other."""

PROMPT_TOKENS = 128
GEN_TOKENS = 128
