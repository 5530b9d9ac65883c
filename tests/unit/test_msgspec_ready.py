"""The typed forms are made ready before threads share them (``schema.msgspec_ready``).

msgspec 0.22 crashes the process when two threads are first to ``convert`` into a new Struct
type at once, so the race runs in a child process: a crash is its exit status, not this
worker's. The child clears the typed-form caches each round, so every round's first converts
meet fresh types, from four threads switching as often as the interpreter allows.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

_RACE = textwrap.dedent("""
    import sys, threading
    from kubewire.schema import go_decode_typed, validate_typed
    sys.setswitchinterval(1e-6)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    for _ in range(ROUNDS):
        validate_typed._typed.cache_clear()
        go_decode_typed._typed.cache_clear()
        barrier = threading.Barrier(4)
        answers = []
        def first_use():
            barrier.wait()
            answers.append((validate_typed.checks_cleanly("v1", "Pod", pod),
                            go_decode_typed.decodes_cleanly("v1", "Pod", pod)))
        threads = [threading.Thread(target=first_use) for _ in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        assert answers == [(True, True)] * 4, answers
    print("clean")
""")


def test_threads_first_to_use_a_typed_form_at_once_do_not_crash() -> None:
    done = subprocess.run([sys.executable, "-c", _RACE.replace("ROUNDS", "20")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "clean"
