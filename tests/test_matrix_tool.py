"""tools/torch_matrix.py runs each script in a temporary folder of its own: what torchrun and mp.spawn leave in
TMPDIR (pytorch-errorfile pickles, torchelastic's log folders) goes with it, and inductor's cache stays put."""

import getpass
import importlib.util
import json
import os
import stat
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _matrix():
    spec = importlib.util.spec_from_file_location("torch_matrix", ROOT / "tools" / "torch_matrix.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_scripts_run_leaves_nothing_in_the_temporary_folder_it_was_given(tmp_path):
    # a stand-in for the venv's python: it leaves what a DDP sample's ranks leave, and says where
    seen = tmp_path / "seen.json"
    python = tmp_path / "python"
    python.write_text(f"""#!{sys.executable}
import json, os, tempfile
folder = tempfile.gettempdir()
open(os.path.join(folder, "pytorch-errorfile-abc.pickle"), "wb").close()
os.mkdir(os.path.join(folder, "torchelastic_x1"))
json.dump({{"tmp": folder, "inductor": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}}, open({str(seen)!r}, "w"))
print(json.dumps({{"diagnostics": [{{"code": "none-grad", "location": {{"line": 3}}}}], "graphs": [1, 2]}}))
""")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    outer = tmp_path / "outer"
    outer.mkdir()
    env = dict(os.environ, TMPDIR=str(outer))
    facts = _matrix().sample_facts(python, ROOT / "samples" / "ddp_unused_parameters.py", env)
    assert facts["diagnostics"] == [["none-grad", 3]] and facts["graphs"] == 2
    where = json.loads(seen.read_text())
    assert where["tmp"] != str(outer) and os.path.basename(where["tmp"]).startswith("gradviz-matrix-")
    assert not os.path.exists(where["tmp"])  # removed, with the pickle and the log folder in it
    assert list(outer.iterdir()) == []
    assert where["inductor"].endswith(os.sep + "torchinductor_" + getpass.getuser())
    assert not where["inductor"].startswith(where["tmp"])
