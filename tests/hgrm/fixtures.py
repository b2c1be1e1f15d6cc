"""Makes the .hgrm golden files of results/src/distribution.rs from readers we did not write.

Each case's histogram (stampede's shape: 1 us to 1 h, 3 significant digits) is recorded and logged
as an HdrHistogram interval log by the Python `hdrhistogram` package (NAME.hlog: two untagged
intervals, whose sum is the case, and one Tag= interval that must be left out); HdrHistogram's own
Java outputPercentileDistribution prints NAME.hgrm from that log (tests/hgrm/Hgrm.java), and the
Python package's own printer NAME.python.hgrm (a file another tool wrote, for the reader).

    /tmp/hgrm-venv/bin/python tests/hgrm/fixtures.py results/tests/golden/hgrm
"""
import io
import os
import random
import subprocess
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogWriter

JAR = os.environ.get("STAMPEDE_HGRM_JAR", "/usr/share/java/hdrhistogram.jar")
HERE = os.path.dirname(os.path.abspath(__file__))


def shape():
    return HdrHistogram(1, 3_600_000_000, 3)


def wide():
    """A long-tailed latency: most near 2 ms, a tail to seconds, a few at the hour's edge."""
    rng = random.Random(12)
    values = [int(rng.lognormvariate(7.6, 0.9)) + 1 for _ in range(20_000)]
    values += [int(rng.uniform(1e6, 5e6)) for _ in range(40)]
    values += [3_600_000_000] * 2
    return values


CASES = {
    # Two values whose mean, 1.0005 ms, is a tie at 3 decimals: Java rounds it half up (1.001).
    "tie": [1000, 1001],
    "single": [20_000],
    "empty": [],
    "wide": wide(),
}


def write_case(out_dir, name, values):
    halves = [values[0::2], values[1::2]]
    buf = io.StringIO()
    log = HistogramLogWriter(buf)
    log.output_comment("[%s: tests/hgrm/fixtures.py]" % name)
    log.output_legend()
    whole = shape()
    for i, part in enumerate(halves):
        h = shape()
        for v in part:
            h.record_value(v)
        whole.add(h)
        log.output_interval_histogram(h, i, i + 1, 1000.0)
    # Another agent's interval: a reader that sums the untagged lines leaves it out.
    other = shape()
    other.record_value(123_456)
    buf.write("Tag=other,")
    log.output_interval_histogram(other, 0, 1, 1000.0)
    hlog = os.path.join(out_dir, name + ".hlog")
    with open(hlog, "w") as f:
        f.write(buf.getvalue())
    java = subprocess.run(
        ["java", "-cp", JAR, os.path.join(HERE, "Hgrm.java"), hlog],
        check=True, capture_output=True)
    with open(os.path.join(out_dir, name + ".hgrm"), "wb") as f:
        f.write(java.stdout)
    py = io.BytesIO()
    whole.output_percentile_distribution(py, 1000.0)
    with open(os.path.join(out_dir, name + ".python.hgrm"), "wb") as f:
        f.write(py.getvalue())


def main():
    out_dir = sys.argv[1]
    for name, values in CASES.items():
        write_case(out_dir, name, values)


if __name__ == "__main__":
    main()
