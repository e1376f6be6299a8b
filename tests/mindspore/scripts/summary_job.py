"""A real Model.train recorded by MindSpore's own SummaryCollector and summary ops.

Usage: python summary_job.py SUMMARY_DIR LOSSES_JSON

Writes MindSpore's *_MS and *_lineage files into SUMMARY_DIR (SummaryCollector starts
its own writer process, so this runs in a subprocess of the test) and, independently,
the loss of every step as the network returned it into LOSSES_JSON.
"""

from __future__ import annotations

import json
import sys

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
from mindspore import nn, ops
from mindspore.train import Model, SummaryCollector

ms.set_device("CPU")
ms.set_context(mode=ms.GRAPH_MODE)
ms.set_seed(0)


class Net(nn.Cell):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, pad_mode="same")
        self.flat = nn.Flatten()
        self.fc = nn.Dense(4 * 8 * 8, 10)
        self.image = ops.ImageSummary()
        self.histogram = ops.HistogramSummary()
        self.scalar = ops.ScalarSummary()
        self.tensor = ops.TensorSummary()

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        self.image("input", x)
        y = self.conv(x)
        self.histogram("conv_out", y)
        self.histogram("log_input", ops.log(x - 0.5))  # NaN wherever x < 0.5
        y = self.fc(self.flat(y))
        self.scalar("mean_logit", y.mean())
        self.tensor("logits", y[0])
        return y


def batches():  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    for i in range(96):
        yield rng.random((3, 8, 8), dtype=np.float32), np.array(i % 10, dtype=np.int32)


class Losses(ms.train.Callback):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.losses: dict[int, float] = {}

    def step_end(self, run_context) -> None:  # type: ignore[no-untyped-def]
        cb = run_context.original_args()
        self.losses[int(cb.cur_step_num)] = float(cb.net_outputs.asnumpy())


def main() -> None:
    summary_dir, losses_path = sys.argv[1], sys.argv[2]
    data = ds.GeneratorDataset(batches, ["image", "label"], shuffle=False).batch(8)
    net = Net()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.01, 0.9))
    collector = SummaryCollector(
        summary_dir,
        collect_freq=2,
        collect_specified_data={
            "collect_graph": True,
            "histogram_regular": "conv|fc",
            "collect_input_data": True,
        },
    )
    losses = Losses()
    model.train(2, data, callbacks=[collector, losses], dataset_sink_mode=False)
    with open(losses_path, "w", encoding="utf-8") as handle:
        json.dump(losses.losses, handle)


if __name__ == "__main__":
    main()
