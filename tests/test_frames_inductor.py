"""Code torch.compile's inductor writes to its cache folder (``/tmp/torchinductor_<user>/...``, or
TORCHINDUCTOR_CACHE_DIR) is torch's, not the user's: a location found from inside it is the user's line that
called it (``tracing/frames.py``)."""

import os
import tempfile

from gradviz.tracing import frames


def _compiled_call(path):
    """A ``call()`` whose code claims to live at ``path`` (as inductor's wrapper modules do), finding the user frame
    from inside, as an adapter does for each op the generated code runs."""
    space = {"frames": frames}
    exec(compile("def call():\n    return frames.location_of(frames.user_frame(1))\n", path, "exec"), space)
    return space["call"]


def test_a_location_found_inside_inductors_generated_code_is_the_users_line_that_ran_it(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    call = _compiled_call(os.path.join(tempfile.gettempdir(), "torchinductor_someone", "q7", "cq7abc.py"))
    where = call()  # this line
    assert (where.file, where.text) == (__file__, "where = call()  # this line")


def test_a_chosen_inductor_cache_folder_is_torchs_too_and_a_users_script_in_tmp_stays_the_users(monkeypatch, tmp_path):
    cache = tmp_path / "my_cache"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    generated = compile("x = 1\n", str(cache / "ab" / "cabc.py"), "exec")
    users = compile("x = 1\n", str(tmp_path / "train.py"), "exec")
    beside = compile("x = 1\n", os.path.join(tempfile.gettempdir(), "torchinductor.py"), "exec")
    assert frames.is_internal(generated) is True
    assert frames.is_internal(users) is False
    assert frames.is_internal(beside) is False  # a user's file named like the folder is still the user's
