"""Run inside the MindFormers 1.9 venv: build callbacks from a MindFormers config that
names MindWatchMonitor, through MindFormers' own registry, and train with them."""

import json
import sys
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.train import Model

out = Path(sys.argv[1])
ms.set_context(mode=ms.GRAPH_MODE)
ms.set_device("CPU")

from mindformers.core.callback import build_callback  # noqa: E402

from mindwatch.mindspore.mindformers import MindWatchMonitor, register  # noqa: E402

assert register() is True
callbacks = build_callback(
    [
        {
            "type": "MindWatchMonitor",
            "logdir": str(out / "run"),
            "print_every": 0,
            "per_print_times": 1,
        }
    ]
)
(monitor,) = callbacks
assert isinstance(monitor, MindWatchMonitor), type(monitor)


class Source:
    def __len__(self):
        return 30 * 8

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        x = rng.normal(size=4).astype(np.float32)
        return x, np.array([x.sum()], dtype=np.float32)


net = nn.Dense(4, 1)
model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.01))
data = ms.dataset.GeneratorDataset(Source(), ["x", "y"], shuffle=False).batch(8)
model.train(1, data, callbacks=callbacks, dataset_sink_mode=False)
print(json.dumps({"ok": True, "mindformers": __import__("mindformers").__version__}))
