#!/usr/bin/env python3
"""Parsing and statistics for bench/compare.sh (stdlib only).

Subcommands:
  scrape PORT                 print nginx stub_status "accepts requests" (this scrape counts itself)
  record --raw FILE ...       parse one run's outputs, append one JSON line to FILE, print a summary line
  median --raw FILE CASE TOOL FIELD
                              print the median of FIELD over the runs of CASE/TOOL (empty if none)
  report --raw FILE --machine FILE --outdir DIR
                              print the comparison tables; write summary.tsv, summary.json, runs.tsv
"""
import signal

signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C: die quietly by the signal, so compare.sh stops too

import argparse  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

CASES = {  # {c}: CONNS
    "closed": "closed loop, keep-alive, {c} connections",
    "open": "open loop, fixed request rate, keep-alive pool of {c}",
    "conn": "a new connection per request (Connection: close; wrk: closed loop over {c})",
}
# stampede-closed: stampede's closed loop (--model concurrency) in the new-connection case, the same loop
# as wrk's, beside its open connections model; it tells the loop's cost from the connection handling's.
# wrk-1conn: wrk's closed loop on a single connection, where both sides sleep between connections as they
# do under an open loop at half the server's rate; the same per-connection wake-ups, at wrk's own rate.
TOOLS = ["stampede", "stampede-closed", "wrk", "wrk-1conn", "oha", "httperf"]
STAMPEDES = ["stampede", "stampede-closed"]


# ---------------------------------------------------------------- nginx

def scrape(port):
    """One GET /nginx_status; returns (accepts, requests). The request itself is counted in both."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/nginx_status", headers={"Connection": "close"})
        resp = conn.getresponse()
        body = resp.read().decode()
    except OSError as e:
        raise SystemExit(f"compare.py: nginx_status on 127.0.0.1:{port}: {e}")
    finally:
        conn.close()
    if resp.status != 200:
        raise SystemExit(f"compare.py: nginx_status on port {port} answered {resp.status}")
    # Active connections: 1 \n server accepts handled requests\n 1 1 1 \n Reading: ...
    m = re.search(r"accepts handled requests\s+(\d+)\s+(\d+)\s+(\d+)", body)
    if not m:
        raise SystemExit(f"compare.py: unexpected nginx_status body: {body!r}")
    return int(m.group(1)), int(m.group(3))


# ---------------------------------------------------------------- tool outputs

WRK_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def wrk_ms(text):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m|h)", text)
    return float(m.group(1)) * WRK_UNITS[m.group(2)] if m else None


def parse_wrk(out):
    r = {}
    for pct, key in (("50", "p50_ms"), ("99", "p99_ms")):
        m = re.search(rf"^\s+{pct}%\s+(\S+)\s*$", out, re.M)
        if m:
            r[key] = wrk_ms(m.group(1))
    m = re.search(r"(\d+) requests in ([0-9.]+)(us|ms|s|m|h)", out)
    if m:
        r["tool_requests"] = int(m.group(1))
        r["tool_duration_s"] = float(m.group(2)) * WRK_UNITS[m.group(3)] / 1e3
    errors = 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errors += sum(int(g) for g in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        errors += int(m.group(1))
    r["errors"] = errors
    return r


def parse_oha(path):
    with open(path) as f:
        d = json.load(f)
    s = d.get("summary", {})
    lp = d.get("latencyPercentiles", {})
    r = {}
    if s.get("total") is not None:
        r["tool_duration_s"] = float(s["total"])
    if lp.get("p50") is not None:
        r["p50_ms"] = float(lp["p50"]) * 1e3
    if lp.get("p99") is not None:
        r["p99_ms"] = float(lp["p99"]) * 1e3
    codes = {str(k): int(v) for k, v in (d.get("statusCodeDistribution") or {}).items()}
    errs = {str(k): int(v) for k, v in (d.get("errorDistribution") or {}).items()}
    r["tool_requests"] = sum(codes.values())
    # Requests still in flight at the deadline are reported as an error kind, not a failure.
    r["errors"] = sum(v for k, v in codes.items() if not k.startswith(("2", "3"))) + sum(
        v for k, v in errs.items() if "deadline" not in k.lower())
    r["aborted_at_deadline"] = sum(v for k, v in errs.items() if "deadline" in k.lower())
    return r


def parse_stampede(path):
    with open(path) as f:
        d = json.load(f)
    if d.get("schema") not in ("stampede.run/3", "stampede.run/2"):
        raise SystemExit(f"compare.py: {path}: unknown schema {d.get('schema')!r}")
    steps = d.get("steps") or []
    if not steps:
        return {"errors": None}
    s = steps[0]
    lat = s.get("latency_ms", {})
    errors = sum((s.get("errors") or {}).values())
    status = s.get("status") or {}
    errors += sum(v for k, v in status.items() if k[0] in "145")
    return {
        "p50_ms": lat.get("p50"),
        "p99_ms": lat.get("p99"),
        "tool_requests": s.get("requests"),
        "tool_duration_s": s.get("duration_s"),
        "errors": errors,
        "trust": s.get("trust"),
        "gen_cpu_pct": (s.get("generator") or {}).get("cpu_pct"),
        "lag_p99_ms": (s.get("generator") or {}).get("lag_p99_ms"),
        "unsent": s.get("unsent"),
        "reasons": s.get("reasons"),
    }


def parse_httperf(out):
    r = {}
    m = re.search(r"Total: connections (\d+) requests (\d+) replies (\d+) test-duration ([0-9.]+) s", out)
    if m:
        r["tool_requests"] = int(m.group(2))
        r["tool_duration_s"] = float(m.group(4))
    m = re.search(r"Connection time \[ms\]: min \S+ avg \S+ max \S+ median ([0-9.]+)", out)
    if m:  # connect to close, 1 ms histogram bins: with one call per connection, a coarse median latency
        r["conn_time_median_ms"] = float(m.group(1))
    m = re.search(r"Reply time \[ms\]: response ([0-9.]+)", out)
    if m:
        r["mean_ms"] = float(m.group(1))
    m = re.search(r"Errors: total (\d+)", out)
    if m:
        r["errors"] = int(m.group(1))
    m = re.search(r"Reply status: 1xx=(\d+) 2xx=(\d+) 3xx=(\d+) 4xx=(\d+) 5xx=(\d+)", out)
    if m:
        r["errors"] = r.get("errors", 0) + int(m.group(4)) + int(m.group(5))
    return r


def parse_time(path):
    """Last line of `/usr/bin/time -f '%e %U %S %M'` (a 'Command exited…' line may precede it)."""
    with open(path) as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip()]
    for ln in reversed(lines):
        parts = ln.split()
        if len(parts) == 4:
            try:
                e, u, s, m = (float(p) for p in parts)
            except ValueError:
                continue
            return {"wall_s": e, "user_s": u, "sys_s": s, "maxrss_kib": int(m)}
    return {}


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def cmd_record(a):
    rec = {"case": a.case, "tool": a.tool, "rep": a.rep, "position": a.position, "rc": a.rc,
           "target_rate": a.target_rate, "cmd": a.cmd}
    rec.update(parse_time(a.time_file) if a.time_file else {})
    out = read(a.stdout)
    try:
        if a.tool.startswith("wrk"):
            rec.update(parse_wrk(out))
        elif a.tool == "oha":
            rec.update(parse_oha(a.json))
        elif a.tool in STAMPEDES:
            rec.update(parse_stampede(a.json))
        elif a.tool == "httperf":
            rec.update(parse_httperf(out))
    except (OSError, ValueError, KeyError) as e:
        rec["parse_error"] = f"{type(e).__name__}: {e}"
    b_acc, b_req = (int(x) for x in a.before.split())
    e_acc, e_req = (int(x) for x in a.after.split())
    # The closing scrape is counted in `after` (its own request and connection); the opening one is in `before`.
    rec["nginx_requests"] = e_req - b_req - 1
    rec["nginx_connections"] = e_acc - b_acc - 1
    dur = rec.get("tool_duration_s") or rec.get("wall_s")
    rec["duration_s"] = dur
    rec["duration_source"] = "tool" if rec.get("tool_duration_s") else "wall"
    rec["req_s"] = rec["nginx_requests"] / dur if dur else None
    rec["conn_s"] = rec["nginx_connections"] / dur if dur else None
    cpu = (rec["user_s"] + rec["sys_s"]) if "user_s" in rec else None
    rec["cpu_s"] = cpu
    rec["req_per_cpu_s"] = rec["nginx_requests"] / cpu if cpu else None
    with open(a.raw, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")
    print(f"    {a.case:6} rep {a.rep} {a.tool:8} rc={a.rc} nginx={rec['nginx_requests']} "
          f"req/s={fmt(rec['req_s'])} p50={fmt(rec.get('p50_ms'), 3)} p99={fmt(rec.get('p99_ms'), 3)} "
          f"cpu={fmt(cpu, 2)}s req/cpu-s={fmt(rec['req_per_cpu_s'])} rss={rec.get('maxrss_kib', '-')}KiB "
          f"errors={rec.get('errors', '-')}", file=sys.stderr)


# ---------------------------------------------------------------- statistics and report

def load(raw):
    with open(raw) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def values(runs, case, tool, field):
    return [r[field] for r in runs
            if r["case"] == case and r["tool"] == tool and isinstance(r.get(field), (int, float))
            and not (isinstance(r.get(field), float) and math.isnan(r[field]))]


def cmd_median(a):
    v = values(load(a.raw) if os.path.exists(a.raw) else [], a.case, a.tool, a.field)
    if v:
        print(f"{statistics.median(v):.3f}")


def fmt(v, digits=None):
    if v is None:
        return "-"
    if digits is None:
        digits = 0 if abs(v) >= 100 else (1 if abs(v) >= 10 else 2)
    return f"{v:.{digits}f}"


def spread(v, digits=None):
    """'median (min-max)' or '-'."""
    if not v:
        return "-"
    med = statistics.median(v)
    if len(v) == 1:
        return fmt(med, digits)
    return f"{fmt(med, digits)} ({fmt(min(v), digits)}-{fmt(max(v), digits)})"


COLUMNS = [  # (field, header, digits)
    ("req_s", "req/s", 0),
    ("p50_ms", "p50 ms", 3),
    ("p99_ms", "p99 ms", 3),
    ("cpu_s", "CPU s", 2),
    ("req_per_cpu_s", "req/CPU-s", 0),
    ("maxrss_mib", "RSS MiB", 1),
    ("errors", "errors", 0),
]


def ratios(runs, case, tools, st, p, summary):
    """The stampede variant st's req/CPU-s over each other tool's: ratio of medians, and the range of
    same-rep ratios."""
    s_by_rep = {r["rep"]: r["req_per_cpu_s"] for r in runs
                if r["case"] == case and r["tool"] == st and r.get("req_per_cpu_s")}
    for t in tools:
        if t in STAMPEDES or not s_by_rep:
            continue
        o_by_rep = {r["rep"]: r["req_per_cpu_s"] for r in runs
                    if r["case"] == case and r["tool"] == t and r.get("req_per_cpu_s")}
        if not o_by_rep:
            continue
        ratio = statistics.median(s_by_rep.values()) / statistics.median(o_by_rep.values())
        paired = [s_by_rep[k] / o_by_rep[k] for k in s_by_rep if k in o_by_rep]
        rng = f" (same-rep ratios {min(paired):.2f}-{max(paired):.2f})" if len(paired) > 1 else ""
        p(f"  {st} / {t} on req/CPU-s: {ratio:.2f}{rng}")
        summary.append({"case": case, "ratio": f"{st}/{t}", "req_per_cpu_s_ratio_of_medians": ratio,
                        "same_rep_ratios": paired})


def cmd_report(a):
    runs = load(a.raw)
    for r in runs:
        if isinstance(r.get("maxrss_kib"), (int, float)):
            r["maxrss_mib"] = r["maxrss_kib"] / 1024
    machine = {}  # machine.tsv: one "key<TAB>value" per line, in order
    if a.machine and os.path.exists(a.machine):
        with open(a.machine) as f:
            for ln in f:
                k, _, v = ln.rstrip("\n").partition("\t")
                if k:
                    machine[k] = v
    out = []
    p = out.append
    if machine:
        p("Machine")
        for k, v in machine.items():
            p(f"  {k:18} {v}")
        p("")
    summary = []
    for case in CASES:
        tools = [t for t in TOOLS if any(r["case"] == case and r["tool"] == t for r in runs)]
        if not tools:
            continue
        reps = max(r["rep"] for r in runs if r["case"] == case)
        rates = sorted({r["target_rate"] for r in runs if r["case"] == case and r.get("target_rate")})
        title = CASES[case].format(c=a.conns)
        if rates:
            title += f" (target {', '.join(f'{x:g}' for x in rates)}/s for the open-loop tools)"
        p(f"== {case}: {title}; {reps} rep(s); median (min-max) ==")
        rows = [["tool"] + [h for _, h, _ in COLUMNS]]
        for t in tools:
            row = [t]
            entry = {"case": case, "tool": t, "runs": len([r for r in runs if r["case"] == case and r["tool"] == t])}
            for field, _, digits in COLUMNS:
                v = values(runs, case, t, field)
                row.append(spread(v, digits))
                if v:
                    entry[field] = {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}
            rows.append(row)
            summary.append(entry)
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            p("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        # stampede's req/CPU-s over each other tool's: ratio of medians, and the range of same-rep ratios.
        for st in STAMPEDES:
            ratios(runs, case, tools, st, p, summary)
        h = [r for r in runs if r["case"] == case and r["tool"] == "httperf"]
        if h:
            p(f"  httperf has no percentiles: median connection time (connect to close, 1 ms bins) "
              f"{spread(values(h, case, 'httperf', 'conn_time_median_ms'), 1)} ms, "
              f"mean reply time {spread(values(h, case, 'httperf', 'mean_ms'), 1)} ms")
        # Sanity: the tool's own count against nginx's, and tools that failed.
        for r in runs:
            if r["case"] != case:
                continue
            notes = []
            tr, nr = r.get("tool_requests"), r.get("nginx_requests")
            if isinstance(tr, int) and isinstance(nr, int) and abs(tr - nr) > max(100, 0.02 * max(nr, 1)):
                notes.append(f"tool counted {tr}, nginx {nr}")
            if r.get("wall_s") and r.get("duration_s") and r["wall_s"] > r["duration_s"] + 2:
                notes.append(f"ran {r['wall_s']:.1f} s for a {r['duration_s']:g} s run (req/s is over the latter)")
            if r.get("rc") not in (0, None):
                notes.append(f"exit code {r['rc']}")
            if r.get("parse_error"):
                notes.append(f"output not parsed: {r['parse_error']}")
            if r.get("errors"):
                notes.append(f"{r['errors']} errors")
            if r.get("trust") not in (None, "valid"):
                notes.append(f"stampede trust {r['trust']}: {'; '.join(r.get('reasons') or [])}")
            if notes:
                p(f"  note: rep {r['rep']} {r['tool']}: {', '.join(notes)}")
        p("")
    text = "\n".join(out)
    print(text)
    os.makedirs(a.outdir, exist_ok=True)
    with open(os.path.join(a.outdir, "summary.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(a.outdir, "summary.json"), "w") as f:
        json.dump({"machine": machine, "summary": summary}, f, indent=1, sort_keys=True)
    fields = ["case", "rep", "position", "tool", "target_rate", "rc", "nginx_requests", "nginx_connections",
              "duration_s", "duration_source", "wall_s", "req_s", "conn_s", "p50_ms", "p99_ms", "mean_ms",
              "conn_time_median_ms", "aborted_at_deadline",
              "user_s", "sys_s", "cpu_s", "req_per_cpu_s", "maxrss_kib", "tool_requests", "errors", "trust",
              "gen_cpu_pct", "lag_p99_ms", "cmd"]
    with open(os.path.join(a.outdir, "runs.tsv"), "w") as f:
        f.write("\t".join(fields) + "\n")
        for r in runs:
            f.write("\t".join("" if r.get(k) is None else
                              (f"{r[k]:.6g}" if isinstance(r[k], float) else str(r[k])) for k in fields) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="sub", required=True)
    s = sub.add_parser("scrape")
    s.add_argument("port", type=int)
    r = sub.add_parser("record")
    r.add_argument("--raw", required=True)
    r.add_argument("--case", required=True, choices=list(CASES))
    r.add_argument("--tool", required=True, choices=TOOLS)
    r.add_argument("--rep", type=int, required=True)
    r.add_argument("--position", type=int, default=0)
    r.add_argument("--rc", type=int, default=0)
    r.add_argument("--target-rate", type=float, default=None)
    r.add_argument("--cmd", default="")
    r.add_argument("--stdout")
    r.add_argument("--json")
    r.add_argument("--time-file")
    r.add_argument("--before", required=True, help="'accepts requests' before the run")
    r.add_argument("--after", required=True, help="'accepts requests' after the run")
    m = sub.add_parser("median")
    m.add_argument("--raw", required=True)
    m.add_argument("case")
    m.add_argument("tool")
    m.add_argument("field")
    p = sub.add_parser("report")
    p.add_argument("--raw", required=True)
    p.add_argument("--machine")
    p.add_argument("--outdir", required=True)
    p.add_argument("--conns", type=int, default=50)
    a = ap.parse_args()
    if a.sub == "scrape":
        acc, req = scrape(a.port)
        print(acc, req)
    elif a.sub == "record":
        cmd_record(a)
    elif a.sub == "median":
        cmd_median(a)
    else:
        cmd_report(a)


if __name__ == "__main__":
    main()
