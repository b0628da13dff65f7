"""The engine under Python's threads and signals: two threads generating at once, Ctrl-C in
the middle of a long generation, and a thousand calls without growing memory."""

import os
import signal
import threading
import time

import pytest

import tokenmill
from conftest import settled

PROMPTS = ["The three primary colors are", "Once upon a time, in a small village,"]


def test_two_threads_generate_at_once_and_get_their_solo_tokens(smollm2):
    params = tokenmill.SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    solo = [smollm2.generate(p, params)[0].outputs[0].token_ids for p in PROMPTS]
    results = [None, None]
    both_running = threading.Barrier(2)

    def worker(i):
        both_running.wait()
        results[i] = [smollm2.generate(PROMPTS[i], params)[0].outputs[0].token_ids for _ in range(3)]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    start = settled(smollm2)["steps"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [[solo[0]] * 3, [solo[1]] * 3]
    # the GIL was released while waiting: both threads' requests shared steps
    assert settled(smollm2)["steps"] - start < 6 * 40


def test_ctrl_c_during_a_long_generation_returns_promptly_and_the_llm_stays_usable(smollm2):
    long = tokenmill.SamplingParams(temperature=0, max_tokens=4000, ignore_eos=True)
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(1.0, interrupt)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            smollm2.generate([PROMPTS[0], PROMPTS[1]], long)
        raised = time.monotonic()
    finally:
        timer.cancel()
    assert raised - sent[0] < 1.0
    stats = settled(smollm2)
    assert stats["running"] == 0 and stats["waiting"] == 0 and stats["kv_blocks_used"] == 0
    out = smollm2.generate(PROMPTS[0], tokenmill.SamplingParams(temperature=0, max_tokens=8))[0]
    assert len(out.outputs[0].token_ids) == 8


def rss_bytes():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_thousand_generate_calls_keep_memory_flat(tiny):
    params = tokenmill.SamplingParams(temperature=0.8, seed=1, max_tokens=4, logprobs=2)
    prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    for _ in range(100):  # warm: the engine's buffers, the allocator's pools
        tiny.generate(prompt, params)
    before = rss_bytes()
    for i in range(1000):
        out = tiny.generate(prompt, params)
        assert len(out[0].outputs[0].token_ids) == 4
    grown = rss_bytes() - before
    assert grown < 8 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 1000 calls"


def test_more_prompts_than_the_engine_queues_at_once_all_complete():
    from conftest import FIXTURES
    llm = tokenmill.LLM(str(FIXTURES / "hf" / "smollm_chat"), device="cpu", max_waiting=3, max_running=2)
    params = tokenmill.SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
    prompts = [[1, 2, 3, 4 + i] for i in range(11)]
    batch = llm.generate(prompts, params)
    assert [o.outputs[0].token_ids for o in batch] == [llm.generate(p, params)[0].outputs[0].token_ids
                                                       for p in prompts]
    llm.close()


def test_close_waits_for_the_calls_in_flight(smollm2_path):
    llm = tokenmill.LLM(smollm2_path, device="cpu", context=1024, kv_cache_memory=64 << 20)
    params = tokenmill.SamplingParams(temperature=0, max_tokens=200, ignore_eos=True)
    result = []
    worker = threading.Thread(target=lambda: result.append(llm.generate(PROMPTS[0], params)[0]))
    worker.start()
    time.sleep(0.2)
    llm.close()  # the call in flight keeps the engine until it is done
    worker.join()
    assert len(result[0].outputs[0].token_ids) == 200
    with pytest.raises(tokenmill.TokenmillError, match="closed"):
        llm.generate(PROMPTS[0], params)
