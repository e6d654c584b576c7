"""Test oracles and samples, kept out of the product's core.

- gen.py: a model of a correct Kafka log that writes valid histories of any shape
  (with its ground truth), for property tests, golden results and benchmarks;
- mutate.py: fault injectors that put exactly one anomaly into such a history;
- sample.py: a small saved run (history, test.json, results) for report tests.

Nothing under ktrial's product packages imports this package.
"""
