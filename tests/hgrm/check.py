"""Checks a stampede results directory's .hgrm files against HdrHistogram readers we did not write.

    python check.py RESULTS_DIR [--java required|optional]

Run with a Python that has `hdrhistogram==0.10.8` (PyPI). For every hlog/step-NNN.hlog:

1. The Python package decodes the hlog (untagged lines: the fleet's merge; Tag= lines: one agent
   each). Every interval line must decode, and the agents' sum must equal the fleet's, bucket for
   bucket.
2. From that histogram, the rows of HdrHistogram's Java `outputPercentileDistribution(out, 5, 1000.0)`
   (its PercentileIterator: a fixed tick per half distance to 100 %) and its footer (the package's
   own mean, standard deviation, max, count, buckets) are printed in Java's format and must equal
   step-NNN.hgrm byte for byte, except a number that is a tie at its printed places, which Java
   rounds half up on its shortest decimal and C-style printf does not: such a line must equal ours
   once rounded Java's way, and is counted as explained.
3. The package's own printer (`output_percentile_distribution`) is compared too. It differs from
   Java's by design, in three known ways, which are reported, not failed: its percentile ticks follow
   a continuous schedule (it does not truncate log2 as Java does), it prints StdDeviation unscaled
   (microseconds), and it writes `TotalCount = N.000`. Its header, its first and last rows and its
   Buckets line must still equal ours, and its Max too.
4. HdrHistogram's own Java (`tests/hgrm/Hgrm.java` over the jar, from $STAMPEDE_HGRM_JAR or Debian's
   libhdrhistogram-java) prints the .hgrm of the same hlog, which must equal ours byte for byte.
   With `--java required` a missing Java or jar fails the check.

A mix's hlog/step-NNN.NAME.hlog (one per named request, the fleet's merge per interval, no Tag=
lines) must decode line for line, and its values number what requests.tsv says the name served or
gave up in that step (ok + given_up).

Exits 0 when everything agrees, 1 on the first disagreement (said in words), 2 on bad usage.
"""
import argparse
import csv
import io
import math
import os
import shutil
import subprocess
import sys
from decimal import ROUND_HALF_UP, Decimal

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_JAR = "/usr/share/java/hdrhistogram.jar"
US_PER_MS = 1000.0
TICKS_PER_HALF_DISTANCE = 5


class Disagreement(Exception):
    pass


def fresh(like):
    return HdrHistogram(like.lowest_trackable_value, like.highest_trackable_value,
                        like.significant_figures)


def summed(acc, h):
    if acc is None:
        acc = fresh(h)
    acc.add(h)
    return acc


def read_hlog(path):
    """(fleet, {agent: histogram}, interval lines) as the Python package decodes the hlog."""
    reader = HistogramLogReader(path, None)
    fleet, agents, decoded = None, {}, 0
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        decoded += 1
        tag = h.get_tag()
        if tag is None:
            fleet = summed(fleet, h)
        else:
            agents[tag] = summed(agents.get(tag), h)
    with open(path, encoding="utf-8") as f:
        lines = [l for l in f if l.strip() and not l.startswith("#")
                 and not l.startswith('"StartTimestamp"')]
    # The package's reader returns None on a line it cannot read, which would end the log early.
    if decoded != len(lines):
        raise Disagreement("%s: the Python reader decoded %d of %d interval lines"
                           % (path, decoded, len(lines)))
    return fleet, agents


def check_agents_sum_to_fleet(path, fleet, agents):
    if not agents:
        return
    total = None
    for h in agents.values():
        total = summed(total, h)
    if fleet is None or list(total.counts) != list(fleet.counts) \
            or total.get_total_count() != fleet.get_total_count():
        raise Disagreement("%s: the Tag= lines (%s) do not add up to the untagged ones"
                           % (path, ", ".join(sorted(agents))))


def java_rows(h):
    """(value, level, count) as Java's PercentileIterator steps, over the package's buckets."""
    total = h.get_total_count()
    rows = []
    if total == 0:
        return rows
    level, last = 0.0, 0
    for item in h.get_recorded_iterator():
        below = item.total_count_to_this_value
        last = item.value_iterated_to
        while (100.0 * below) / total >= level:
            rows.append((last, level, below))
            if below == total:
                break
            # Java: (long) (Math.log(100.0 / (100.0 - level)) / Math.log(2)), truncated.
            halvings = int(math.log(100.0 / (100.0 - level)) / math.log(2))
            level += 100.0 / (TICKS_PER_HALF_DISTANCE * 2 ** (halvings + 1))
    rows.append((last, 100.0, total))
    return rows


def c_fixed(x, places):
    return "%.*f" % (places, x)


def java_fixed(x, places):
    """Java's %.Nf: the shortest decimal (repr) rounded half up."""
    q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return "%s" % q


def java_text(h, fixed):
    """The .hgrm of `h` in Java's format, numbers printed by `fixed`."""
    digits = h.significant_figures
    out = ["%12s %14s %10s %14s\n\n" % ("Value", "Percentile", "TotalCount", "1/(1-Percentile)")]
    for value, level, count in java_rows(h):
        line = "%12s %2s %10d" % (fixed(value / US_PER_MS, digits), fixed(level / 100.0, 12), count)
        if level != 100.0:
            line += " %14s" % fixed(1 / (1.0 - level / 100.0), 2)
        out.append(line + "\n")
    # The package's mean and standard deviation (in microseconds), scaled as Java scales them.
    out.append("#[Mean    = %12s, StdDeviation   = %12s]\n"
               % (fixed(h.get_mean_value() / US_PER_MS, digits),
                  fixed(h.get_stddev() / US_PER_MS, digits)))
    out.append("#[Max     = %12s, Total count    = %12d]\n"
               % (fixed(h.get_max_value() / US_PER_MS, digits), h.get_total_count()))
    out.append("#[Buckets = %12d, SubBuckets     = %12d]\n" % (h.bucket_count, h.sub_bucket_count))
    return "".join(out)


def check_rows(path, ours, h):
    """Step 2; returns the lines explained by Java's rounding."""
    c_lines = java_text(h, c_fixed).splitlines(keepends=True)
    j_lines = java_text(h, java_fixed).splitlines(keepends=True)
    our_lines = ours.splitlines(keepends=True)
    if len(our_lines) != len(c_lines):
        raise Disagreement("%s: %d lines, where Java's schedule over the Python decode gives %d"
                           % (path, len(our_lines), len(c_lines)))
    explained = []
    for n, (o, c, j) in enumerate(zip(our_lines, c_lines, j_lines), 1):
        if o == c:
            continue
        if o == j:
            explained.append((n, c.rstrip("\n"), o.rstrip("\n")))
            continue
        raise Disagreement("%s line %d: ours %r, from the Python decode %r" % (path, n, o, c))
    return explained


def check_python_printer(path, ours, h):
    """Step 3; returns the known differences seen, in words."""
    buf = io.BytesIO()
    h.output_percentile_distribution(buf, US_PER_MS, TICKS_PER_HALF_DISTANCE)
    theirs = buf.getvalue().decode().splitlines()
    mine = ours.splitlines()
    rows = lambda lines: [l for l in lines[2:] if l.strip() and not l.startswith("#[")]
    footer = lambda lines, key: next(l for l in lines if l.startswith(key))
    same = [("header", mine[0], theirs[0]),
            ("Buckets line", footer(mine, "#[Buckets"), footer(theirs, "#[Buckets"))]
    if rows(mine) or rows(theirs):
        same += [("first row", rows(mine)[0], rows(theirs)[0]),
                 ("last row", rows(mine)[-1], rows(theirs)[-1])]
    max_of = lambda line: line.split(",")[0]
    same.append(("Max", max_of(footer(mine, "#[Max")), max_of(footer(theirs, "#[Max"))))
    for what, a, b in same:
        if a != b:
            raise Disagreement("%s: the Python printer's %s is %r, ours %r" % (path, what, b, a))
    known = []
    if rows(mine) != rows(theirs):
        known.append("rows at its own percentile ticks (%d rows, ours %d)"
                     % (len(rows(theirs)), len(rows(mine))))
    if footer(mine, "#[Mean") != footer(theirs, "#[Mean"):
        known.append("StdDeviation unscaled: %s" % footer(theirs, "#[Mean").strip())
    if footer(mine, "#[Max") != footer(theirs, "#[Max"):
        known.append("count written as %s" % footer(theirs, "#[Max").split(",")[1].strip(" ]"))
    return known


def java_command(required):
    jar = os.environ.get("STAMPEDE_HGRM_JAR", DEFAULT_JAR)
    java = shutil.which("java")
    if java and os.path.isfile(jar):
        return [java, "-cp", jar, os.path.join(HERE, "Hgrm.java")]
    why = "no java on PATH" if not java else "no HdrHistogram jar at %s (apt-get install libhdrhistogram-java, or set STAMPEDE_HGRM_JAR)" % jar
    if required:
        raise Disagreement("HdrHistogram's Java is required: " + why)
    print("hgrm check: Java comparison skipped: " + why)
    return None


def check_java(java, hlog, ours):
    # A fleet that recorded nothing has an hlog of empty intervals; Java prints it like ours.
    run = subprocess.run(java + [hlog], capture_output=True)
    if run.returncode != 0:
        raise Disagreement("%s: HdrHistogram's Java failed: %s" % (hlog, run.stderr.decode().strip()))
    if run.stdout.decode() != ours:
        a, b = run.stdout.decode().splitlines(), ours.splitlines()
        n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        raise Disagreement("%s: HdrHistogram's Java prints line %d as %r, ours %r"
                           % (hlog, n + 1, a[n] if n < len(a) else None, b[n] if n < len(b) else None))


def check_name_hlogs(results, hlog_dir, names):
    """Each named request's .hlog against requests.tsv's row of its step and name."""
    rows = {}
    tsv = os.path.join(results, "requests.tsv")
    if os.path.isfile(tsv):
        with open(tsv, encoding="utf-8") as f:
            for r in csv.DictReader(f, delimiter="\t"):
                rows[(int(r["step"]), r["name"])] = int(r["ok"]) + int(r["given_up"])
    for name in names:
        hlog = os.path.join(hlog_dir, name)
        step, request = name[len("step-"):-len(".hlog")].split(".", 1)
        fleet, agents = read_hlog(hlog)
        if agents:
            raise Disagreement("%s: a named request's hlog has Tag= lines (%s)" % (hlog, ", ".join(agents)))
        count = fleet.get_total_count() if fleet is not None else 0
        want = rows.get((int(step), request))
        if want is None:
            raise Disagreement("%s: requests.tsv has no row for step %s, request %s" % (hlog, step, request))
        if count != want:
            raise Disagreement("%s: %d values, where requests.tsv says %d served or given up"
                               % (hlog, count, want))
        print("hgrm check: %s: %d values, as requests.tsv's ok + given_up" % (name, count))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("--java", choices=["required", "optional"], default="optional")
    args = parser.parse_args()
    hlog_dir = os.path.join(args.results, "hlog")
    found = sorted(f for f in os.listdir(hlog_dir) if f.startswith("step-") and f.endswith(".hlog")) \
        if os.path.isdir(hlog_dir) else []
    # step-NNN.hlog, the step's, has its .hgrm; step-NNN.NAME.hlog, a mix's request's, has a row.
    hlogs = [f for f in found if f.count(".") == 1]
    name_hlogs = [f for f in found if f.count(".") > 1]
    if not hlogs:
        print("hgrm check: no hlog/step-NNN.hlog in %s" % args.results)
        return 1
    try:
        java = java_command(args.java == "required")
        for name in hlogs:
            hlog = os.path.join(hlog_dir, name)
            hgrm = hlog[:-len(".hlog")] + ".hgrm"
            if not os.path.isfile(hgrm):
                raise Disagreement("%s has no %s beside it" % (hlog, os.path.basename(hgrm)))
            with open(hgrm, encoding="utf-8") as f:
                ours = f.read()
            fleet, agents = read_hlog(hlog)
            check_agents_sum_to_fleet(hlog, fleet, agents)
            h = fleet if fleet is not None else HdrHistogram(1, 3_600_000_000, 3)
            explained = check_rows(hgrm, ours, h)
            known = check_python_printer(hgrm, ours, h)
            if java:
                check_java(java, hlog, ours)
            print("hgrm check: %s: %d values, %d agents; Java's rows over the Python decode: equal%s; "
                  "the Python printer: %s; HdrHistogram's Java: %s"
                  % (os.path.basename(hgrm), h.get_total_count(), len(agents),
                     "" if not explained else " (%d lines only by Java's half-up rounding: %s)"
                     % (len(explained), "; ".join("line %d %r for %r" % e for e in explained)),
                     "; ".join(known) or "identical",
                     "identical" if java else "skipped"))
        check_name_hlogs(args.results, hlog_dir, name_hlogs)
    except Disagreement as e:
        print("hgrm check FAILED: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
