"""Run hostile inputs in a child process under CPU-time and address-space limits
(resource.setrlimit), so that a regression shows as a failed test naming the case, not as a
crashed, hung or swapping test run: a segfault kills only the child, a CPU burn ends at the
CPU limit, a runaway allocation at the memory limit.

`run_cases(setup, cases)` runs `setup` (Python source) then evaluates each case's expression
in turn, in one child (importing the library once costs more than most cases). Each case
reports what it raised, its message and its CPU time; a case during which the child died
reports how (a signal, the CPU limit, the wall-clock timeout)."""
import json
import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GiB = 1 << 30

_CHILD = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu} + 1))
resource.setrlimit(resource.RLIMIT_AS, ({mem}, {mem}))

def _run_case(name, thunk):
    print("CASE " + json.dumps(name), flush=True)
    start = time.process_time()
    try:
        thunk()
        out = {{"raised": None, "message": ""}}
    except BaseException as e:  # everything, to report it
        out = {{"raised": type(e).__name__, "message": str(e)[:2000]}}
    out["cpu"] = time.process_time() - start
    print("DONE " + json.dumps(out), flush=True)

{setup}
"""


def run_child(code, cpu_s=20, mem=3 * GiB, wall_s=120):
    """Run `code` after the limits and _run_case (see run_cases) are set up; {case name:
    outcome}, where an outcome is {"raised", "message", "cpu"} or, for the case the child
    died in, {"died": how}. A child that dies outside any case reports under None."""
    script = _CHILD.format(cpu=int(cpu_s), mem=int(mem), setup=code)
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               RAYON_NUM_THREADS="1")
    try:
        proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=wall_s)
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, rc = f"timed out after {wall_s} s", "timeout"
    results, current = {}, None
    for line in out.splitlines():
        if line.startswith("CASE "):
            current = json.loads(line[5:])
        elif line.startswith("DONE ") and current is not None:
            results[current] = json.loads(line[5:])
            current = None
    if rc != 0:
        how = rc if rc == "timeout" else _death(rc)
        results[current] = {"died": how, "stderr": err[-3000:]}
    return results


def _death(rc):
    if rc < 0:
        name = signal.Signals(-rc).name
        return f"{name} (CPU limit)" if name in ("SIGXCPU", "SIGKILL") else name
    return f"exit status {rc}"


def run_cases(setup, cases, **limits):
    """Run `setup`, then each {name: expression} of `cases`, in one limited child."""
    calls = "\n".join(f"_run_case({name!r}, lambda: {expr})" for name, expr in cases.items())
    return run_child(setup + "\n" + calls, **limits)


def refusals_missed(results, expected, cpu_s):
    """The cases of run_cases that did not refuse a hostile file as they must: by raising
    CheckpointError whose message names the file and the expected phrase, in under cpu_s CPU
    seconds. expected: {case name: (path, phrase)}; one line per miss."""
    missed = []
    for name, (path, phrase) in expected.items():
        got = results.get(name, {"died": "never reached"})
        if not (got.get("raised") == "CheckpointError" and path in got["message"]
                and phrase in got["message"] and got["cpu"] < cpu_s):
            missed.append(f"{name}: {got}")
    return missed


def cpu_seconds():
    """CPU time used by this process and the children it has waited for (dot, gcc): what a
    bound on a test's work should count, since wall-clock time also counts everything else
    the machine runs (other test workers, other users)."""
    import resource
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
