"""Which parameters MindSpore's own SummaryCollector histograms for each ``histogram_regular``.

Usage: python histogram_regular_job.py WORK_DIR OUT_JSON PATTERN_JSON...

Each pattern (a JSON string or null) trains the net of ``histogram_net`` for 2 steps
with MindSpore's SummaryCollector (collect_freq=1) in WORK_DIR/<i>, then reads the
histogram tags of its ``*_MS`` file back (mindwatch's reader of MindSpore's format) and
writes ``[[pattern, [parameter names]], ...]`` to OUT_JSON. MindSpore starts a writer
process per SummaryRecord and allows one at a time: hence a process of its own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mindspore as ms
from mindspore import nn
from mindspore.train import Model, SummaryCollector

from mindwatch.mindspore.demo import make_dataset
from mindwatch.mssummary.format import MsHistogram, SummaryFileReader

ms.set_device("CPU")
sys.path.insert(0, str(Path(__file__).parent))
from histogram_net import HistogramNet  # noqa: E402


def main() -> None:
    work, out = Path(sys.argv[1]), Path(sys.argv[2])
    found = []
    for i, raw in enumerate(sys.argv[3:]):
        pattern = json.loads(raw)
        ms.set_seed(0)
        net = HistogramNet()
        loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.01, 0.9))
        folder = work / str(i)
        collector = SummaryCollector(
            str(folder),
            collect_freq=1,
            collect_specified_data={"histogram_regular": pattern, "collect_graph": False},
        )
        model.train(1, make_dataset(64, 32, seed=0), callbacks=[collector], dataset_sink_mode=False)
        (ms_file,) = folder.glob("*_MS")
        tags = {
            item.tag.removesuffix("/auto")
            for item in SummaryFileReader(ms_file).read()
            if isinstance(item, MsHistogram)
        }
        found.append([pattern, sorted(tags)])
    out.write_text(json.dumps(found))


if __name__ == "__main__":
    main()
