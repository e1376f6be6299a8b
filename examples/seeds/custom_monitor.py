"""Seed 002, section 3.3: the ``CustomMonitor`` callback, recording with mindwatch's
``SummaryRecord`` so that its ``grad_norm`` curve shows in TensorBoard.

    python examples/seeds/custom_monitor.py --logdir runs/custom_monitor --epochs 2
    tensorboard --logdir runs

The class is the seed's text. The seed's page lost its quotes and ``=`` signs
(``self.summary_record SummaryRecord(log_dir)``); they are put back. Every line changed
beyond that is marked ``# adapted:`` with the reason. The seed leaves out the model and
the training call; ``main()`` supplies them: the demo's MLP on synthetic data, on CPU.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
from mindspore import nn, ops
from mindspore.train import Callback, Model

# adapted: the import. mindspore.train.summary.SummaryRecord writes MindInsight's *_MS
# files, which TensorBoard shows as empty; mindwatch's has the same API and writes
# TensorBoard's.
from mindwatch.mindspore import SummaryRecord, TrainOneStepWithGradNormCell
from mindwatch.mindspore.demo import make_dataset, make_network


# ---------------------------------------------------------------- seed 002, section 3.3
class CustomMonitor(Callback):
    def __init__(self, log_dir, model, dataset_size):
        super().__init__()
        self.summary_record = SummaryRecord(log_dir)
        self.model = model
        self.dataset_size = dataset_size

    def on_train_step_end(self, run_context):
        cb_params = run_context.original_args()
        step = cb_params.cur_step_num
        # 计算梯度范数
        # adapted: the gradient source. model.get_grads() is not a MindSpore API (Model
        # keeps no gradients); TrainOneStepWithGradNormCell(layer_norms=True) returns each
        # gradient's squared norm, so grads are the per-parameter gradient norms and the
        # seed's next line sums them into the global norm, as it meant to.
        grads = ops.sqrt(cb_params.net_outputs[2])
        grad_norm = sum(g.asnumpy() ** 2 for g in grads) ** 0.5
        self.summary_record.add_value("scalar", "grad_norm", grad_norm)
        self.summary_record.record(step)

    def on_train_end(self, run_context):
        self.summary_record.close()


# ---------------------------------------------------------------- end of the seed's text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--logdir", default="runs/custom_monitor")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    ms.set_device("CPU")
    ms.set_seed(0)
    dataset = make_dataset(640, 32, seed=0)
    net = make_network()
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    loss_net = nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"))
    # The train cell that also returns the gradient norms (the seed's source of grads).
    model = Model(TrainOneStepWithGradNormCell(loss_net, optimizer, layer_norms=True))
    monitor = CustomMonitor(args.logdir, model, dataset.get_dataset_size())
    model.train(args.epochs, dataset, callbacks=[monitor], dataset_sink_mode=False)
    print(f"TensorBoard: tensorboard --logdir {monitor.summary_record.monitor.logdir}")


if __name__ == "__main__":
    main()
