#!/usr/bin/env python3
"""bench/live.py: bench/live.sh's helper (stdlib only). See docs/benchmarks.md, "The live page and /metrics".

  live.py ready FILE... TIMEOUT_S     wait for every ready file (--ready-file's JSON), print each "listen"
  live.py cpu PID EVENTS WINDOW_S TIMEOUT_S
                                      the coordinator's CPU over WINDOW_S from events.ndjson's first
                                      step_start, from /proc/PID/stat (utime + stime); prints
                                      "<cpu s in the window> <wall s of the window>"
  live.py reader OUT                  an /events stream on stdin (curl -sN): each interval's delay from
                                      its merged_unix_ms to its arrival here, one number (ms) a line to OUT;
                                      the replay the stream opens with (up to its first view) is skipped
  live.py summary RESULTS DELAYS...   the table: RESULTS holds "<mode> <rep> <ramp cpu s> <ramp wall s>
                                      <life cpu s> <life wall s>" lines, DELAYS the readers' files
"""
import json
import os
import statistics
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def ready(files, timeout):
    end = time.monotonic() + timeout
    out = []
    for f in files:
        while True:
            try:
                with open(f) as fh:
                    out.append(json.load(fh)["listen"])
                break
            except (OSError, ValueError, KeyError):
                if time.monotonic() > end:
                    sys.exit(f"live.py: {f}: no ready file within {timeout} s")
                time.sleep(0.05)
    print("\n".join(out))


def cpu_ticks(pid):
    """utime + stime of the process (all its threads, the dead ones too), in seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        # The command may hold spaces and parentheses: the fields start after the last ')'.
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu(pid, events, window, timeout):
    """The CPU of `window` seconds from the first step_start (seen within 20 ms): a fixed window inside
    the ramp, the same in both modes, clear of the run's start (dialling the agents) and its end."""
    end = time.monotonic() + timeout
    while True:
        if time.monotonic() > end:
            sys.exit(f"live.py: no step_start in {events} within {timeout} s")
        try:
            with open(events, "rb") as fh:
                if b'"event":"step_start"' in fh.read():
                    break
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    began, start = time.monotonic(), cpu_ticks(pid)
    time.sleep(window)
    try:
        now, ticks = time.monotonic(), cpu_ticks(pid)
    except FileNotFoundError:
        sys.exit(f"live.py: the coordinator exited within {window} s of its first step")
    print(f"{ticks - start:.2f} {now - began:.3f}")


def reader(out):
    delays = []
    live = False  # past the replay: the stream's first message ends with the view
    skipped = 0
    for raw in sys.stdin.buffer:
        now_ms = time.time() * 1000
        if raw.startswith(b"event: view"):
            live = True
        elif raw.startswith(b"data: {\"id\"") and b'"event":"interval"' in raw:
            if not live:
                skipped += 1
                continue
            merged = json.loads(raw[6:])["interval"].get("merged_unix_ms", 0)
            if merged:
                delays.append(now_ms - merged)
    with open(out, "w") as fh:
        fh.write("".join(f"{d:.1f}\n" for d in delays))
    if not live:
        sys.exit("live.py reader: the stream sent no view")
    if skipped:
        print(f"live.py reader: {skipped} interval(s) came in the replay, not counted", file=sys.stderr)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def summary(results, delay_files):
    rows = [line.split() for line in open(results) if line.strip()]
    by = {}
    for mode, _rep, c, w, lc, lw in rows:
        by.setdefault(mode, []).append((float(c) / float(w) * 100, float(lc) / float(lw) * 100))
    print(f"{'mode':<10} {'runs':>4} {'window CPU % of a core: median':>31} {'(min-max)':>14} {'life: median':>13}")
    med = {}
    for mode in sorted(by):
        ramp = [r for r, _ in by[mode]]
        life = [x for _, x in by[mode]]
        med[mode] = statistics.median(ramp)
        print(f"{mode:<10} {len(ramp):>4} {med[mode]:>31.2f} {f'({min(ramp):.2f}-{max(ramp):.2f})':>14} "
              f"{statistics.median(life):>13.2f}")
    if "off" in by and "live" in by:
        ramp_off = [r for r, _ in by["off"]]
        ramp_live = [r for r, _ in by["live"]]
        print(f"live cost: {med['live'] - med['off']:+.2f} % of a core (medians); "
              f"{min(ramp_live) - max(ramp_off):+.2f} to {max(ramp_live) - min(ramp_off):+.2f} between the extremes")
    delays = []
    for f in delay_files:
        delays += [float(x) for x in open(f) if x.strip()]
    if delays:
        print(f"interval to reader: {len(delays)} arrivals over {len(delay_files)} stream(s): median "
              f"{statistics.median(delays):.1f} ms, p99 {pct(delays, 99):.1f} ms, max {max(delays):.1f} ms, "
              f"min {min(delays):.1f} ms; over 1000 ms: {sum(d > 1000 for d in delays)}")
    else:
        print("interval to reader: no interval arrived")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "ready":
        ready(args[:-1], float(args[-1]))
    elif cmd == "cpu":
        cpu(int(args[0]), args[1], float(args[2]), float(args[3]))
    elif cmd == "reader":
        reader(args[0])
    elif cmd == "summary":
        summary(args[0], args[1:])
    else:
        sys.exit(f"live.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
