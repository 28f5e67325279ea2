#!/usr/bin/env python3
"""Failures across processes end in weft.dist.DistError within the timeout, not in a hang.

Run without mpirun: it starts the group itself, three processes with WEFT_DIST_TIMEOUT=3 and
Open MPI told not to abort the job when one process fails, and judges what each survivor saw.

    python failure_check.py hang   # rank 2 never issues a named allreduce (it sleeps 20 s):
                                   # ranks 0 and 1 get DistError naming the tensor and rank 2
    python failure_check.py kill   # rank 1 is killed (SIGKILL) before a collective:
                                   # ranks 0 and 2 get DistError naming rank 1

Each rank writes what it saw (the error's type and text, and how long it took) to a file; the
judge prints each survivor's outcome and exits 0 only when all of them are right. The ranks leave
with os._exit: after a failure the group cannot be shut down in order.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

NP = 3
TIMEOUT_S = 3.0          # WEFT_DIST_TIMEOUT
DEADLINE_S = 10.0        # a survivor must have its DistError within this after issuing
HANG_SLEEP_S = 20.0
JOB_LIMIT_S = 120.0      # the whole mpirun, past which the check reports a hang

SCENARIOS = {
    # name: (the rank that fails, the tensor, what the survivors' messages must name)
    "hang": (2, "failure.hang.tensor", [r"failure\.hang\.tensor", r"\brank[s]?\b[^0-9]{0,16}2\b"]),
    "kill": (1, "failure.kill.tensor", [r"\brank[s]?\b[^0-9]{0,16}1\b"]),
}


def rank_main(scenario, out_dir):
    """One rank of the job (under mpirun)."""
    import numpy as np

    import weft
    import weft.dist as dist

    failing, tensor, _ = SCENARIOS[scenario]
    dist.init()
    me = dist.rank()
    record = {"rank": me, "size": dist.size()}
    # The group works before the failure.
    warm = dist.allreduce(weft.ones((4,)), name="failure.warmup")
    record["warmup_ok"] = bool(np.all(warm.asnumpy() == dist.size()))
    if me == failing:
        if scenario == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(HANG_SLEEP_S)  # alive, but never issues the collective
        os._exit(0)
    start = time.monotonic()
    y = dist.allreduce(weft.full((16,), float(me)), name=tensor)
    try:
        y.wait_to_read()
        record["error_type"] = None
        record["message"] = "no error: the allreduce completed"
    except Exception as e:  # noqa: BLE001 - the type is what is judged
        record["error_type"] = type(e).__module__ + "." + type(e).__qualname__
        record["is_dist_error"] = isinstance(e, dist.DistError)
        record["message"] = str(e)
    record["elapsed_s"] = time.monotonic() - start
    path = os.path.join(out_dir, f"rank{me}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)
    sys.stdout.flush()
    os._exit(0)


def judge(scenario, out_dir):
    """Problems with what the survivors wrote (empty: right)."""
    failing, _, patterns = SCENARIOS[scenario]
    problems = []
    for r in range(NP):
        if r == failing:
            continue
        path = os.path.join(out_dir, f"rank{r}.json")
        if not os.path.exists(path):
            problems.append(f"rank {r}: wrote no outcome (it crashed or hung)")
            continue
        with open(path) as f:
            rec = json.load(f)
        print(f"  rank {r}: {rec.get('error_type')} after {rec['elapsed_s']:.1f} s: "
              f"{rec['message']}")
        if not rec.get("warmup_ok"):
            problems.append(f"rank {r}: the warm-up allreduce was wrong")
        if not rec.get("is_dist_error"):
            problems.append(f"rank {r}: expected weft.dist.DistError, got {rec.get('error_type')}")
        if rec["elapsed_s"] > DEADLINE_S:
            problems.append(f"rank {r}: the error took {rec['elapsed_s']:.1f} s "
                            f"(more than {DEADLINE_S:.0f} s)")
        for p in patterns:
            if not re.search(p, rec["message"], re.IGNORECASE):
                problems.append(f"rank {r}: the message does not match /{p}/")
    return problems


def driver(scenario):
    out_dir = tempfile.mkdtemp(prefix=f"weft-dist-{scenario}-")
    env = dict(os.environ, WEFT_DIST_TIMEOUT=str(TIMEOUT_S))
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe",
           "--mca", "orte_abort_on_non_zero_status", "0", "-np", str(NP),
           sys.executable, os.path.abspath(__file__), "--rank", scenario, out_dir]
    print(f"failure_check {scenario}: {' '.join(cmd[:-4])} ... (WEFT_DIST_TIMEOUT={TIMEOUT_S:g})")
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=JOB_LIMIT_S)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the job this check started, and only it
        output, _ = proc.communicate()
        hung = True
    problems = judge(scenario, out_dir)
    if hung:
        problems.append(f"the job did not end within {JOB_LIMIT_S:.0f} s")
    print(f"  mpirun exited {proc.returncode} after {time.monotonic() - start:.1f} s")
    if problems:
        print("  job output (last 40 lines):")
        for line in output.splitlines()[-40:]:
            print(f"    | {line}")
        for p in problems:
            print(f"  FAIL: {p}")
    shutil.rmtree(out_dir, ignore_errors=True)
    print(f"failure_check {scenario}: {'FAILED' if problems else 'ok'}")
    return 1 if problems else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "--rank":
        rank_main(argv[2], argv[3])
        return 0
    scenarios = argv[1:] or list(SCENARIOS)
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        print(f"usage: {argv[0]} [{'|'.join(SCENARIOS)} ...]", file=sys.stderr)
        return 2
    return max(driver(s) for s in scenarios)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
