"""ktrial.report: what people and CI read after a run.

* :func:`render_report` — report.html with plots (verdict first, anomalies explained).
* :func:`write_junit` — junit.xml, one testcase per anomaly check.
* :class:`LiveView` — the progress view while a run is going;
  :class:`UnseenCounter` — its `unseen_fn`, tailing history.jsonl.
"""

from .html import render_report, verdict_of
from .junit import write_junit
from .live import LiveView
from .unseen import UnseenCounter

__all__ = ["LiveView", "UnseenCounter", "render_report", "verdict_of", "write_junit"]
