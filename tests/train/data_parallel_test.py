"""Data-parallel `tokenmill train` under Open MPI's mpirun, against one process.

    python3 tests/train/data_parallel_test.py BUILD/tokenmill MPIRUN tests/fixtures [--cuda]

From scratch on data/tinyshakespeare.txt (a slice, tokenized with hf/smollm_chat's
tokenizer), every run a global batch of 8 sequences over 14 steps:
  1. 1 process x --batch 4 --grad-accum 2 is the reference; 2 ranks x --batch 4, 4 ranks x
     --batch 2 and 1 process x --batch 2 --grad-accum 4 equal it: every step's loss and
     gradient norm within 1e-5 relative, and every final weight tensor within 1e-5 relative
     in norm (||a - b|| / ||b||; elementwise, AdamW's division by sqrt(v) turns the last-bit
     differences of a near-zero gradient into differences of up to lr, so the largest
     element difference is printed, not bounded). 2 ranks with --zero 1 (the AdamW state
     sharded) likewise.
  2. A checkpoint resumes across world sizes: the 2-rank run's step-7 checkpoint on 1 process
     (--grad-accum 2), the 1-process run's on 4 ranks, and the ZeRO-1 run's on 4 ranks with
     ZeRO-1, continue with the losses of the uninterrupted reference.
  3. Faults: `kill -9` of rank 1 mid-run makes mpirun and every rank exit non-zero within 60 s
     with rank 1 named, and the last checkpoint loads (export); a stalled rank (SIGSTOP) makes
     the others stop at --collective-timeout naming the collective; a diverging loss stops
     every rank with the divergence message.
  4. With --cuda (a build whose --device cuda is the CUDA emulation): 2 ranks on the emulated
     GPU 0 sum their gradients with NCCL (emulated over MPI), and with --zero 1 reduce-scatter
     and all-gather them with NCCL, and equal 1 process on it (a shorter run: the emulation is
     slow).
Needs only the standard library. Exits 1 with the first failure.
"""

import array
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

STEPS = 14
TOLERANCE = 1e-5


def fail(message):
    sys.exit(f"FAIL: {message}")


def run(command, timeout=300):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if result.returncode != 0:
        fail(f"{' '.join(command)} exited {result.returncode}:\n{result.stdout}")
    return result.stdout


class Job:
    def __init__(self, binary, mpirun, data, work):
        self.binary, self.mpirun, self.data, self.work = binary, mpirun, data, work

    def command(self, ranks, run_dir, *flags, steps=STEPS, lr="3e-3", device="cpu"):
        launch = [self.binary] if ranks == 1 else [self.mpirun, "--oversubscribe", "-np", str(ranks), self.binary]
        return [*launch, "-t", "1", "train", "--data", self.data, "--out", run_dir, "--device", device,
                "--layers", "2", "--hidden", "32", "--heads", "4", "--kv-heads", "2", "--seq-len", "32",
                "--steps", str(steps), "--lr", lr, "--warmup-steps", "2", "--eval-every", "0",
                "--sample-tokens", "1", "--checkpoint-minutes", "0", "--seed", "7", *flags]

    def train(self, name, ranks, *flags):
        run_dir = os.path.join(self.work, name)
        output = run(self.command(ranks, run_dir, "--checkpoint-every", "7", "--keep-checkpoints", "3", *flags))
        return run_dir, output


def metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return {m["step"]: m for m in (json.loads(line) for line in f) if "loss" in m}


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def compare_steps(name, got, want, steps):
    worst = 0.0
    for step in steps:
        if step not in got:
            fail(f"{name}: no metrics for step {step}")
        for key in ("loss", "grad_norm"):
            rel = relative(got[step][key], want[step][key])
            worst = max(worst, rel)
            if rel > TOLERANCE:
                fail(f"{name}: step {step} {key} {got[step][key]!r}, reference {want[step][key]!r} "
                     f"(relative {rel:.3g} > {TOLERANCE})")
    return worst


def safetensors_f32(path):
    """{name: array('f')} of an F32 safetensors file."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        body = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            fail(f"{path}: {name} is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        tensors[name] = array.array("f", body[begin:end])
    return tensors


def final_weights(binary, run_dir, checkpoint):
    out = run_dir + "_export"
    run([binary, "export", "--checkpoint", os.path.join(run_dir, "checkpoints", checkpoint), "--out", out,
         "--dtype", "f32"])
    return safetensors_f32(os.path.join(out, "model.safetensors"))


def compare_weights(name, got, want):
    """(worst norm-relative difference of a tensor, largest element difference)."""
    worst, largest = 0.0, 0.0
    for tensor, values in want.items():
        diff = math.sqrt(sum((a - b) ** 2 for a, b in zip(got[tensor], values)))
        norm = math.sqrt(sum(v * v for v in values))
        worst = max(worst, diff / norm)
        largest = max(largest, max(abs(a - b) for a, b in zip(got[tensor], values)))
        if diff > TOLERANCE * norm:
            fail(f"{name}: final {tensor} differs by {diff / norm:.3g} relative (norm of the difference)")
    return worst, largest


def rank_pid(mpirun_pid, rank):
    """The pid of `rank` among mpirun's children (from OMPI_COMM_WORLD_RANK), or None."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if parent == mpirun_pid and f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            return int(pid)
    return None


def start_and_wait_for_step(job, run_dir, step, *flags):
    """Starts a long 2-rank run; returns (process, rank 1's pid) once metrics.jsonl has `step`."""
    process = subprocess.Popen(job.command(2, run_dir, "--checkpoint-every", "3", *flags, steps=100000),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            fail(f"the run ended early ({process.returncode}):\n{process.stdout.read()}")
        try:
            if step in metrics(run_dir):
                pid = rank_pid(process.pid, 1)
                if pid:
                    return process, pid
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    process.kill()
    fail(f"{run_dir}: no step {step} within 120 s")


def expect_job_stops(process, within, *needles):
    start = time.monotonic()
    try:
        output, _ = process.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        process.kill()
        fail(f"the job did not stop within {within} s")
    seconds = time.monotonic() - start
    if process.returncode == 0:
        fail(f"the job exited 0:\n{output}")
    for needle in needles:
        if needle not in output:
            fail(f"the job's output lacks {needle!r}:\n{output}")
    return seconds


def main():
    if len(sys.argv) not in (4, 5) or sys.argv[4:] not in ([], ["--cuda"]):
        sys.exit(__doc__)
    binary, mpirun, fixtures = os.path.abspath(sys.argv[1]), sys.argv[2], os.path.abspath(sys.argv[3])
    corpus = os.path.join(os.path.dirname(fixtures), "..", "data", "tinyshakespeare.txt")
    with tempfile.TemporaryDirectory() as work:
        text = os.path.join(work, "text.txt")
        with open(corpus) as f, open(text, "w") as out:
            out.write(f.read(40000))
        data = os.path.join(work, "data")
        run([binary, "prepare", "-m", os.path.join(fixtures, "hf", "smollm_chat"), "--input", text, "--out", data])
        job = Job(binary, mpirun, data, work)

        # 1. The same global batch, split four ways.
        reference, output = job.train("one_4x2", 1, "--batch", "4", "--grad-accum", "2")
        want = metrics(reference)
        want_weights = final_weights(binary, reference, f"step_{STEPS:08d}.tmckpt")
        for name, ranks, flags in [("two_ranks_4", 2, ["--batch", "4"]), ("four_ranks_2", 4, ["--batch", "2"]),
                                   ("one_2x4", 1, ["--batch", "2", "--grad-accum", "4"]),
                                   ("zero_two_ranks_4", 2, ["--batch", "4", "--zero", "1"])]:
            run_dir, output = job.train(name, ranks, *flags)
            if ranks > 1 and f"x {ranks} rank(s)" not in output:
                fail(f"{name}: the global batch line is missing:\n{output}")
            steps = compare_steps(name, metrics(run_dir), want, range(1, STEPS + 1))
            weights, largest = compare_weights(name, final_weights(binary, run_dir, f"step_{STEPS:08d}.tmckpt"),
                                               want_weights)
            print(f"{name}: worst relative difference to one process: steps {steps:.3g}, final weights {weights:.3g} "
                  f"in norm (largest element difference {largest:.3g})")

        # 2. Resume across world sizes, from step 7 (the later checkpoint removed).
        for name, source, ranks, flags in [("resume_2_to_1", "two_ranks_4", 1, ["--batch", "4", "--grad-accum", "2"]),
                                           ("resume_1_to_4", "one_4x2", 4, ["--batch", "2"]),
                                           ("resume_zero_2_to_4", "zero_two_ranks_4", 4, ["--batch", "2", "--zero", "1"])]:
            run_dir = os.path.join(work, name)
            subprocess.run(["cp", "-r", os.path.join(work, source), run_dir], check=True)
            os.remove(os.path.join(run_dir, "checkpoints", f"step_{STEPS:08d}.tmckpt"))
            output = run(job.command(ranks, run_dir, "--resume", "--checkpoint-every", "7", *flags))
            if "(step 7; saved by" not in output:
                fail(f"{name}: did not resume from step 7:\n{output}")
            worst = compare_steps(name, metrics(run_dir), want, range(8, STEPS + 1))
            print(f"{name}: steps 8..{STEPS} worst relative difference to the uninterrupted run {worst:.3g}")

        # 3. Faults.
        run_dir = os.path.join(work, "killed")
        process, victim = start_and_wait_for_step(job, run_dir, 4)
        os.kill(victim, signal.SIGKILL)
        seconds = expect_job_stops(process, 60, "process rank 1")
        newest = sorted(n for n in os.listdir(os.path.join(run_dir, "checkpoints")) if n.endswith(".tmckpt"))[-1]
        final_weights(binary, run_dir, newest)
        print(f"kill -9 of rank 1: the job stopped in {seconds:.1f} s; {newest} loads")

        run_dir = os.path.join(work, "stalled")
        process, victim = start_and_wait_for_step(job, run_dir, 2, "--collective-timeout", "5")
        os.kill(victim, signal.SIGSTOP)
        try:
            seconds = expect_job_stops(process, 60, "did not complete within 5 s", "rank 0")
        finally:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
        print(f"SIGSTOP of rank 1: the job stopped in {seconds:.1f} s (timeout 5 s)")

        result = subprocess.run(job.command(2, os.path.join(work, "diverged"), "--max-grad-norm", "0", lr="1e6"),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        if result.returncode == 0 or "training diverged" not in result.stdout:
            fail(f"a diverging 2-rank run exited {result.returncode}:\n{result.stdout}")
        print("a diverging loss stopped both ranks with the divergence message")

        if sys.argv[4:] == ["--cuda"]:
            steps, flags = 4, ["--checkpoint-every", "4"]
            one = os.path.join(work, "cuda_one")
            run(job.command(1, one, "--batch", "2", "--grad-accum", "2", *flags, steps=steps, device="cuda"))
            two = os.path.join(work, "cuda_two")
            # Both ranks on GPU 0 (the emulation has one; --device cuda would give rank 1 GPU 1).
            output = run(job.command(2, two, "--batch", "2", *flags, steps=steps, device="cuda:0"))
            if "by NCCL" not in output:
                fail(f"the 2-rank run on --device cuda did not sum with NCCL:\n{output}")
            name = f"step_{steps:08d}.tmckpt"
            reference = final_weights(binary, one, name)
            for label, run_dir in [("cuda_two", two), ("cuda_zero_two", os.path.join(work, "cuda_zero_two"))]:
                if label == "cuda_zero_two":
                    # ZeRO-1 on the GPU: NCCL's reduce-scatter and all-gather, staged in device memory;
                    # a 10 KiB bucket makes many rounds and a short last part.
                    output = run(job.command(2, run_dir, "--batch", "2", "--zero", "1", "--bucket-mb", "0.01",
                                             *flags, steps=steps, device="cuda:0"))
                    if "all-gathered by NCCL" not in output:
                        fail(f"the 2-rank ZeRO-1 run on --device cuda did not use NCCL:\n{output}")
                worst = compare_steps(label, metrics(run_dir), metrics(one), range(1, steps + 1))
                weights, largest = compare_weights(label, final_weights(binary, run_dir, name), reference)
                print(f"--device cuda, 2 ranks with NCCL{' and ZeRO-1' if 'zero' in label else ''} vs 1 process: "
                      f"steps {worst:.3g}, final weights {weights:.3g} in norm (largest element difference "
                      f"{largest:.3g})")
    print("OK")


if __name__ == "__main__":
    main()
