#!/usr/bin/env python3
"""The Grafana dashboard's shape, for deploy/check.sh's grafana check (offline: no Grafana, no Prometheus).

  grafana.py DASHBOARD RULES   checks DASHBOARD (deploy/grafana/stampede.json): valid JSON of Grafana's
                               import format (a schemaVersion, panels, templating), unique panel ids,
                               every panel with the $datasource variable's datasource and at least one
                               non-empty PromQL expression, every query variable on that datasource;
                               writes every expression (panels' and variables' label_values selectors),
                               its variables filled in as tests/tests/grafana.rs fills them, as recording
                               rules to RULES, for `promtool check rules` to parse offline

Prints how many panels and expressions it saw. Any problem is one line on stderr and exit 1. The test
tests/tests/grafana.rs runs each expression against a real Prometheus that watched a run; this check is
the quick one that needs neither.
"""
import json
import re
import sys

DATASOURCE = "${datasource}"
# As tests/tests/grafana.rs fills them: the time range, the interval, and every variable at "All".
FIXED = {"__range": "1h", "__interval": "1s"}


def fail(message):
    print(f"grafana.py: {message}", file=sys.stderr)
    sys.exit(1)


def fill(expr):
    def one(m):
        name = m.group(1) or m.group(2)
        return FIXED.get(name, ".*")

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


def main(path, rules_path):
    try:
        with open(path) as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not valid JSON: {e}")
    if not isinstance(dash.get("schemaVersion"), int):
        fail(f"{path}: no schemaVersion")
    panels = dash.get("panels")
    if not isinstance(panels, list) or not panels:
        fail(f"{path}: no panels")
    exprs, ids = [], set()
    for p in panels:
        title = p.get("title") or fail(f"{path}: a panel without a title")
        pid = p.get("id")
        if not isinstance(pid, int) or pid in ids:
            fail(f"{path}: panel {title!r}: id {pid!r} is missing or not unique")
        ids.add(pid)
        if (p.get("datasource") or {}).get("uid") != DATASOURCE:
            fail(f"{path}: panel {title!r} has no datasource (the {DATASOURCE} variable's)")
        targets = p.get("targets") or fail(f"{path}: panel {title!r} has no query")
        for t in targets:
            expr = (t.get("expr") or "").strip()
            if not expr:
                fail(f"{path}: panel {title!r} query {t.get('refId')!r} has no expression")
            if (t.get("datasource") or {}).get("uid") != DATASOURCE:
                fail(f"{path}: panel {title!r} query {t.get('refId')!r} has no datasource")
            exprs.append(expr)
    variables = (dash.get("templating") or {}).get("list") or fail(f"{path}: no template variables")
    if not any(v.get("type") == "datasource" and v.get("name") == "datasource" for v in variables):
        fail(f"{path}: no datasource variable named 'datasource'")
    for v in variables:
        if v.get("type") != "query":
            continue
        if (v.get("datasource") or {}).get("uid") != DATASOURCE:
            fail(f"{path}: variable {v.get('name')!r} has no datasource")
        m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", v.get("definition") or "")
        if not m:
            fail(f"{path}: variable {v.get('name')!r} is not label_values(SELECTOR, LABEL)")
        exprs.append(m.group(1))
    with open(rules_path, "w") as f:
        f.write("groups:\n  - name: stampede-dashboard\n    rules:\n")
        for i, expr in enumerate(exprs):
            f.write(f"      - record: stampede_dashboard_{i}\n        expr: {json.dumps(fill(expr))}\n")
    print(f"{len(panels)} panels, {len(exprs)} expressions")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        fail("usage: grafana.py DASHBOARD RULES")
    main(sys.argv[1], sys.argv[2])
