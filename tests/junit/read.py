"""Reads a JUnit XML file with junitparser (PyPI, pinned in .ci/run), a reader stampede did not
write, and prints what it read as JSON for tests/tests/junit.rs to check: the totals the file
declares, the totals counted case by case, and every case's result, message and text.

    python3 -m venv target/ci-venv && target/ci-venv/bin/pip install junitparser==5.0.3
    target/ci-venv/bin/python tests/junit/read.py results.xml
"""
import json
import sys

from junitparser import Error, Failure, JUnitXml, Skipped


def main(path):
    xml = JUnitXml.fromfile(path)
    suites = []
    counted = {"tests": 0, "failures": 0, "errors": 0}
    for suite in xml:
        cases = []
        for case in suite:
            result = "passed"
            message = text = kind = None
            for r in case.result:
                if isinstance(r, Failure):
                    result = "failure"
                elif isinstance(r, Error):
                    result = "error"
                elif isinstance(r, Skipped):
                    result = "skipped"
                message, text, kind = r.message, r.text, r.type
            counted["tests"] += 1
            if result == "failure":
                counted["failures"] += 1
            if result == "error":
                counted["errors"] += 1
            cases.append({
                "classname": case.classname,
                "name": case.name,
                "result": result,
                "message": message,
                "type": kind,
                "text": text,
                "time": case.time,
            })
        if (suite.tests, suite.failures, suite.errors) != (
            len(cases),
            sum(c["result"] == "failure" for c in cases),
            sum(c["result"] == "error" for c in cases),
        ):
            sys.exit(f"suite {suite.name!r}: its tests/failures/errors attributes are not its cases'")
        suites.append({
            "name": suite.name,
            "timestamp": suite.timestamp,
            "tests": suite.tests,
            "failures": suite.failures,
            "errors": suite.errors,
            "cases": cases,
        })
    declared = {"tests": xml.tests, "failures": xml.failures, "errors": xml.errors}
    if declared != counted:
        sys.exit(f"<testsuites> declares {declared}, its cases count {counted}")
    print(json.dumps({"name": xml.name, **declared, "suites": suites}))


if __name__ == "__main__":
    main(sys.argv[1])
