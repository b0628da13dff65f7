"""tokenmill.train and tokenmill.export: the CLI's training run as a call, with a per-step
callback, early stops that leave a checkpoint to resume from, and an export the LLM loads."""

import json

import pytest

import tokenmill
from conftest import FIXTURES, ROOT, run_cli

TINY = dict(layers=1, hidden=32, heads=2, seq_len=32, batch=2, lr=3e-3, warmup_steps=1, eval_every=3,
            eval_batches=1, seed=5, checkpoint_minutes=0)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    text = (ROOT.parent / "shared" / "data" / "corpus" / "tinyshakespeare.txt")
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    if text.is_file():
        corpus.write_text(text.read_text()[:20000])
    else:  # a checkout without the shared data beside it
        corpus.write_text("To be, or not to be, that is the question.\n" * 400)
    data = tmp_path_factory.mktemp("data")
    run_cli("prepare", "-m", str(FIXTURES / "hf" / "smollm_chat"), "--input", str(corpus), "--out", str(data))
    return data


def losses(run_dir):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [(m["step"], m["loss"]) for m in map(json.loads, lines) if "loss" in m and "val_loss" not in m]


def test_a_run_reports_each_step_and_matches_the_clis(dataset, tmp_path, capsys):
    steps, evals = [], []
    summary = tokenmill.train(dataset, tmp_path / "py", steps=6, callback=steps.append, on_eval=evals.append,
                              **TINY)
    assert [m["step"] for m in steps] == list(range(1, 7))
    assert all(m["loss"] > 0 and m["tokens_per_second"] > 0 for m in steps)
    assert [e["step"] for e in evals] == [0, 3, 6]
    assert summary["last_step"] == 6 and not summary["stopped_early"]
    assert summary["checkpoint"].endswith(".tmckpt")
    printed = capsys.readouterr().out
    assert "step     6/6" in printed and "== summary ==" in printed
    cli_args = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    run_cli("train", "--data", str(dataset), "--out", str(tmp_path / "cli"), "--steps", "6", *cli_args)
    assert [s for s, _ in losses(tmp_path / "py")] == list(range(1, 7))
    assert losses(tmp_path / "py") == losses(tmp_path / "cli")  # the same run, bit for bit
    assert [m["loss"] for m in steps] == [loss for _, loss in losses(tmp_path / "cli")]


def test_a_callback_returning_false_stops_with_a_checkpoint_that_resumes(dataset, tmp_path):
    summary = tokenmill.train(dataset, tmp_path, steps=6, callback=lambda m: m["step"] < 2, verbose=False, **TINY)
    assert summary["stopped_early"] and summary["last_step"] == 2
    resumed = tokenmill.train(dataset, tmp_path, steps=6, resume=True, verbose=False, **TINY)
    assert resumed["first_step"] == 3 and resumed["last_step"] == 6


def test_an_exception_in_a_callback_ends_the_run_and_is_raised(dataset, tmp_path):
    def fail_at_two(metrics):
        if metrics["step"] == 2:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        tokenmill.train(dataset, tmp_path, steps=6, callback=fail_at_two, verbose=False, **TINY)
    assert any(p.suffix == ".tmckpt" for p in (tmp_path / "checkpoints").iterdir())


def test_export_writes_a_model_the_llm_loads(dataset, tmp_path):
    tokenmill.train(dataset, tmp_path / "run", steps=3, verbose=False, **TINY)
    checkpoint = tokenmill.export(tmp_path / "run", tmp_path / "model", dtype="f32")
    assert checkpoint.endswith(".tmckpt")
    llm = tokenmill.LLM(str(tmp_path / "model"), device="cpu", kv_cache_memory=16 << 20)
    out = llm.generate("ROMEO:", tokenmill.SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))[0]
    assert len(out.outputs[0].token_ids) == 8
    llm.close()


def test_bad_options_are_refused(dataset, tmp_path):
    with pytest.raises(TypeError, match="unexpected option 'stpes'"):
        tokenmill.train(dataset, tmp_path, stpes=3)
    with pytest.raises(TypeError, match="'steps'"):
        tokenmill.train(dataset, tmp_path, steps="many")
    with pytest.raises(tokenmill.TokenmillError, match="precision"):
        tokenmill.train(dataset, tmp_path, precision="fp8", verbose=False, **TINY)
    with pytest.raises(tokenmill.TokenmillError, match="dtype"):
        tokenmill.export(tmp_path, tmp_path / "x", dtype="int3")
    assert "lora_rank" in tokenmill.train_options() and "from_model" in tokenmill.train_options()
