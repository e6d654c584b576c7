"""ktrial.checker: a pure analysis of a history -> results (docs/anomalies.md).

from ktrial.checker import CheckOptions, check, check_file
results = check_file("store/queue/latest/history.jsonl", CheckOptions(sub_via="assign"))
"""

from .check import check, check_file
from .options import CheckOptions, options_from_test_json

__all__ = ["CheckOptions", "check", "check_file", "options_from_test_json"]
