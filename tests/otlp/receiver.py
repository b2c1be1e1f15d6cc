"""A tiny OTLP/HTTP metrics receiver for the tests: what stampede's `--otlp` sends, decoded by the
official generated classes (PyPI `opentelemetry-proto`), not by anything stampede wrote.

    python receiver.py OUT.jsonl [--fail-first N]

Run with a Python that has `opentelemetry-proto==1.45.2` and `protobuf==7.36.2` (.ci/run makes
target/otlp-venv: `python3 -m venv target/otlp-venv && target/otlp-venv/bin/pip install
opentelemetry-proto==1.45.2 protobuf==7.36.2`).

It listens on a free loopback port and prints `listening PORT` on stdout once it takes requests.
Each POST is parsed as an `ExportMetricsServiceRequest` and written to OUT.jsonl as one JSON line:
its path, Content-Type, status answered and, when it was read, its resource attributes, scopes and
metrics with every point. A body the classes cannot parse, or one holding a field they do not know
(a wrong field number or wire type lands there), is answered 400 and written with its `error`, so
the test sees it. The first N requests with `--fail-first N` are answered 503 unread (`"status": 503`),
as a receiver that is briefly down, to show the sender retries. It runs until killed.
"""
import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality


def unknown(msg, where="request"):
    """Where in `msg` (recursively) the parser kept fields it does not know."""
    found = []
    if len(unknown_fields.UnknownFieldSet(msg)) > 0:
        found.append(where)
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        if field.is_repeated:
            for i, v in enumerate(value):
                found += unknown(v, f"{where}.{field.name}[{i}]")
        else:
            found += unknown(value, f"{where}.{field.name}")
    return found


def any_value(v):
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


def attributes(kvs):
    return {kv.key: any_value(kv.value) for kv in kvs}


def number_point(p):
    kind = p.WhichOneof("value")
    return {
        "attributes": attributes(p.attributes),
        "start": p.start_time_unix_nano,
        "time": p.time_unix_nano,
        "value": getattr(p, kind) if kind else None,
        "int": kind == "as_int",
    }


def histogram_point(p):
    return {
        "attributes": attributes(p.attributes),
        "start": p.start_time_unix_nano,
        "time": p.time_unix_nano,
        "count": p.count,
        "sum": p.sum if p.HasField("sum") else None,
        "bounds": list(p.explicit_bounds),
        "buckets": list(p.bucket_counts),
    }


def metric(m):
    kind = m.WhichOneof("data")
    out = {"name": m.name, "description": m.description, "unit": m.unit, "type": kind}
    data = getattr(m, kind) if kind else None
    if kind in ("sum", "histogram"):
        out["temporality"] = AggregationTemporality.Name(data.aggregation_temporality)
    if kind == "sum":
        out["monotonic"] = data.is_monotonic
    if kind in ("sum", "gauge"):
        out["points"] = [number_point(p) for p in data.data_points]
    elif kind == "histogram":
        out["points"] = [histogram_point(p) for p in data.data_points]
    return out


def decode(body):
    req = ExportMetricsServiceRequest()
    req.ParseFromString(body)
    stray = unknown(req)
    if stray:
        raise ValueError("fields the official definitions do not know, at " + ", ".join(stray))
    seen = {"resources": []}
    for rm in req.resource_metrics:
        scopes = []
        for sm in rm.scope_metrics:
            scopes.append(
                {
                    "name": sm.scope.name,
                    "version": sm.scope.version,
                    "metrics": [metric(m) for m in sm.metrics],
                }
            )
        seen["resources"].append({"attributes": attributes(rm.resource.attributes), "scopes": scopes})
    return seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--fail-first", type=int, default=0)
    args = ap.parse_args()
    out = open(args.out, "a", encoding="utf-8")
    lock = threading.Lock()
    state = {"requests": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            line = {"path": self.path, "content_type": self.headers.get("Content-Type")}
            with lock:
                state["requests"] += 1
                n = state["requests"]
            status = 200
            if n <= args.fail_first:
                status = 503
            else:
                try:
                    line.update(decode(body))
                except (DecodeError, ValueError) as e:
                    status = 400
                    line["error"] = str(e)
            line["status"] = status
            with lock:
                out.write(json.dumps(line) + "\n")
                out.flush()
            reply = ExportMetricsServiceResponse().SerializeToString() if status == 200 else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
