"""Answer verification worker (SPEC §5): `python -m sandbox.verifier --timeout-s 5`.

Reads one JSON object per line on stdin ({"model_text", "reference"}), writes one JSON
line back ({"score", "status", "elapsed_s"}). It is single-threaded on purpose:
math-verify's timeouts use signal.alarm, which works only in the main thread. Its own
timeout bounds each parse and comparison; the server kills the whole worker when even
that is exceeded. It never runs user code, and user code never runs where it lives.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import signal
import sys
import time

from sandbox.isolation import PR_SET_PDEATHSIG, prctl

log = logging.getLogger("sandbox.verifier")


def verify_pair(model_text: str, reference: str, timeout_s: int) -> dict:
    """Score 1.0 when math-verify finds the model's answer equal to the reference."""
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    start = time.monotonic()
    try:
        # A reference is one LaTeX expression: read whole, inside delimiters. Undelimited,
        # math-verify takes the first number it sees, so `8\sqrt{10}` read as 8 (and a model
        # answering 8 scored 1): 63 of the 590 math references of SPEC §9 were misread so.
        gold = parse(f"${reference}$", parsing_timeout=timeout_s, raise_on_error=True)
        if not gold:
            gold = parse(reference, parsing_timeout=timeout_s, raise_on_error=True)
        if not gold:
            return {"score": 0.0, "status": "error", "elapsed_s": time.monotonic() - start}  # bad reference
        pred = parse(model_text, parsing_timeout=timeout_s, raise_on_error=True)
        ok = bool(pred) and verify(gold, pred, timeout_seconds=timeout_s, raise_on_error=True)
        status = "ok"
    except TimeoutException:
        ok, status = False, "timeout"
    except Exception as exc:  # a math-verify failure scores 0, like a wrong answer
        log.debug("verification error: %s", exc)
        ok, status = False, "error"
    return {"score": 1.0 if ok else 0.0, "status": status, "elapsed_s": time.monotonic() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout-s", type=int, default=5)
    parser.add_argument("--memory-mb", type=int, default=4096)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s verifier %(levelname)s %(message)s")
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # die with the server
    if os.getppid() == 1:
        sys.exit(1)
    verify_pair("\\boxed{1}", "1", args.timeout_s)  # import and warm before saying ready
    # A huge power evaluated in C ignores the alarm; the address-space cap turns it into a
    # MemoryError (status "error") instead of a worker that eats the node's memory.
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * resource.getpagesize()
    limit = mapped + args.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out = sys.stdout.buffer
    out.write(b'{"ready": true}\n')
    out.flush()
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
            res = verify_pair(str(req["model_text"]), str(req["reference"]), args.timeout_s)
        except (ValueError, KeyError, TypeError):
            res = {"score": 0.0, "status": "error", "elapsed_s": 0.0}
        out.write(json.dumps(res).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
