"""Seed 000, section 3.2: ``train_config.py``, with mindwatch's ``SummaryCollector``, so
that its loss, learning rate and histograms show in TensorBoard.

    cd /tmp && python examples/seeds/train_config.py
    tensorboard --logdir ./summary

The seed's text, with one import changed and its Ascend device set to CPU (each marked
``# adapted:``, with the reason). The seed leaves out the model and the dataset
("此处省略"); section 4 supplies small ones that train on CPU in seconds, and section 5
is the seed's own commented-out call, run.
"""

# train_config.py
import os

os.environ.setdefault("GLOG_v", "3")  # adapted: MindSpore's CPU kernels log every op otherwise

from mindspore import context
from mindspore.train import Callback, Model  # noqa: F401 - Callback: imported, unused, in the seed

# adapted: SummaryCollector is mindwatch's (same arguments): MindSpore's writes MindInsight's
# *_MS files, which TensorBoard shows as empty.
from mindspore.train.callback import CheckpointConfig, LossMonitor, ModelCheckpoint, TimeMonitor

from mindwatch.mindspore import SummaryCollector

# ======== 1. 硬件上下文配置 ========
context.set_context(
    mode=context.GRAPH_MODE,  # 必须为 GRAPH_MODE，PYNATIVE 模式不支持 summary
    device_target="CPU",  # adapted: "Ascend" in the seed; this machine has no NPU
    device_id=0,  # 单卡训练设为0；多卡用 launch.py 启动
    max_call_depth=2000,  # 防止递归过深，昇腾芯片限制
    enable_auto_mixed_precision=True,  # 开启混合精度，提升吞吐
)
# ======== 2. 监控配置主体 ========
monitor_config = {
    "summary_dir": "./summary/bert_finetune_202404",  # 建议带日期，方便版本管理
    "save_graphs": True,  # 保存计算图，调试必备
    "save_graphs_path": "./graph/bert_finetune",  # 路径必须存在
    "collect_freq": 50,  # 50步采集一次，平衡性能与粒度
    "max_file_size": 2147483648,  # 2GB，避免频繁切分
    "collect_specified_data": ["parameters", "gradients"],  # 关键：去掉 inputs/outputs
    "keep_default_action": False,
    "export_kwargs": {"file_name": "bert_export", "file_format": "AIR"},
}


# ======== 3. Callback 实例化 ========
def build_callbacks(monitor_config):
    callbacks = []
    # LossMonitor：必须第一个注册
    callbacks.append(LossMonitor(per_print_times=10))
    # TimeMonitor：第二个，记录吞吐
    callbacks.append(TimeMonitor())
    # SummaryCollector：第三个，核心监控器
    callbacks.append(
        SummaryCollector(
            summary_dir=monitor_config["summary_dir"],
            collect_freq=monitor_config["collect_freq"],
            max_file_size=monitor_config["max_file_size"],
            collect_specified_data=monitor_config["collect_specified_data"],
        )
    )
    # ModelCheckpoint：最后一个，依赖 summary 数据
    ckpt_config = CheckpointConfig(
        save_checkpoint_steps=1000,
        keep_checkpoint_max=3,
        integrated_save=False,  # Ascend 强制为 False
    )
    callbacks.append(
        ModelCheckpoint(prefix="bert_finetune", directory="./ckpt", config=ckpt_config)
    )
    return callbacks


# ======== 4. 模型与数据集初始化（此处省略，保持 focus） ========
# adapted: the seed omits these; a stand-in "BERT" (the demo's MLP), its data, loss and
# optimizer, so that the script trains: 20 batches x 10 epochs = 200 steps.
from mindspore import nn

from mindwatch.mindspore.demo import make_dataset, make_network


def create_bert_model():
    return make_network()


def create_dataset():
    return make_dataset(640, 32, seed=0)


model = create_bert_model()
dataset = create_dataset()
loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
optimizer = nn.Momentum(
    model.trainable_params(),
    learning_rate=nn.exponential_decay_lr(0.05, 0.9, 200, 20, 1),  # x0.9 an epoch
    momentum=0.9,
)

# ======== 5. 模型训练入口 ========
model_train = Model(model, optimizer=optimizer, loss_fn=loss_fn)
model_train.train(epoch=10, train_dataset=dataset, callbacks=build_callbacks(monitor_config))
