"""Where live verdicts go besides the terminal: a JSON-lines file and a webhook.

Both are plain (the standard library's ``json`` and ``urllib``): an operator's alerting already
takes JSON over HTTP, and a watcher should not need more than the product to send it. A sink never
stops the watch: a webhook that fails is reported once per failure on stderr and skipped.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from firstfault.live.watch import Update


@dataclass
class JsonlSink:
    """Appends one line per update (the verdict's v1 JSON plus ``observed_at`` and ``live``)."""

    path: Path

    def __call__(self, up: Update) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(up.to_dict(), separators=(",", ":")) + "\n")


@dataclass
class WebhookSink:
    """POSTs each update as JSON to ``url``."""

    url: str
    timeout_s: float = 5.0

    def __call__(self, up: Update) -> None:
        body = json.dumps(up.to_dict()).encode("utf-8")
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # the operator's own URL
                resp.read()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            print(f"firstfault watch: webhook {self.url} failed ({exc}); continuing", file=sys.stderr)
