"""``firstfault mcp``: the verdicts as tools an LLM agent can call, over the Model Context Protocol.

Three read-only tools (:mod:`firstfault.mcp.tools`): ``analyze`` (a bundle's path -> the verdict
JSON), ``explain_event`` (one event of that verdict, its role in the causal chain and why, with
the links up to the root) and ``list_incidents`` (the fleet's incident store, filtered). The
server (:mod:`firstfault.mcp.server`) speaks stdio, so the agent's host starts it as a child
process and nothing listens on a port.

Why the same path policy as ``firstfault serve`` (:mod:`firstfault.pathpolicy`): the agent
names paths and the server reads them with its own rights; an agent talked into asking for
``/etc/shadow`` or a symbolic link out of the allowed root gets the same refusal the HTTP
service gives. Nothing here writes a file or runs anything but the pipeline.
"""
