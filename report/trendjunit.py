"""junit XML of a trend (`ktrial runs --trend NAME --junit FILE`).

One suite ``ktrial.trend.<test>`` with the test's key and the newest run as properties,
and one testcase per figure the trend shows (class ``ktrial.trend.<test>``, name the
figure: ``e2e_p99``, ``anomaly.lost-write``): a ``<failure>`` when the figure regressed,
``<skipped>`` when it could not be judged (not enough history, missing in the newest
run), a pass saying how it was judged otherwise. Texts go through report/junit.py's
``xml_safe`` like a run's junit.xml.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from ..histories.store import write_bytes_atomic
from .figures import label
from .junit import MAX_ATTR, xml_safe
from .trend import MISSING, REGRESSION, SHORT, Trend, describe, fmt, shown


def _name_part(x: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in x).strip("_") or "unnamed"


def build_trend_junit(trend: Trend) -> ET.Element:
    """junit XML of a trend: one testcase per figure, a failure per regression, skipped
    when a figure could not be judged."""
    test = _name_part(trend.key.name)
    cls = f"ktrial.trend.{test}"
    suites = ET.Element("testsuites", name="ktrial")
    suite = ET.SubElement(suites, "testsuite", name=cls)
    props = ET.SubElement(suite, "properties")
    for k, v in [
        *((f"test.{k}", shown(v)) for k, v in trend.key.to_json().items()),
        ("newest", str(trend.newest.path)),
        ("newest.seed", shown(trend.newest.figures.seed)),
        ("last", str(trend.last)),
        ("tolerance", str(trend.tolerances.default)),
    ]:
        ET.SubElement(props, "property", name=k, value=v)
    for j in trend.judgements:
        case = ET.SubElement(suite, "testcase", classname=cls, name=j.figure, time="0")
        text = describe(j)
        if j.status == REGRESSION:
            values = ", ".join(fmt(j.figure, v) for v in trend.values(j.figure))
            ET.SubElement(
                case, "failure", type="regression", message=f"{label(j.figure)}: {text}"
            ).text = f"{text}\nRuns, oldest first: {values}\nNewest run: {trend.newest.path}"
        elif j.status in (SHORT, MISSING):
            ET.SubElement(case, "skipped", message=text)
        else:
            ET.SubElement(case, "system-out").text = text
    cases = suite.findall("testcase")
    for el in (suites, suite):
        el.set("tests", str(len(cases)))
        el.set("failures", str(sum(c.find("failure") is not None for c in cases)))
        el.set("errors", "0")
        el.set("skipped", str(sum(c.find("skipped") is not None for c in cases)))
    for el in suites.iter():
        for k, v in list(el.attrib.items()):
            el.set(k, xml_safe(v, MAX_ATTR))
        if el.text:
            el.text = xml_safe(el.text)
    ET.indent(suites)
    return suites


def write_trend_junit(trend: Trend, path: str | os.PathLike[str]) -> None:
    """Write the trend's junit XML to `path` (atomically; /dev/stdout works too)."""
    root = build_trend_junit(trend)
    write_bytes_atomic(path, ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")
