"""A trial that fails for good is recorded with its exception in one line (`error` in the
trials table, and the sweep's message): `Type: message`, also when the message has several
lines, as a model's own shape check often does."""

from __future__ import annotations

from types import SimpleNamespace

from mutransfer.sweep.run.callbacks import error_reason

# Tune's error.txt as it holds a trial's failures: Ray's wrapping, the traceback, then the
# exception (abridged from a real sweep whose model factory raised in its forward)
FRAMES = """\x1b[36mray::ImplicitFunc.train()\x1b[39m (pid=32561, ip=192.0.2.2, repr=tune_trainable)
  File "/venv/lib/python3.11/site-packages/ray/tune/trainable/trainable.py", line 329, in train
    raise skipped from exception_cause(skipped)
  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1789, in _call_impl
    return forward_call(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/tmp/probeD/badfac.py", line 101, in forward
    raise ValueError("shape mismatch in block 0:\\n  expected (2, 16)\\n  got (2, 8)")
"""


def reason(tmp_path, text: str) -> str:
    path = tmp_path / "error.txt"
    path.write_text(text)
    return error_reason(SimpleNamespace(error_file=str(path)))


def test_a_message_of_several_lines_keeps_its_type_and_first_line(tmp_path):
    text = ("Failure # 1 (occurred at 2026-11-29_11-48-17)\n" + FRAMES +
            "ValueError: shape mismatch in block 0:\n  expected (2, 16)\n  got (2, 8)\n")
    assert reason(tmp_path, text) == \
        "ValueError: shape mismatch in block 0: expected (2, 16) got (2, 8)"


def test_the_last_attempts_failure_is_the_one_recorded(tmp_path):
    text = ("Failure # 1 (occurred at 2026-11-29_11-48-17)\n" + FRAMES +
            "RuntimeError: first attempt\n" +
            "Failure # 2 (occurred at 2026-11-29_11-48-27)\n" + FRAMES +
            "RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
    assert reason(tmp_path, text) == ("RuntimeError: CUDA error: an illegal memory access was "
                                      "encountered Compile with `TORCH_USE_CUDA_DSA` to enable "
                                      "device-side assertions.")


def test_a_one_line_exception_and_a_trace_without_frames_read_as_before(tmp_path):
    one = "Failure # 1 (occurred at 2026-11-29_11-48-17)\n" + FRAMES + "KeyError: 'w'\n"
    assert reason(tmp_path, one) == "KeyError: 'w'"
    died = ("Failure # 1 (occurred at 2026-11-29_11-48-17)\n"
            "The actor died unexpectedly before finishing this task.\n\tclass_name: ImplicitFunc\n"
            "The actor is dead because its worker process has died.\n")
    assert reason(tmp_path, died) == "The actor is dead because its worker process has died."
    assert reason(tmp_path, "") == "unknown error (see Ray's logs)"
