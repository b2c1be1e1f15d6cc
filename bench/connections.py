#!/usr/bin/env python3
"""Parsing, statistics and tables for bench/connections.sh and bench/connections-tls.sh (stdlib only).

It reuses bench/compare.py's nginx scrape, tool parsers (stampede's run.json, oha's JSON, httperf's text,
GNU time) and number formatting; what is new here is per connection: syscalls, the CPU profile's shares,
the TLS resumption check, and the growth table and plot.

Subcommands:
  scrape PORT                 nginx stub_status "accepts requests" (this scrape counts itself)
  record --raw FILE ...       one measured run: a JSON line (nginx's counts, CPU from the OS, the tool's report)
  syscalls --raw FILE ...     one `strace -f -c -o FILE` run: calls per connection nginx accepted, by syscall
  perf --raw FILE ...         one `perf report --stdio --sort dso,sym` text: shares of kernel, crypto, TLS, rest
  reused --raw FILE ...       an nginx access log of "$ssl_session_reused $ssl_protocol $ssl_cipher $ssl_curve"
  report --outdir DIR         the comparison tables (summary.txt, runs.tsv)
  growth --outdir DIR         stampede alone at growing rates: the table and growth.svg
"""
import argparse
import collections
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (bench/compare.py: scrape, parse_*, fmt, spread)
from compare import fmt, spread  # noqa: E402

TOOLS = ["stampede", "oha", "httperf"]
TOOL_NOTES = {
    "httperf": "httperf reports no percentiles",
}


def load(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def append(path, rec):
    with open(path, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")


def nginx_delta(before, after):
    """(connections, requests) between two scrapes; the closing scrape counted itself once."""
    b_acc, b_req = (int(x) for x in before.split())
    e_acc, e_req = (int(x) for x in after.split())
    return e_acc - b_acc - 1, e_req - b_req - 1


# ---------------------------------------------------------------- record

def cmd_record(a):
    d = a.dir
    rec = {"block": a.block, "tool": a.tool, "rep": a.rep, "position": a.position, "rc": a.rc,
           "rate": a.rate, "calls": a.calls, "cmd": compare.read(os.path.join(d, "cmd")).strip()}
    rec.update(compare.parse_time(os.path.join(d, "time")))
    try:
        if a.tool == "stampede":
            path = os.path.join(d, "stampede", "run.json")
            rec.update(compare.parse_stampede(path))
            with open(path) as f:
                step = (json.load(f).get("steps") or [{}])[0]
            tls = step.get("tls") or {}
            rec["tls_full"], rec["tls_resumed"] = tls.get("full"), tls.get("resumed")
            rec["stampede_connections"] = step.get("connections")
        elif a.tool == "oha":
            rec.update(compare.parse_oha(os.path.join(d, "stdout")))
        elif a.tool == "httperf":
            rec.update(compare.parse_httperf(compare.read(os.path.join(d, "stdout"))))
    except (OSError, ValueError, KeyError, SystemExit) as e:
        rec["parse_error"] = f"{type(e).__name__}: {e}"
    conns, reqs = nginx_delta(a.before, a.after)
    rec["nginx_connections"], rec["nginx_requests"] = conns, reqs
    dur = rec.get("tool_duration_s") or rec.get("wall_s")
    rec["duration_s"] = dur
    rec["conn_s"] = conns / dur if dur else None
    rec["req_s"] = reqs / dur if dur else None
    cpu = rec["user_s"] + rec["sys_s"] if "user_s" in rec else None
    rec["cpu_s"] = cpu
    rec["conn_per_cpu_s"] = conns / cpu if cpu else None
    rec["us_per_conn"] = 1e6 * cpu / conns if cpu and conns > 0 else None
    rec["cpu_pct"] = 100 * cpu / dur if cpu is not None and dur else None
    append(a.raw, rec)
    print(f"    {a.block} rep {a.rep} {a.tool:8} rc={a.rc} conns={conns} reqs={reqs} conn/s={fmt(rec['conn_s'])} "
          f"p50={fmt(rec.get('p50_ms'), 3)} p99={fmt(rec.get('p99_ms'), 3)} cpu={fmt(cpu, 2)}s "
          f"conn/CPU-s={fmt(rec['conn_per_cpu_s'])} errors={rec.get('errors', '-')}"
          + (f" trust={rec['trust']}" if rec.get("trust") else ""), file=sys.stderr)


# ---------------------------------------------------------------- strace -c

def parse_strace(path):
    """`strace -c` summary: {syscall: calls}, total (errors are counted in the calls)."""
    calls, total = {}, None
    for ln in compare.read(path).splitlines():
        parts = ln.split()
        if len(parts) < 5 or not re.fullmatch(r"[0-9.]+", parts[0]):
            continue
        try:
            n = int(parts[3])
        except ValueError:
            continue
        if parts[-1] == "total":
            total = n
        else:
            calls[parts[-1]] = n
    return calls, (total if total is not None else sum(calls.values()))


def cmd_syscalls(a):
    calls, total = parse_strace(a.file)
    conns, reqs = nginx_delta(a.before, a.after)
    rec = {"block": a.block, "tool": a.tool, "rate": a.rate, "rc": a.rc, "nginx_connections": conns,
           "nginx_requests": reqs, "calls": calls, "total": total,
           "per_conn": total / conns if conns > 0 else None,
           "by_call": {k: v / conns for k, v in calls.items()} if conns > 0 else {}}
    append(a.raw, rec)
    print(f"    {a.block} strace {a.tool:8} conns={conns} syscalls={total} per conn={fmt(rec['per_conn'], 1)}",
          file=sys.stderr)


def breakdown(by_call, least=0.05):
    """'epoll_wait 3.86, epoll_ctl 2.00, ...': every call made at least `least` times per connection."""
    items = sorted(by_call.items(), key=lambda kv: -kv[1])
    shown = ", ".join(f"{k} {v:.2f}" for k, v in items if v >= least)
    rest = sum(v for _, v in items if v < least)
    return shown + (f", others {rest:.2f}" if rest >= 0.005 else "")


# ---------------------------------------------------------------- perf report

# Crypto primitives: ring's (ring_core_* C and assembly, ring:: Rust), aws-lc's (aws_lc_*, aws_lc_rs::),
# and the algorithms by name wherever they live; OpenSSL's are its libcrypto.
CRYPTO_RE = re.compile(
    r"ring_core|\bring::|aws_lc|x25519|curve25519|p256|p384|nistz|ecdsa|ecp_|ec_gf|aes|gcm|ghash|"
    r"sha1|sha256|sha512|sha2_|sha3|hmac|hkdf|bn_mul|bn_sqr|bn_mont|limbs_|fiat_|chacha|poly1305|"
    r"montgomery|\brsa|^(fe|ge|sc)(\d|_)|jent_|keccak|^rol64$", re.I)
# ^fe/ge/sc: curve25519's field, group and scalar code (ring); jent_, keccak, rol64: aws-lc's jitter entropy
TLS_RE = re.compile(r"rustls|webpki|libssl", re.I)
PERF_LINE = re.compile(r"^\s*([0-9.]+)%\s+(\S+)\s+\[(.)\]\s+(.*?)\s*$")


def classify(dso, kind, sym):
    if kind == "k" or dso.startswith("[kernel"):
        return "kernel"
    if "libcrypto" in dso or CRYPTO_RE.search(sym):
        return "crypto"
    if "libssl" in dso or TLS_RE.search(sym):
        return "tls"
    return "rest"


def cmd_perf(a):
    shares = collections.Counter()
    top = collections.Counter()
    for ln in compare.read(a.file).splitlines():
        m = PERF_LINE.match(ln)
        if not m:
            continue
        pct, dso, kind, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4)
        c = classify(dso, kind, sym)
        shares[c] += pct
        if c == "crypto":
            top[f"{dso}:{sym[:60]}"] += pct
    total = sum(shares.values())
    rec = {"block": a.block, "tool": a.tool, "rate": a.rate, "rc": a.rc,
           "shares": {k: shares[k] / total for k in ("kernel", "crypto", "tls", "rest")} if total else {},
           "top_crypto": top.most_common(6)}
    append(a.raw, rec)
    print(f"    {a.block} perf   {a.tool:8} " + " ".join(f"{k}={100 * v:.0f}%" for k, v in rec["shares"].items()),
          file=sys.stderr)


# ---------------------------------------------------------------- the resumption check

def cmd_reused(a):
    rows = [ln.split() for ln in compare.read(a.file).splitlines() if ln.strip()]
    n = len(rows)
    reused = sum(1 for r in rows if r and r[0] == "r")
    kinds = collections.Counter(" ".join(r[1:]) for r in rows)
    rec = {"block": a.block, "tool": a.tool, "rate": a.rate, "rc": a.rc, "requests": n, "reused": reused,
           "reused_share": reused / n if n else None, "kinds": dict(kinds)}
    append(a.raw, rec)
    print(f"    {a.block} check  {a.tool:8} requests={n} resumed={reused} "
          f"({100 * reused / n if n else 0:.0f}%) {dict(kinds)}", file=sys.stderr)


# ---------------------------------------------------------------- report

def vals(runs, block, tool, field):
    return [r[field] for r in runs if r["block"] == block and r["tool"] == tool
            and isinstance(r.get(field), (int, float))]


def med(v):
    return statistics.median(v) if v else None


def verdicts(runs, block, tool):
    """stampede's verdicts over the repetitions ('valid', 'valid x2, degraded'); '-' for the others."""
    c = collections.Counter(r["trust"] for r in runs if r["block"] == block and r["tool"] == tool and r.get("trust"))
    return ", ".join(f"{k} x{n}" if n > 1 else k for k, n in c.items()) or "-"


def table(rows, p):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        p("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))


def machine_lines(path, p):
    if path and os.path.exists(path):
        p("Machine")
        with open(path) as f:
            for ln in f:
                k, _, v = ln.rstrip("\n").partition("\t")
                if k:
                    p(f"  {k:18} {v}")
        p("")


def cmd_report(a):
    runs = load(a.raw)
    sysc = load(a.syscalls)
    perf = load(a.perf)
    checks = load(a.checks)
    out = []
    p = out.append
    machine_lines(a.machine, p)
    unit = "handshakes" if a.tls else "conn"
    blocks = list(dict.fromkeys(r["block"] for r in runs))
    titles = dict(t.split("=", 1) for t in a.title)
    for block in blocks:
        tools = [t for t in TOOLS if any(r["block"] == block and r["tool"] == t for r in runs)]
        reps = max(r["rep"] for r in runs if r["block"] == block)
        p(f"== {block}: {titles.get(block, '')}; {reps} rep(s); median (min-max) ==")
        rows = [["tool", "conn/s (nginx)", "req/s (nginx)", "p50 ms", "p99 ms", "CPU s", f"{unit}/CPU-s",
                 f"µs CPU/{'handshake' if a.tls else 'conn'}", "syscalls/conn", "stampede/tool", "verdict"]]
        s_by_rep = {r["rep"]: r["conn_per_cpu_s"] for r in runs
                    if r["block"] == block and r["tool"] == "stampede" and r.get("conn_per_cpu_s")}
        ratio_lines = []
        for t in tools:
            sc = [s for s in sysc if s["block"] == block and s["tool"] == t and s.get("per_conn")]
            ratio = "-"
            o_by_rep = {r["rep"]: r["conn_per_cpu_s"] for r in runs
                        if r["block"] == block and r["tool"] == t and r.get("conn_per_cpu_s")}
            if t != "stampede" and s_by_rep and o_by_rep:
                rm = statistics.median(s_by_rep.values()) / statistics.median(o_by_rep.values())
                paired = [s_by_rep[k] / o_by_rep[k] for k in sorted(s_by_rep) if k in o_by_rep]
                ratio = f"{rm:.2f}"
                if len(paired) > 1:
                    ratio += f" ({min(paired):.2f}-{max(paired):.2f})"
                ratio_lines.append(f"  stampede / {t} on {unit}/CPU-s: {rm:.2f} (ratio of medians); same-rep "
                                   f"ratios {', '.join(f'{x:.2f}' for x in paired)}")
            rows.append([t, spread(vals(runs, block, t, "conn_s"), 0), spread(vals(runs, block, t, "req_s"), 0),
                         spread(vals(runs, block, t, "p50_ms"), 3), spread(vals(runs, block, t, "p99_ms"), 3),
                         spread(vals(runs, block, t, "cpu_s"), 2), spread(vals(runs, block, t, "conn_per_cpu_s"), 0),
                         spread(vals(runs, block, t, "us_per_conn"), 1),
                         fmt(sc[-1]["per_conn"], 1) if sc else "-", ratio, verdicts(runs, block, t)])
        table(rows, p)
        for ln in ratio_lines:
            p(ln)
        if "stampede" in tools:
            p(f"  stampede's schedule lag p99 {spread(vals(runs, block, 'stampede', 'lag_p99_ms'), 2)} ms, its own "
              f"generator CPU {spread(vals(runs, block, 'stampede', 'gen_cpu_pct'), 0)} %")
        for t in tools:
            sc = [s for s in sysc if s["block"] == block and s["tool"] == t and s.get("per_conn")]
            if sc:
                s = sc[-1]
                p(f"  syscalls per connection, {t} (strace -f -c, {s['nginx_connections']} connections): "
                  f"{s['per_conn']:.1f} = {breakdown(s['by_call'])}")
                if t == "stampede":
                    p("    (stampede's whole process: the coordinator's calls (futex, write, fdatasync, openat...) are "
                      "divided by the connections too; the ones near whole numbers are the connection's own)")
        for c in [c for c in checks if c["block"] == block]:
            share = c.get("reused_share")
            p(f"  check {c['tool']}: {c['requests']} requests in nginx's access log, "
              f"{'-' if share is None else f'{100 * share:.0f} %'} on a resumed session; "
              + "; ".join(f"{k} x{v}" for k, v in c["kinds"].items()))
            # The block's claim against what nginx saw: a row that is not what its block says, said so.
            if share is not None and "-resumed-" in block and share < 0.9:
                p(f"  note: {c['tool']} resumed only {100 * share:.0f} % of its sessions: its row here is mostly "
                  "full handshakes")
            if share is not None and "-full-" in block and share > 0.01:
                p(f"  note: {c['tool']} resumed {100 * share:.0f} % of its sessions in a full-handshake block")
        for t in tools:
            for r in runs:
                if r["block"] == block and r["tool"] == t and (r.get("tls_full") or r.get("tls_resumed")):
                    p(f"  stampede's own count, rep {r['rep']}: {r.get('tls_full') or 0} full, "
                      f"{r.get('tls_resumed') or 0} resumed handshakes")
        for pr in [x for x in perf if x["block"] == block and x.get("shares")]:
            us = med(vals(runs, block, pr["tool"], "us_per_conn"))
            sh = pr["shares"]
            crypto_us = f" = {sh['crypto'] * us:.0f} µs per handshake" if us else ""
            p(f"  profile {pr['tool']} (perf record): kernel {100 * sh['kernel']:.0f} %, crypto "
              f"{100 * sh['crypto']:.0f} %{crypto_us}, TLS library {100 * sh['tls']:.0f} %, rest {100 * sh['rest']:.0f} %")
            if pr.get("top_crypto"):
                p("    top crypto: " + ", ".join(f"{k} {v:.1f}%" for k, v in pr["top_crypto"][:4]))
        if "httperf" in tools:
            p(f"  httperf has no percentiles: median connection time (1 ms bins) "
              f"{spread(vals(runs, block, 'httperf', 'conn_time_median_ms'), 1)} ms, mean reply time "
              f"{spread(vals(runs, block, 'httperf', 'mean_ms'), 1)} ms")
        for r in runs:
            if r["block"] != block:
                continue
            notes = []
            if r.get("rc") not in (0, None):
                notes.append(f"exit code {r['rc']}")
            if r.get("parse_error"):
                notes.append(f"output not parsed: {r['parse_error']}")
            if r.get("errors"):
                notes.append(f"{r['errors']} errors")
            if r.get("trust") not in (None, "valid"):
                notes.append(f"stampede trust {r['trust']}: {'; '.join(r.get('reasons') or [])}")
            want = r["rate"] * (r.get("duration_s") or 0)
            if want and r["nginx_connections"] < 0.97 * want:
                notes.append(f"nginx accepted {r['nginx_connections']} of {want:.0f} connections asked")
            if notes:
                p(f"  note: rep {r['rep']} {r['tool']}: {', '.join(notes)}")
        p("")
    text = "\n".join(out)
    print(text)
    with open(os.path.join(a.outdir, "summary.txt"), "w") as f:
        f.write(text + "\n")
    write_tsv(runs, os.path.join(a.outdir, "runs.tsv"))


FIELDS = ["block", "rep", "position", "tool", "rate", "calls", "rc", "nginx_connections", "nginx_requests",
          "duration_s", "wall_s", "conn_s", "req_s", "p50_ms", "p99_ms", "mean_ms", "conn_time_median_ms",
          "user_s", "sys_s", "cpu_s", "cpu_pct", "conn_per_cpu_s", "us_per_conn", "maxrss_kib", "tool_requests",
          "errors", "trust", "gen_cpu_pct", "lag_p99_ms", "tls_full", "tls_resumed", "cmd"]


def write_tsv(runs, path):
    with open(path, "w") as f:
        f.write("\t".join(FIELDS) + "\n")
        for r in runs:
            f.write("\t".join("" if r.get(k) is None else
                              (f"{r[k]:.6g}" if isinstance(r[k], float) else str(r[k])) for k in FIELDS) + "\n")


# ---------------------------------------------------------------- growth

def cmd_growth(a):
    runs = [r for r in load(a.raw) if r["tool"] == "stampede" and r["block"].startswith("growth")]
    out = []
    p = out.append
    machine_lines(a.machine, p)
    series, dropped = {}, []
    for calls in sorted({r["calls"] for r in runs}):
        p(f"== growth: stampede alone (--threads 1), {calls} request(s) per connection; median (min-max) ==")
        rows = [["conn/s asked", "conn/s (nginx)", "µs CPU/conn", "CPU %", "stampede CPU %", "lag p99 ms",
                 "p50 ms", "p99 ms", "verdict"]]
        pts, notes = [], []
        for rate in sorted({r["rate"] for r in runs if r["calls"] == calls}):
            rs = [r for r in runs if r["calls"] == calls and r["rate"] == rate]

            def v(field):
                return [r[field] for r in rs if isinstance(r.get(field), (int, float))]
            rows.append([f"{rate:g}", spread(v("conn_s"), 0), spread(v("us_per_conn"), 1), spread(v("cpu_pct"), 0),
                         spread(v("gen_cpu_pct"), 0), spread(v("lag_p99_ms"), 2), spread(v("p50_ms"), 3),
                         spread(v("p99_ms"), 3), verdicts(rs, rs[0]["block"], "stampede")])
            # A rate the one thread fell behind at is its limit, not a cost at that rate: not drawn.
            kept = (med(v("conn_s")) or 0) >= 0.98 * rate and all(r.get("trust") != "invalid" for r in rs)
            if v("us_per_conn") and kept:
                pts.append((med(v("conn_s")) or rate, med(v("us_per_conn"))))
            elif v("us_per_conn"):
                dropped.append(f"{calls} req/conn at {rate:g}/s")
            notes += [f"  note: {rate:g}/s rep {r['rep']}: {r['trust']}: {'; '.join(r['reasons'])}"
                      for r in rs if r.get("trust") not in (None, "valid") and r.get("reasons")]
        table(rows, p)
        out.extend(notes)
        p("  CPU % is the whole process (coordinator included) from the OS over the step; stampede CPU % is its "
          "own generator report. Agents a target rate needs: rate / (highest valid conn/s here), one core each.")
        p("")
        series[calls] = pts
    text = "\n".join(out)
    print(text)
    with open(os.path.join(a.outdir, "growth.txt"), "w") as f:
        f.write(text + "\n")
    write_tsv(runs, os.path.join(a.outdir, "growth.tsv"))
    svg = growth_svg(series, dropped)
    with open(os.path.join(a.outdir, "growth.svg"), "w") as f:
        f.write(svg)
    print(f"plot: {os.path.join(a.outdir, 'growth.svg')}", file=sys.stderr)


def nice_max(x):
    for e in range(-1, 8):
        for m in (1, 2, 2.5, 5):
            if m * 10 ** e >= x:
                return m * 10 ** e
    return x


def growth_svg(series, dropped=()):
    """CPU µs per connection against achieved conn/s, one polyline per requests-per-connection; the rates
    the generator fell behind at (`dropped`) are named under the plot, not drawn."""
    w, h, l, r, t, b = 640, 400, 70, 150, 40, 50
    xs = [x for pts in series.values() for x, _ in pts] or [1]
    ys = [y for pts in series.values() for _, y in pts] or [1]
    xmax, ymax = nice_max(max(xs)), nice_max(max(ys) * 1.1)

    def X(x):
        return l + (w - l - r) * x / xmax

    def Y(y):
        return h - b - (h - t - b) * y / ymax
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    full = h + (24 if dropped else 0)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{full}" font-family="sans-serif" '
         f'font-size="12">',
         f'<rect width="{w}" height="{full}" fill="white"/>',
         f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">stampede: generator CPU per new connection'
         ' (one thread)</text>',
         f'<line x1="{l}" y1="{h - b}" x2="{w - r}" y2="{h - b}" stroke="black"/>',
         f'<line x1="{l}" y1="{t}" x2="{l}" y2="{h - b}" stroke="black"/>']
    for i in range(6):
        xv, yv = xmax * i / 5, ymax * i / 5
        o.append(f'<line x1="{X(xv):.1f}" y1="{h - b}" x2="{X(xv):.1f}" y2="{h - b + 5}" stroke="black"/>')
        o.append(f'<text x="{X(xv):.1f}" y="{h - b + 18}" text-anchor="middle">{xv:g}</text>')
        o.append(f'<line x1="{l}" y1="{Y(yv):.1f}" x2="{w - r}" y2="{Y(yv):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{l - 6}" y="{Y(yv) + 4:.1f}" text-anchor="end">{yv:g}</text>')
    o.append(f'<text x="{(l + w - r) / 2}" y="{h - 10}" text-anchor="middle">connections/s (counted by nginx)</text>')
    o.append(f'<text x="18" y="{(t + h - b) / 2}" text-anchor="middle" '
             f'transform="rotate(-90 18 {(t + h - b) / 2})">µs of CPU per connection</text>')
    for i, (calls, pts) in enumerate(sorted(series.items())):
        c = colors[i % len(colors)]
        pts = sorted(pts)
        if pts:
            o.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="'
                     + " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in pts) + '"/>')
        for x, y in pts:
            o.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3.5" fill="{c}"><title>{x:.0f} conn/s: '
                     f'{y:.1f} µs</title></circle>')
        ly = t + 20 + 20 * i
        o.append(f'<line x1="{w - r + 15}" y1="{ly}" x2="{w - r + 40}" y2="{ly}" stroke="{c}" stroke-width="2"/>')
        o.append(f'<text x="{w - r + 46}" y="{ly + 4}">{calls} request{"s" if calls != 1 else ""}/conn</text>')
    if dropped:
        o.append(f'<text x="{l}" y="{h + 14}" font-size="11">not drawn (one thread fell behind its schedule: '
                 f'its limit, not a cost): {"; ".join(dropped)}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="sub", required=True)
    s = sub.add_parser("scrape")
    s.add_argument("port", type=int)

    def run_args(x):
        x.add_argument("--raw", required=True)
        x.add_argument("--block", required=True)
        x.add_argument("--tool", required=True, choices=TOOLS)
        x.add_argument("--rate", type=float, required=True)
        x.add_argument("--rc", type=int, default=0)
    r = sub.add_parser("record")
    run_args(r)
    r.add_argument("--rep", type=int, required=True)
    r.add_argument("--position", type=int, default=0)
    r.add_argument("--calls", type=int, default=1)
    r.add_argument("--dir", required=True, help="the run's directory: cmd, stdout, time, stampede/run.json")
    for name in ("syscalls", "perf", "reused"):
        x = sub.add_parser(name)
        run_args(x)
        x.add_argument("--file", required=True)
    for x in (r, sub.choices["syscalls"]):
        x.add_argument("--before", required=True, help="'accepts requests' before the run")
        x.add_argument("--after", required=True, help="'accepts requests' after the run")
    rp = sub.add_parser("report")
    g = sub.add_parser("growth")
    for x in (rp, g):
        x.add_argument("--raw", required=True)
        x.add_argument("--machine")
        x.add_argument("--outdir", required=True)
    rp.add_argument("--syscalls", default="")
    rp.add_argument("--perf", default="")
    rp.add_argument("--checks", default="")
    rp.add_argument("--tls", action="store_true")
    rp.add_argument("--title", action="append", default=[], help="BLOCK=title (repeatable)")
    a = ap.parse_args()
    if a.sub == "scrape":
        print(*compare.scrape(a.port))
    else:
        {"record": cmd_record, "syscalls": cmd_syscalls, "perf": cmd_perf, "reused": cmd_reused,
         "report": cmd_report, "growth": cmd_growth}[a.sub](a)


if __name__ == "__main__":
    main()
