#!/usr/bin/env python3
"""bench/shootout.sh's checks: each server's CPU as its own monitor counted it in its own steps against
the kernel's (/proc/PID/stat before and after the run), nginx's stub_status count against the requests
stampede sent it, and compare.html as Chromium left it (one line per server on the CPU and memory charts).

    shootout.py OUT SERVER...      (CLK_TCK in the environment)

Prints a table and exits 1 when a check fails."""
import json
import os
import sys
from html.parser import HTMLParser


class Charts(HTMLParser):
    """The series names (`<g data-n>`) drawn inside each `<figure class="chart" data-chart>`."""

    def __init__(self):
        super().__init__()
        self.stack = []
        self.series = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        chart = None
        if tag == "figure" and "chart" in (a.get("class") or "").split():
            chart = a.get("data-chart", "")
            self.series.setdefault(chart, set())
        self.stack.append((tag, chart))
        current = next((c for _, c in reversed(self.stack) if c is not None), None)
        if tag == "g" and "data-n" in a and current is not None:
            self.series[current].add(a["data-n"])

    def handle_endtag(self, tag):
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break


def main():
    out, servers = sys.argv[1], sys.argv[2:]
    hz = float(os.environ.get("CLK_TCK", "100"))
    kernel = {}
    with open(os.path.join(out, "kernel_cpu_ticks.txt")) as f:
        for line in f:
            name, ticks = line.split()
            kernel[name] = int(ticks) / hz
    failed = []
    print(f"{'server':8} {'knee':>8} {'cause':28} {'kernel CPU s':>12} {'in its steps':>12} {'ratio':>6}")
    sent = {}
    for s in servers:
        run = json.load(open(os.path.join(out, "run", s, "run.json")))
        seen = 0.0
        requests = 0
        for step in run["steps"]:
            requests += step.get("requests", 0)
            for m in step.get("server_monitors") or []:
                if m.get("watches") == "target":
                    seen += (m["target"].get("cpu_pct") or 0.0) / 100.0 * step["duration_s"]
        sent[s] = requests
        knee = (run.get("summary") or {}).get("knee") or {}
        at = knee.get("demanded_rate") or knee.get("step_value")
        cause = ", ".join([knee["cause"]] + knee.get("also", [])) if knee else "none seen"
        k = kernel.get(s, 0.0)
        ratio = seen / k if k > 0 else float("nan")
        print(f"{s:8} {f'{at:,.0f}' if at is not None else '-':>8} {cause:28} {k:12.2f} {seen:12.2f} {ratio:6.2f}")
        # What a step counted is its own server's: never more than the kernel says it used, and most
        # of it (the rest fell between steps, in the gaps the other servers' steps leave).
        if not (seen <= k * 1.05 + 0.2 and seen >= 0.6 * k):
            failed.append(f"{s}: its monitor counted {seen:.2f} CPU s in its steps, the kernel {k:.2f} s")
    path = os.path.join(out, "nginx_requests.txt")
    if os.path.exists(path) and "nginx" in sent:
        counted = int(open(path).read())
        print(f"nginx stub_status counted {counted} requests; stampede sent it {sent['nginx']}")
        if counted != sent["nginx"]:
            failed.append(f"nginx counted {counted} requests, stampede sent {sent['nginx']}")
    dom = os.path.join(out, "compare.dom.html")
    if os.path.exists(dom):
        charts = Charts()
        charts.feed(open(dom).read())
        for chart in ("server", "server-memory"):
            lines = sorted(charts.series.get(chart, set()))
            print(f"compare.html {chart} chart: {len(lines)} lines {lines}")
            if lines != sorted(servers):
                failed.append(f"the {chart} chart draws {lines}, not one line per server")
    for f in failed:
        print(f"FAILED: {f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
