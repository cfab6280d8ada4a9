"""Long training runs on real PyTorch: ``python SCRIPT`` against ``gradviz run SCRIPT`` (its defaults: the light
schedule) and anomaly mode, as ratios of the plain run, in one run of this script.

    python benchmarks/bench_long_run.py [--repeat R] [--workload mlp|reinforce|lstm ...] [--no-render-too]
    python benchmarks/bench_long_run.py --steps [--floor] [--repeat R] [--workload ...]
    python benchmarks/bench_long_run.py --calls [--opcodes] [--workload ...]

Workloads (CPU, small, written for this benchmark): a 1,000-step MLP training (784-128-10, batch 64, SGD); a
1,000-episode REINFORCE-style run (a 4-128-2 policy with dropout, one action sampled per environment step from a
``Categorical``, a toy random-walk environment, so each episode's graph has a new length and shape); a 300-step
LSTM language model (vocabulary 100, embedding 32, hidden 64, 35 tokens by 8, truncated backpropagation with the
hidden state detached, gradient clipping and the update by hand as in pytorch/examples' word_language_model).

Each configuration is its own process, started R times in rounds (the order rotated each round); figures are
medians: wall time of the whole process (start-up, the report and pictures included), its CPU time (user +
system, ``wait4``), peak RSS (``wait4``), and report.json's size. gradviz's modules are byte-compiled first and
the processes may read and write Python's bytecode cache, as after ``pip install`` (torch's wheel ships
compiled): with ``PYTHONDONTWRITEBYTECODE=1`` an editable checkout would compile gradviz on every run, about
0.2 s that no installed gradviz pays. ``full-iteration step``: the scripts time
each iteration in CPU time (``time.thread_time``: what the iteration's own thread got, not what the other
processes of a shared machine took from it); the median time of the iterations the default run traced in full
(report.json's ``schedule.full``) over the plain run's median for the same iterations, beside anomaly mode's for
the same iterations: the cost of a full iteration against anomaly mode's. ``--before CHECKOUT`` adds ``gradviz run``
of another checkout (``git worktree add /tmp/before <commit>``) to the same rounds: before and after side by side,
under the same load.

``--calls`` counts instead what load cannot move: the Python calls (``cProfile`` totals) of one step traced in full,
per step and per graph node the step built; with ``--opcodes`` also the bytecode instructions the interpreter ran
for one full step (``sys.settrace`` opcode events), which weigh what each call does.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# every workload records its iterations' CPU times (thread_time) to $BENCH_STEP_TIMES
TIMES = """\
import atexit, json, os, time
_times = []
def _save():
    path = os.environ.get("BENCH_STEP_TIMES")
    if path:
        with open(path, "w") as f:
            json.dump(_times, f)
atexit.register(_save)
"""

MLP = TIMES + """\
import torch
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.randn(64, 784)
y = torch.randint(0, 10, (64,))
STEPS = 1000

def step(i):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
{LOOP}"""

REINFORCE = TIMES + """\
import random
import torch
from torch.distributions import Categorical
torch.manual_seed(0)
torch.set_num_threads(1)
rng = random.Random(0)

class Policy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = torch.nn.Linear(4, 128)
        self.dropout = torch.nn.Dropout(p=0.6)
        self.affine2 = torch.nn.Linear(128, 2)

    def forward(self, x):
        return torch.softmax(self.affine2(torch.relu(self.dropout(self.affine1(x)))), dim=1)

def reset():
    return [rng.uniform(-0.05, 0.05) for _ in range(4)]

def env_step(state, action):
    # a random walk pushed by the action: the episode ends when it leaves the band (lengths vary, up to 30)
    x, v, a, w = state
    v += (0.02 if action else -0.02) + rng.uniform(-0.03, 0.03)
    x += v
    a += rng.uniform(-0.05, 0.05)
    state = [x, v, a, w + a * 0.01]
    return state, 1.0, abs(x) > 1.0 or abs(a) > 0.4

policy = Policy()
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
eps = torch.finfo(torch.float32).eps
STEPS = 1000

def step(episode):
    state, log_probs, rewards = reset(), [], []
    for t in range(30):
        probs = policy(torch.tensor(state).unsqueeze(0))
        m = Categorical(probs)
        action = m.sample()
        log_probs.append(m.log_prob(action))
        state, reward, done = env_step(state, action.item())
        rewards.append(reward)
        if done:
            break
    R, returns = 0.0, []
    for r in reversed(rewards):
        R = r + 0.99 * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps) if len(returns) > 1 else returns
    loss = torch.cat([-lp * ret for lp, ret in zip(log_probs, returns)]).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
{LOOP}"""

LSTM = TIMES + """\
import torch
torch.manual_seed(0)
torch.set_num_threads(1)

class LM(torch.nn.Module):
    def __init__(self, vocab=100, emb=32, hidden=64):
        super().__init__()
        self.encoder = torch.nn.Embedding(vocab, emb)
        self.rnn = torch.nn.LSTM(emb, hidden)
        self.decoder = torch.nn.Linear(hidden, vocab)
        self.drop = torch.nn.Dropout(0.2)

    def forward(self, tokens, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(tokens)), hidden)
        return self.decoder(self.drop(out)), hidden

model = LM()
criterion = torch.nn.CrossEntropyLoss()
data = torch.randint(0, 100, (300 * 35 + 1, 8))
hidden = (torch.zeros(1, 8, 64), torch.zeros(1, 8, 64))
lr = 0.5
STEPS = 300

def step(n):
    global hidden
    i = (n % 300) * 35
    tokens, targets = data[i:i + 35], data[i + 1:i + 36]
    hidden = tuple(h.detach() for h in hidden)
    model.zero_grad()
    output, hidden = model(tokens, hidden)
    loss = criterion(output.view(-1, 100), targets.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
{LOOP}"""

# run as a script: every step, timed; imported by ``--steps``: the definitions only
LOOP = """
if __name__ == "__main__":
    for n in range(STEPS):
        started = time.thread_time()
        step(n)
        _times.append(time.thread_time() - started)
"""
MLP, REINFORCE, LSTM = (w.replace("{LOOP}", LOOP) for w in (MLP, REINFORCE, LSTM))

WORKLOADS = {"mlp": ("MLP, 1,000 steps", MLP), "reinforce": ("REINFORCE, 1,000 episodes", REINFORCE),
             "lstm": ("LSTM LM, 300 steps", LSTM)}

# plain and anomaly mode run the script the same way: runpy from a small launcher
LAUNCH = ("import runpy, sys, torch\n"
          "if sys.argv[1] == 'anomaly':\n"
          "    torch.autograd.set_detect_anomaly(True)\n"
          "sys.argv = sys.argv[2:]\n"
          "runpy.run_path(sys.argv[0], run_name='__main__')\n")


def run(argv, cwd, times_path, path=HERE):
    """(wall seconds, peak RSS bytes, per-iteration seconds, CPU seconds) of one process (CPU: user + system,
    its waited-for children such as `dot` included: steadier than wall time on a shared machine). ``path``: the
    gradviz checkout it imports."""
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", BENCH_STEP_TIMES=times_path)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (see the docstring: bytecode as installed)
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {stderr.decode(errors='replace').strip()[-2000:]}")
    with open(times_path) as f:
        steps = json.load(f)
    return seconds, usage.ru_maxrss * 1024, steps, usage.ru_utime + usage.ru_stime


def full_iterations(report):
    with open(report) as f:
        schedule = json.load(f).get("schedule") or {}
    return [i for r in schedule.get("full", ()) for i in range(r["first"], r["last"] + 1)]


def measure(name, source, folder, repeat, configs, before=None):
    script = os.path.join(folder, f"{name}.py")
    with open(script, "w") as f:
        f.write(source)
    out = os.path.join(folder, f"out-{name}")
    argvs = {
        "plain": [sys.executable, "-c", LAUNCH, "plain", script],
        "anomaly": [sys.executable, "-c", LAUNCH, "anomaly", script],
        "gradviz run": [sys.executable, "-m", "gradviz", "run", "-q", "--fail-on", "never", "--out", out, script],
        "--no-render": [sys.executable, "-m", "gradviz", "run", "-q", "--fail-on", "never", "--no-render", "--out",
                        out + "-nr", script],
        "run, before": [sys.executable, "-m", "gradviz", "run", "-q", "--fail-on", "never", "--out", out + "-before",
                        script],
    }
    paths = {"run, before": before}
    results = {c: [] for c in configs}
    for round_ in range(repeat):
        order = configs[round_ % len(configs):] + configs[:round_ % len(configs)]
        for config in order:
            results[config].append(run(argvs[config], folder, os.path.join(folder, f"{name}-times.json"),
                                       paths.get(config) or HERE))
    full = full_iterations(os.path.join(out, "report.json"))
    figures = {}
    for config, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        per_step = [statistics.median(r[2][i] for r in runs) for i in range(len(runs[0][2]))]
        cpu = statistics.median(r[3] for r in runs)
        figures[config] = (wall, rss, statistics.median(per_step[i] for i in full if i < len(per_step)), cpu)
    sizes = {"report.json": os.path.getsize(os.path.join(out, "report.json")),
             "report.html": os.path.getsize(os.path.join(out, "report.html"))}
    return figures, sizes, full


def minimal_recorder(adapter):
    """The floor of a full iteration in this design (``--floor``): the adapter with all its hooks, whose per-call
    work is cut to what any function-mode recorder must do for a new node, tag it and find its user frame."""
    from gradviz.tracing.adapters.torch import graph as torch_graph
    from gradviz.tracing.adapters.torch.frames import where

    Tensor = adapter._Tensor

    def op(func, args, kwargs):
        result = func(*args, **kwargs)
        if type(result) is Tensor:
            fn = result.grad_fn
            if fn is not None and torch_graph.KEY not in fn.metadata:
                where()
                tag = fn.metadata[torch_graph.KEY] = torch_graph.NodeTag(-1, adapter)
                fn.register_prehook(tag)
        return result

    adapter.op = op


def step_costs(name, source, folder, rounds, per_block, floor=False):
    """In one process, CPU time per step (``time.thread_time``) of the workload's own ``step``: plain, anomaly
    mode, every step traced in full (``gradviz.trace(engine="torch")``), and every step light (a schedule whose
    only full steps lie beyond the run); with ``floor``, also the minimal recorder (``minimal_recorder``). Blocks
    of ``per_block`` steps, the contenders rotated each round; the trace is started and stopped outside the clock.
    name -> median seconds per step."""
    import runpy

    import torch

    import gradviz

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common
    script = os.path.join(folder, f"{name}_steps.py")
    with open(script, "w") as f:
        f.write(source)
    ns = runpy.run_path(script, run_name="workload")
    step = ns["step"]
    counter = [0]
    traces = {}

    def block():
        for _ in range(per_block):
            step(counter[0])
            counter[0] += 1

    def setup(config):
        if config == "anomaly mode":
            torch.autograd.set_detect_anomaly(True)
        elif config == "full trace":
            traces[config] = gradviz.trace(engine="torch").start()
        elif config == "light trace":
            far = 10**9
            traces[config] = gradviz.trace(engine="torch", light=True, trace_steps=(far, far)).start()
        elif config == "minimal rec.":
            traces[config] = gradviz.trace(engine="torch").start()
            minimal_recorder(traces[config].adapters[0])

    def teardown(config):
        torch.autograd.set_detect_anomaly(False)
        if config in traces:
            traces.pop(config).stop()

    names = ("plain", "anomaly mode", "full trace", "light trace") + (("minimal rec.",) if floor else ())
    configs = {c: block for c in names}
    samples = common.run_rounds(configs, rounds, warmup=1, setup=setup, teardown=teardown, clock=time.thread_time)
    return {c: statistics.median(v) / per_block for c, v in samples.items()}


def step_calls(name, source, folder, steps=5):
    """Python calls of the workload's ``step`` traced in full (``cProfile`` totals, after 3 traced warm-up steps),
    and the graph nodes those steps built (the node keys the adapter gave out; a leaf's accumulator has none):
    (calls per step, nodes per step)."""
    import cProfile
    import pstats
    import runpy

    import gradviz

    script = os.path.join(folder, f"{name}_calls.py")
    with open(script, "w") as f:
        f.write(source)
    step = runpy.run_path(script, run_name="workload")["step"]
    trace = gradviz.trace(engine="torch").start()
    try:
        keys = trace.adapters[0]._keys  # (an itertools.count: reading it takes one key, never given to a node)
        for n in range(3):
            step(n)
        before = next(keys)
        profile = cProfile.Profile()
        profile.enable()
        for n in range(3, 3 + steps):
            step(n)
        profile.disable()
        built = next(keys) - before - 1
    finally:
        trace.stop()
    return pstats.Stats(profile).total_calls / steps, built / steps


def step_opcodes(name, source, folder, steps=3):
    """Bytecode instructions the interpreter ran in the workload's ``step`` traced in full (``sys.settrace``'s
    opcode events, after 3 traced warm-up steps), per step: as deterministic as the call count, and closer to the
    CPU time (most of a full step's time is the interpreter's, not torch's kernels) since it also weighs what each
    call does."""
    import runpy

    import gradviz

    script = os.path.join(folder, f"{name}_opcodes.py")
    with open(script, "w") as f:
        f.write(source)
    step = runpy.run_path(script, run_name="workload")["step"]
    count = [0]

    def tracer(frame, event, arg):
        frame.f_trace_opcodes = True
        if event == "opcode":
            count[0] += 1
        return tracer

    trace = gradviz.trace(engine="torch").start()
    try:
        for n in range(3):
            step(n)
        sys.settrace(tracer)
        try:
            for n in range(3, 3 + steps):
                step(n)
        finally:
            sys.settrace(None)
    finally:
        trace.stop()
    return count[0] / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each configuration, medians (default 3)")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), action="append",
                        help="one of the workloads (repeatable; default all)")
    parser.add_argument("--steps", action="store_true",
                        help="instead: per-step CPU time in one process, plain / anomaly / full / light")
    parser.add_argument("--floor", action="store_true",
                        help="with --steps: also the minimal recorder (a tag and a frame per new node)")
    parser.add_argument("--calls", action="store_true",
                        help="instead: the Python calls of a full step, per step and per node (cProfile)")
    parser.add_argument("--opcodes", action="store_true",
                        help="with --calls: also the bytecode instructions of a full step (sys.settrace)")
    parser.add_argument("--no-render-too", action="store_true",
                        help="also `gradviz run --no-render` (the report without pictures)")
    parser.add_argument("--no-anomaly", action="store_true", help="leave anomaly mode out (the slowest)")
    parser.add_argument("--before", metavar="CHECKOUT",
                        help="also `gradviz run` of another gradviz checkout (a `git worktree` of the commit to "
                             "compare with), interleaved with this one's in the same rounds")
    args = parser.parse_args()
    configs = ["plain", "gradviz run"] + (["run, before"] if args.before else []) + \
        ([] if args.no_anomaly else ["anomaly"]) + (["--no-render"] if args.no_render_too else [])
    import platform

    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; medians of {args.repeat} runs, each its own process")
    mib = 2**20
    if args.calls:
        with tempfile.TemporaryDirectory() as folder:
            for name in args.workload or ["mlp", "reinforce", "lstm"]:
                calls, nodes = step_calls(name, WORKLOADS[name][1], folder)
                print(f"{WORKLOADS[name][0]}, one step traced in full: {calls:,.0f} Python calls, {nodes:,.0f} "
                      f"nodes, {calls / nodes:,.0f} calls per node", flush=True)
                if args.opcodes:
                    opcodes = step_opcodes(name, WORKLOADS[name][1], folder)
                    print(f"  {opcodes:,.0f} bytecode instructions, {opcodes / nodes:,.0f} per node", flush=True)
        return
    if args.steps:
        with tempfile.TemporaryDirectory() as folder:
            for name in args.workload or ["mlp", "reinforce", "lstm"]:
                title, source = WORKLOADS[name]
                costs = step_costs(name, source, folder, args.repeat * 4, 20 if name == "lstm" else 40, args.floor)
                plain = costs["plain"]
                print(f"\n{title}, one step, CPU time, median of {args.repeat * 4} blocks:")
                for config, seconds in costs.items():
                    print(f"  {config:14} {seconds * 1e3:8.3f} ms {seconds / plain:6.2f}x", flush=True)
        return
    import compileall

    for checkout in (HERE, args.before) if args.before else (HERE,):  # as pip does when it installs gradviz
        compileall.compile_dir(os.path.join(os.path.abspath(checkout), "gradviz"), quiet=1)
    with tempfile.TemporaryDirectory() as folder:
        for name in args.workload or ["mlp", "reinforce", "lstm"]:
            title, source = WORKLOADS[name]
            figures, sizes, full = measure(name, source, folder, args.repeat, configs,
                                           os.path.abspath(args.before) if args.before else None)
            plain = figures["plain"]
            print(f"\n{title}: plain {plain[0]:.2f} s, {plain[1] / mib:.0f} MiB; report.json "
                  f"{sizes['report.json'] / mib:.2f} MiB, report.html {sizes['report.html'] / mib:.2f} MiB; "
                  f"{len(full)} iterations traced in full")
            print(f"  {'':14} {'wall':>8} {'ratio':>7} {'CPU':>8} {'ratio':>7} {'peak RSS':>9} {'ratio':>7} "
                  f"{'full-iteration step':>20}")
            for config in configs:
                wall, rss, step, cpu = figures[config]
                print(f"  {config:14} {wall:7.2f}s {wall / plain[0]:6.2f}x {cpu:7.2f}s {cpu / plain[3]:6.2f}x "
                      f"{rss / mib:8.0f}M {rss / plain[1]:6.2f}x {step * 1e3:9.2f} ms {step / plain[2]:5.2f}x",
                      flush=True)


if __name__ == "__main__":
    main()
