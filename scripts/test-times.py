#!/usr/bin/env python3
"""What make test's time went to: the slowest tests (from cargo-nextest's
JUnit reports) and the clusters' starts (from the harness's timing file,
QUEUE_TEST_TIMINGS), printed at the end of make test.

usage: test-times.py TIMINGS_FILE JUNIT_XML...
"""
import sys
import xml.etree.ElementTree as ET


def tests(paths):
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError):
            continue
        label = root.get("name", path)
        for case in root.iter("testcase"):
            yield float(case.get("time", 0)), f"{label}: {case.get('classname')} {case.get('name')}"


def clusters(path):
    try:
        with open(path) as f:
            for line in f:
                kind, test, seconds = line.rstrip("\n").split("\t")
                yield kind, test, float(seconds)
    except OSError:
        return


def main():
    timings, reports = sys.argv[1], sys.argv[2:]
    cases = sorted(tests(reports), reverse=True)
    print(f"== {len(cases)} client and dashboard tests, {sum(t for t, _ in cases):.0f} s in all; the ten slowest:")
    for seconds, name in cases[:10]:
        print(f"  {seconds:7.1f} s  {name}")
    starts = list(clusters(timings))
    for kind in sorted({k for k, _, _ in starts}):
        times = sorted((s, t) for k, t, s in starts if k == kind)
        total = sum(s for s, _ in times)
        print(f"== {len(times)} {kind}s, {total:.1f} s in all, median "
              f"{times[len(times) // 2][0]:.2f} s; the ten slowest:")
        for seconds, test in reversed(times[-10:]):
            print(f"  {seconds:7.2f} s  {test}")


if __name__ == "__main__":
    main()
