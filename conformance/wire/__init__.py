"""The wire and the drivers: how the harness reaches a target.

`target.py` holds the server under test and its two clients (the official SDK and raw httpx),
`sse.py` parses what comes over the wire, `accumulate.py` rebuilds a Message from its events as
the SDK does, `drivers.py` sends the requests properties need, `tsdriver.py` the official
TypeScript SDK (`ts/`); `launcher.py` starts a reference server, `loopback.py` the servers a
target must reach out to (a web page, an MCP server).
"""
