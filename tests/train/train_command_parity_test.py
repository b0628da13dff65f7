"""`tokenmill train`, the command end to end, against PyTorch training loops.

    python3 tests/train/train_command_parity_test.py BUILD/tokenmill tests/fixtures [MPIRUN]

Prepares tests/fixtures/train_command/conversations.jsonl (chat records: loss masks) with
`tokenmill prepare` for hf/smollm_chat, then runs `tokenmill train` for every case and split
of tests/fixtures/train_command/expected.json (full fine-tuning fp32 as --batch 8, 4 x 2 and
2 x 4 micro-batches, LoRA, bf16) and compares every step's loss and gradient norm in
metrics.jsonl with the PyTorch references there, within their tolerances (relative, per
step). Prints the worst relative difference per case and reference; exits 1 naming the
case, split, step and values on a mismatch. With MPIRUN (Open MPI's mpirun), every case also
runs data-parallel (DATA_PARALLEL: 2 and 4 ranks, one thread each, splitting the same global
batch of 8 sequences, with and without ZeRO-1) against the same references: the chat data's loss masks make the
ranks' micro-batches score different numbers of targets. Needs only the standard library (the
references were computed by make_train_command_golden.py, see its README).
"""

import json
import os
import subprocess
import sys
import tempfile


# Data-parallel splits of each case's global batch: (ranks, flags).
DATA_PARALLEL = {
    "full_fp32": [(2, ["--batch", "4"]), (4, ["--batch", "2"]), (2, ["--batch", "2", "--grad-accum", "2"])],
    "lora": [(2, ["--batch", "4"]), (2, ["--batch", "4", "--zero", "1"])],
    "bf16": [(2, ["--batch", "2", "--grad-accum", "2"]), (4, ["--batch", "2", "--zero", "1"])],
}


def run(command, *args):
    """Runs tokenmill (command: [binary] or an mpirun line ending in it); on failure exits with its output."""
    result = subprocess.run([*command, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)} {' '.join(args)} exited {result.returncode}:\n{result.stdout}")


def step_metrics(run_dir, steps):
    """(loss, grad_norm) of steps 1..steps from metrics.jsonl."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    by_step = {m["step"]: m for m in lines if "loss" in m}
    if sorted(by_step) != list(range(1, steps + 1)):
        sys.exit(f"FAIL: {run_dir}/metrics.jsonl has steps {sorted(by_step)}, want 1..{steps}")
    return {k: [by_step[s][k] for s in range(1, steps + 1)] for k in ("loss", "grad_norm")}


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    binary, fixtures = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    mpirun = sys.argv[3] if len(sys.argv) == 4 else None
    with open(os.path.join(fixtures, "train_command", "expected.json")) as f:
        expected = json.load(f)
    model = os.path.join(fixtures, expected["model"])
    failures = []
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "data")
        run([binary], "prepare", "-m", model, "--input", os.path.join(fixtures, expected["data"]), "--out", data,
            *expected["prepare_flags"])
        with open(os.path.join(data, "meta.json")) as f:
            train = json.load(f)["train"]
        prepared = {"train_tokens": train["tokens"], "train_scored_tokens": train["scored_tokens"]}
        for key, value in prepared.items():
            if value != expected[key]:
                sys.exit(f"FAIL: prepare wrote {key} {value}, the references were computed for {expected[key]}: "
                         "the data changed (rerun make_train_command_golden.py if that is intended)")
        for case in expected["cases"]:
            worst = {r["name"]: {"loss": 0.0, "grad_norm": 0.0} for r in case["references"]}
            launches = [([binary], split) for split in case["splits"]]
            if mpirun:
                launches += [([mpirun, "--oversubscribe", "-np", str(ranks), binary, "-t", "1"], split)
                             for ranks, split in DATA_PARALLEL[case["name"]]]
            for i, (command, split) in enumerate(launches):
                flags = case["flags"] + split
                run_dir = os.path.join(work, f"{case['name']}_{i}")
                run(command, "train", "--data", data, "--out", run_dir, "--from", model, *expected["common_flags"],
                    *flags)
                if command[0] == mpirun:
                    flags = [f"({command[3]} ranks)", *flags]
                got = step_metrics(run_dir, expected["steps"])
                for ref in case["references"]:
                    for key in ("loss", "grad_norm"):
                        tolerance = ref["tolerance"][key]
                        for step, (g, want) in enumerate(zip(got[key], ref[key]), start=1):
                            rel = abs(g - want) / abs(want)
                            worst[ref["name"]][key] = max(worst[ref["name"]][key], rel)
                            if rel > tolerance:
                                failures.append(f"{case['name']} [{' '.join(flags)}] vs {ref['name']}: step {step} "
                                                f"{key} {g!r}, reference {want!r}: relative difference {rel:.3g} > "
                                                f"tolerance {tolerance:.3g}")
            for ref in case["references"]:
                w, tol = worst[ref["name"]], ref["tolerance"]
                print(f"{case['name']} vs {ref['name']} ({len(launches)} run(s)): worst relative difference "
                      f"loss {w['loss']:.3g} (tolerance {tol['loss']:.3g}), grad_norm {w['grad_norm']:.3g} "
                      f"(tolerance {tol['grad_norm']:.3g})")
    if failures:
        print("FAIL: `tokenmill train` differs from the PyTorch references (tests/fixtures/train_command/README.md):")
        for line in failures:
            print("  " + line)
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
