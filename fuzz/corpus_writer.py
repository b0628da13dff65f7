"""Writes a fuzz target's seed corpus: shared by the make_*_corpus.py scripts."""

import os
import sys


def write_corpus(out_dir, files, max_bytes=None):
    """Writes each (name, data) of `files` to out_dir/name, each at most `max_bytes` when
    given (so libFuzzer's -max_len lets it mutate a whole file)."""
    os.makedirs(out_dir, exist_ok=True)
    count = 0
    for name, data in files:
        assert max_bytes is None or len(data) <= max_bytes, name
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        count += 1
    print("wrote %d files to %s" % (count, out_dir), file=sys.stderr)
