"""Apache Kafka across versions and transaction protocols (docs/systems.md "Apache Kafka"):
one short trial per tested line, through the run orchestration as `ktrial run` does it.

Each trial is the queue workload with transactions (some deliberately aborted) under
pause and partition faults for 20 s on a fresh 3-node cluster of that version, which is
fetched from Maven Central into the cache on first use (clusters/install.py). It must be
valid; test.json must name the version and the transaction protocol the brokers
reported; transactions must have committed and aborted; and the brokers must have
logged through ktrial's one SLF4J binding into server.log (no second binding, no
log4j 1 warnings) on 3.x as on 4.x.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from ktrial.nemesis import NemesisOptions
from ktrial.trial import Trial, TrialSpec

from .conftest import local_cluster_skip_reason

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# (version, --transaction-version, the level the brokers must report, their protocol)
CASES = [
    ("3.7.2", None, None, "v1"),  # no transaction.version feature at all
    ("3.9.2", None, 0, "v1"),  # the feature exists, level 0 only
    ("4.0.2", 2, 2, "v2"),
    ("4.1.1", 1, 1, "v1"),  # the default version, formatted for classic transactions
]


@pytest.mark.parametrize(("version", "asked", "level", "protocol"), CASES)
def test_a_short_transactional_trial_is_valid_on(
    version: str, asked: int | None, level: int | None, protocol: str, tmp_path: Path
) -> None:
    reason = local_cluster_skip_reason()
    if reason:
        pytest.skip(reason)
    spec = TrialSpec(
        name=f"kafka-{version}",
        store=str(tmp_path / "store"),
        seed=20261202,
        time_limit=20,
        kafka_version=version,
        transaction_version=asked,
        workload_opts={"txn": True, "abort_p": 0.15, "concurrency": 8},
        nemesis=NemesisOptions(faults=("pause", "partition"), interval=5.0),
        heal_wait=3.0,
        drain_timeout=45.0,
        check_every=0,
        live=False,
    )
    outcome = Trial(spec, say=lambda *_: None).execute()

    assert outcome.error is None, outcome.error
    assert outcome.results is not None and outcome.results["valid"] is True, outcome.results
    assert outcome.exit_code == 0
    assert outcome.counts.get("txn:ok", 0) >= 20, outcome.counts  # committed
    assert outcome.counts.get("txn:fail", 0) >= 1, outcome.counts  # aborted

    meta = orjson.loads(outcome.run_dir.test_json.read_bytes())
    cluster = meta["cluster"]
    assert cluster["broker_versions"] == [version]
    assert cluster["kafka_line"] == version[:3]
    assert cluster["transactions"] == {
        "transaction_version": level,
        "protocol": protocol,
        "requested": asked,
        "source": "broker",  # the brokers' own answer, not what ktrial asked for
    }
    assert meta["run"]["transaction_version"] == asked

    logs = outcome.run_dir.path / "logs"
    for node in ("n1", "n2", "n3"):
        server = (logs / f"{node}-server.log").read_text()
        assert "Kafka Server started" in server, server[-2000:]
        assert server.startswith("[20"), server[:200]  # ktrial's log4j2 pattern
        stdout = (logs / f"{node}-stdout.log").read_text()
        assert "multiple SLF4J bindings" not in stdout, stdout[:2000]
        assert "log4j:WARN" not in stdout, stdout[:2000]
