"""``firstfault serve``: the pipeline behind an HTTP API, beside it like the fleet tools.

A bundle goes in (an upload, or a path under an allowed root), a job id comes back, the verdict
follows. The queue and the verdicts are durable (SQLite in WAL mode), so a server killed with
SIGKILL mid-analysis loses nothing: the next one re-queues what was running. The analysis itself
is ``firstfault.pipeline.analyze`` in a worker process, so one bundle that crashes its process
does not take the server down. Nothing here reimplements a stage.
"""
