"""Train a tiny LLaMA with MindFormers 1.9 on CPU, as a MindFormers user would.

Run inside the MindFormers venv, through mindwatch's launcher (which registers
``MindWatchMonitor`` in MindFormers' callback registry before this script runs)::

    python -m mindwatch.mindspore.mindformers mf_llama.py --config tiny_llama.yaml \
        --route trainer|model --spy spy.json

``--route trainer``: MindFormers' own ``Trainer`` builds everything from the YAML
(``callbacks:``, ``runner_wrapper``, ``tensorboard``), like ``run_mindformer.py``.
``--route model``: the user's own ``Model.train`` with a subclass of
``MFTrainOneStepCell``, MindFormers' ``MFLossMonitor`` and its TensorBoard writer, and
the YAML's callbacks built through MindFormers' registry.

``--spike S --steps N``: instead of the example's random tokens, ``N`` batches of a
learnable sequence (each token the one before plus 1, modulo the vocabulary), except
the batch of step ``S``, whose tokens are random: a bad batch planted in the data, the
loss of a model that has learned the rule jumps there.

Either way a plain MindSpore callback (the spy) records what the train cell returned at
every step, so the test can compare mindwatch's event files with it and with
MindFormers' own TensorBoard files.

The YAML, the synthetic data and the CPU settings (GRAPH mode, float32, the sliced
rotary path, ``CPUTrainOneStepCell``'s IsFinite-based overflow check instead of the
Ascend-only ``NPUGetFloatStatusV2``) are the example's, ``examples/mindformers/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from mindformers import MindFormerConfig, Trainer, build_context
from mindspore.train import Callback

sys.path.insert(0, str(Path(__file__).parents[2] / "examples" / "mindformers"))
from train_tiny_llama import CPUTrainOneStepCell
from train_tiny_llama import dataset as random_tokens


class Counting:
    """Sequences ``start, start + 1, ...`` (modulo ``vocab``) of ``seq_length + 1``
    tokens, the start drawn per sample; the samples of batch ``bad`` are random tokens."""

    def __init__(self, samples: int, seq_length: int, vocab: int, batch: int, bad: int) -> None:
        self.samples, self.seq_length, self.vocab = samples, seq_length, vocab
        self.bad = range(bad * batch, (bad + 1) * batch)

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, i: int) -> tuple[np.ndarray]:
        rng = np.random.default_rng(i)
        if i in self.bad:
            tokens = rng.integers(0, self.vocab, self.seq_length + 1)
        else:  # one token random: the loss levels off instead of going to 0
            tokens = (rng.integers(0, self.vocab) + np.arange(self.seq_length + 1)) % self.vocab
            tokens[rng.integers(0, tokens.size)] = rng.integers(0, self.vocab)
        return (tokens.astype(np.int32),)


def dataset(config: Any, steps: int, spike: int) -> Any:
    """The tokens of the job: the example's (``spike`` 0), or :class:`Counting` ones with
    a bad batch at step ``spike`` (1-based, as ``cur_step_num``)."""
    if not spike:
        return random_tokens(config, steps)
    import mindspore as ms

    model, batch = config.model.model_config, config.runner_config.batch_size
    tokens = Counting(batch * steps, model.seq_length, model.vocab_size, batch, spike - 1)
    data = ms.dataset.GeneratorDataset(tokens, ["input_ids"], shuffle=False)
    return data.batch(batch, drop_remainder=True)


class Spy(Callback):  # type: ignore[misc]
    """What the train cell returned, step by step (independent of mindwatch)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.steps: list[dict[str, Any]] = []
        self.weights: list[str] = []
        self.sizes: list[int] = []  # the weights' element counts
        self.trainable: list[str] = []

    def on_train_begin(self, run_context: Any) -> None:
        cell = run_context.original_args().train_network
        self.weights = [p.name for p in cell.weights]
        self.sizes = [int(np.prod(p.shape)) for p in cell.weights]
        self.trainable = [p.name for p in cell.network.trainable_params()]

    def on_train_step_end(self, run_context: Any) -> None:
        cb = run_context.original_args()
        out = cb.net_outputs

        def value(x: Any) -> Any:
            return None if x is None else float(np.asarray(x.asnumpy()).reshape(-1)[0])

        row = {
            "step": int(cb.cur_step_num),
            "loss": float(np.mean(out[0].asnumpy())),
            "overflow": value(out[1]),
            "loss_scale": value(out[2]),
            "lr": value(out[3]),
            "global_norm": value(out[4]),
        }
        if len(out) == 7:
            row["local_norm"] = [float(v) for v in out[5].asnumpy().reshape(-1)]
            row["size"] = [int(v) for v in out[6]]  # each gradient's element count
        self.steps.append(row)

    def on_train_end(self, run_context: Any) -> None:
        self.path.write_text(
            json.dumps(
                {
                    "weights": self.weights,
                    "sizes": self.sizes,
                    "trainable": self.trainable,
                    "steps": self.steps,
                }
            )
        )


def train_with_trainer(config: Any, spy: Spy, data: Any) -> None:
    Trainer(args=config, train_dataset=data, callbacks=[spy]).train()


def train_with_model(config: Any, spy: Spy, data: Any) -> None:
    """The user's own loop: Model.train, a user subclass of MFTrainOneStepCell."""
    from mindformers import LlamaConfig, LlamaForCausalLM
    from mindformers.core.callback import build_callback
    from mindformers.core.lr import CosineWithWarmUpLR
    from mindformers.utils.tensorboard import _set_tensorboard_writer, update_tensorboard_args
    from mindspore import nn
    from mindspore.train import Model

    model_config = {k: v for k, v in config.model.model_config.items() if k != "type"}
    network = LlamaForCausalLM(LlamaConfig(**model_config))
    schedule = config.lr_schedule
    lr = CosineWithWarmUpLR(
        learning_rate=schedule.learning_rate,
        warmup_steps=schedule.warmup_steps,
        total_steps=schedule.total_steps,
    )
    optimizer = nn.AdamWeightDecay(network.trainable_params(), learning_rate=lr)
    wrapper = config.runner_wrapper
    cell = CPUTrainOneStepCell(
        network,
        optimizer,
        use_clip_grad=wrapper.use_clip_grad,
        local_norm=bool(wrapper.get("local_norm", False)),
        scale_sense=1.0,
    )
    if config.get("tensorboard"):
        _set_tensorboard_writer(config.tensorboard)
        update_tensorboard_args(config.tensorboard)
    batch = config.runner_config.batch_size
    defaults = {
        "learning_rate": lr,
        "origin_epochs": 1,
        "dataset_size": data.get_dataset_size(),
        "global_batch_size": batch,
    }
    callbacks = [
        build_callback(entry, default_args=defaults if entry["type"] == "MFLossMonitor" else None)
        for entry in config.callbacks
    ]
    Model(cell).train(1, data, callbacks=[*callbacks, spy], dataset_sink_mode=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--route", choices=["trainer", "model"], default="trainer")
    parser.add_argument("--spy", required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--spike", type=int, default=0, help="the step of a bad batch")
    args = parser.parse_args()
    config = MindFormerConfig(args.config)
    build_context(config)
    spy = Spy(Path(args.spy))
    data = dataset(config, args.steps, args.spike)
    if args.route == "trainer":
        train_with_trainer(config, spy, data)
    else:
        train_with_model(config, spy, data)


if __name__ == "__main__":
    main()
