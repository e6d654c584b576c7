"""ktrial.report: what people and CI read after a run.

* :func:`render_report` — report.html with plots (verdict first, anomalies explained).
* :func:`write_junit` — junit.xml, one testcase per anomaly check.
* :class:`LiveView` — the progress view while a run is going;
  :class:`UnseenCounter` — its `unseen_fn`, tailing history.jsonl.

Names are imported on first use: matplotlib takes a while to import, and every
`ktrial` command (even `--help`) imports this package through the CLI.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "LiveView": ".live",
    "UnseenCounter": ".unseen",
    "render_report": ".html",
    "verdict_of": ".verdict",
    "write_junit": ".junit",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
