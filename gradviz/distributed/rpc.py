"""``torch.distributed.rpc`` in a traced process: whether the process used it, and what the document must say
when nothing observed it.

The torch adapter observes RPC itself (``tracing/adapters/torch/rpc.py``: the calls a process serves, on the
agent's own threads, and ``dist_autograd.backward``) and lists what it cannot see. A process whose trace did not
watch real PyTorch (``--engine gradviz``) saw none of it: that is said here. Only the public ``init_rpc`` is
wrapped, to know that this process used RPC.
"""

import sys

RPC_HOW = "torch.distributed.rpc"


class RpcUse:
    """``start()`` before the traced code runs (wraps ``init_rpc`` when the module is imported already);
    ``stop()`` puts it back and returns whether RPC was started meanwhile."""

    def __init__(self):
        self.used = False
        self._module = self._original = None

    def start(self):
        module = sys.modules.get("torch.distributed.rpc")
        if module is None and "torch" in sys.modules:  # torch imported, its rpc package not yet (a torch build
            try:                                        # without it stays without)
                import torch.distributed.rpc as module
            except ImportError:
                module = None
        original = getattr(module, "init_rpc", None)
        if original is None:
            return self

        def init_rpc(*args, **kwargs):
            self.used = True
            return original(*args, **kwargs)

        self._module, self._original = module, original
        module.init_rpc = init_rpc
        return self

    def stop(self):
        if self._module is not None:
            self._module.init_rpc = self._original
            self._module = None
        return self.used


def note_unseen(doc):
    """Add the ``unseen`` entry for a process that started RPC while its trace did not watch real PyTorch."""
    if (doc.get("engine") or {}).get("name") == "torch":  # the torch adapter observed it, and said what it missed
        return
    doc.setdefault("unseen", []).append({
        "kind": "thread", "count": 1, "how": RPC_HOW, "location": None,
        "what": "RPC calls this process served for others (run on the RPC agent's own threads), and distributed "
                "autograd's backward (dist_autograd.backward)",
        "advice": "trace the script on real PyTorch (--engine torch or auto): its adapter observes served calls "
                  "and distributed backward"})
