"""`llmkube benchmark`: what an OpenAI-compatible endpoint delivers under concurrent load.

Pure modules decide and compute: `prompts` (the requests: synthetic prompts of a token count, or a
file of prompts), `sse` (reading a streamed answer), `stats` (each request's record and each
level's figures: requests/s, output tokens/s, TTFT, time per output token, errors by kind) and
`report` (the table rows, the JSON document, the comparison of two runs). `loadgen` sends the
requests (asyncio + aiohttp, a closed loop of N workers per level); `plot` draws the PNG
(matplotlib, the optional `plot` extra); `command` joins them to the command line.
"""
