"""The environment `pip install 'mindwatch[mindspore]'` gives runs a user's own tensor code."""

from __future__ import annotations

import json
import os
import subprocess
import sys

USER_CODE = """
import json
import mindspore as ms, numpy as np
ms.set_device("CPU")
ms.set_context(mode=ms.PYNATIVE_MODE)
a = ms.Tensor(np.ones(2, np.float32))
product = (a * a).asnumpy().tolist()
total = float(sum([a.sum(), a.sum()]))  # starts with 0 + Tensor
print(json.dumps({"product": product, "total": total, "numpy": np.__version__}))
"""


def test_tensor_arithmetic_works_with_the_numpy_installed() -> None:
    """MindSpore's CPU wheels are built against NumPy 1: under NumPy 2 `Tensor * Tensor`
    raises SystemError (the `mindspore` extra pins numpy<2 for this)."""
    done = subprocess.run(
        [sys.executable, "-c", USER_CODE],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GLOG_v": "3"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"product": [1.0, 1.0], "total": 4.0, "numpy": result["numpy"]}
    assert result["numpy"].startswith("1.")
