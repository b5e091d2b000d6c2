"""pytest plugin: GRACE_DIAG_PAD=1 forces Inductor's mm shape padding, 0 turns it off (pad_mm's benchmark otherwise decides)."""
import os


def pytest_configure(config):
    import torch._inductor.config as c
    if os.environ.get("GRACE_DIAG_PAD") == "1":
        c.force_shape_pad = True
    elif os.environ.get("GRACE_DIAG_PAD") == "0":
        c.shape_padding = False
