"""PyTorch's TensorBoard tutorial ("Visualizing Models, Data, and Training with
TensorBoard", pytorch.org/tutorials/intermediate/tensorboard_tutorial.html), its
logging code unchanged, with the model and data swapped for MindSpore and the
SummaryWriter import changed to mindwatch's.

    python examples/pytorch_tutorial.py --logdir runs/fashion_mnist_experiment_1

The data are synthetic 28x28 "Fashion-MNIST" images (a pattern per class plus noise),
so it runs offline. What the tutorial logs: a batch of images, the embedding of a
batch for the PROJECTOR, the running training loss, a figure of predictions vs.
actuals, and one PR curve per class; like the tutorial, it closes the writer after
each part and goes on logging (the writer reopens the run, as torch's does).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("GLOG_v", "3")

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import mindspore as ms
import numpy as np
from mindspore import nn, ops

from mindwatch import SummaryWriter  # was: from torch.utils.tensorboard import SummaryWriter

# constant for classes
classes = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle Boot",
)


class Net(nn.Cell):  # the tutorial's network, in MindSpore
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="valid")
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid")
        self.fc1 = nn.Dense(16 * 4 * 4, 120)
        self.fc2 = nn.Dense(120, 84)
        self.fc3 = nn.Dense(84, 10)
        self.relu = nn.ReLU()

    def construct(self, x: ms.Tensor) -> ms.Tensor:
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        x = x.view(-1, 16 * 4 * 4)
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


def fashion_batches(count: int, batch_size: int, seed: int) -> list[tuple[ms.Tensor, ms.Tensor]]:
    """Synthetic Fashion-MNIST: each class a fixed pattern, plus noise; in [-1, 1] as
    the tutorial's Normalize((0.5,), (0.5,)) leaves them."""
    patterns = np.random.default_rng(0).random((10, 1, 28, 28)).astype(np.float32)
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        labels = rng.integers(0, 10, batch_size)
        noise = rng.normal(0, 0.3, (batch_size, 1, 28, 28)).astype(np.float32)
        images = np.clip(patterns[labels] + noise, 0, 1) * 2 - 1
        batches.append((ms.Tensor(images), ms.Tensor(labels.astype(np.int32))))
    return batches


# helper function to show an image
def matplotlib_imshow(img: ms.Tensor, one_channel: bool = False) -> None:
    if one_channel:
        img = img.mean(axis=0)
    img = img / 2 + 0.5  # unnormalize
    npimg = img.asnumpy()  # was: img.numpy()
    if one_channel:
        plt.imshow(npimg, cmap="Greys")
    else:
        plt.imshow(np.transpose(npimg, (1, 2, 0)))


def images_to_probs(net: Net, images: ms.Tensor) -> tuple[np.ndarray, list[float]]:
    """Generates predictions and corresponding probabilities from a trained network
    and a list of images."""
    output = net(images)
    # convert output probabilities to predicted class
    preds = output.argmax(axis=1).asnumpy()
    probs = ops.softmax(output, axis=1).asnumpy()
    return preds, [probs[i, el] for i, el in enumerate(preds)]


def plot_classes_preds(net: Net, images: ms.Tensor, labels: ms.Tensor) -> plt.Figure:
    """Generates matplotlib Figure using a trained network, along with images and labels
    from a batch, that shows the network's top prediction along with its probability,
    alongside the actual label, coloring this information based on whether the
    prediction was correct or not."""
    preds, probs = images_to_probs(net, images)
    # plot the images in the batch, along with predicted and true labels
    fig = plt.figure(figsize=(12, 48))
    for idx in range(4):  # was: np.arange(4) (MindSpore indexes with ints)
        ax = fig.add_subplot(1, 4, idx + 1, xticks=[], yticks=[])
        matplotlib_imshow(images[idx], one_channel=True)
        ax.set_title(
            f"{classes[preds[idx]]}, {probs[idx] * 100.0:.1f}%\n"
            f"(label: {classes[int(labels[idx])]})",
            color=("green" if preds[idx] == int(labels[idx]) else "red"),
        )
    return fig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--logdir", default="runs/fashion_mnist_experiment_1")
    parser.add_argument("--steps", type=int, default=2000, help="minibatches of 4")
    parser.add_argument("--log-every", type=int, default=1000)
    args = parser.parse_args()

    ms.set_device("CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(0)
    net = Net()
    criterion = nn.CrossEntropyLoss()
    optimizer = nn.SGD(net.trainable_params(), learning_rate=0.001, momentum=0.9)
    grad_fn = ms.value_and_grad(lambda x, y: criterion(net(x), y), None, optimizer.parameters)
    trainloader = fashion_batches(args.steps, 4, seed=1)
    testloader = fashion_batches(100, 4, seed=2)

    # default `log_dir` is "runs" - we'll be more specific here
    writer = SummaryWriter(args.logdir)

    # get some random training images
    images, labels = trainloader[0]
    # write to tensorboard (the tutorial: add_image of torchvision's make_grid)
    writer.add_images("four_fashion_mnist_images", images / 2 + 0.5)

    # (the tutorial's writer.add_graph(net, images) traces a torch module: mindwatch
    # raises and names mindspore.export instead)
    writer.close()

    # log embeddings
    class_labels = [classes[lab] for lab in labels.asnumpy()]
    features = images.view(-1, 28 * 28)
    writer.add_embedding(features, metadata=class_labels, label_img=images / 2 + 0.5)
    writer.close()

    running_loss = 0.0
    for epoch in range(1):  # loop over the dataset multiple times
        for i, data in enumerate(trainloader, 0):
            # get the inputs; data is a list of [inputs, labels]
            inputs, labels = data

            # forward + backward + optimize (MindSpore: one value_and_grad call)
            loss, grads = grad_fn(inputs, labels)
            optimizer(grads)

            running_loss += loss.item()
            if i % args.log_every == args.log_every - 1:  # every 1000 mini-batches...
                # ...log the running loss
                writer.add_scalar(
                    "training loss",
                    running_loss / args.log_every,
                    epoch * len(trainloader) + i,
                )

                # ...log a Matplotlib Figure showing the model's predictions on a
                # random mini-batch
                writer.add_figure(
                    "predictions vs. actuals",
                    plot_classes_preds(net, inputs, labels),
                    global_step=epoch * len(trainloader) + i,
                )
                running_loss = 0.0
    print("Finished Training")

    # 1. gets the probability predictions in a test_size x num_classes Tensor
    # 2. gets the preds in a test_size Tensor
    class_probs = []
    class_label = []
    for images, labels in testloader:
        output = net(images)
        class_probs.append(ops.softmax(output, axis=1))
        class_label.append(labels)
    test_probs = ops.cat(class_probs)
    test_label = ops.cat(class_label)

    # helper function
    def add_pr_curve_tensorboard(
        class_index: int, test_probs: ms.Tensor, test_label: ms.Tensor, global_step: int = 0
    ) -> None:
        """Takes in a "class_index" from 0 to 9 and plots the corresponding
        precision-recall curve"""
        tensorboard_truth = test_label == class_index
        tensorboard_probs = test_probs[:, class_index]

        writer.add_pr_curve(
            classes[class_index], tensorboard_truth, tensorboard_probs, global_step=global_step
        )
        writer.close()

    # plot all the pr curves
    for i in range(len(classes)):
        add_pr_curve_tensorboard(i, test_probs, test_label)
    print(f"wrote {writer.get_logdir()}")


if __name__ == "__main__":
    main()
