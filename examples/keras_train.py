"""A ResNet-style CNN on CIFAR-10 with horovod.tensorflow.keras (Keras 3),
written the way Horovod's Keras guide writes a script:

    horovodrun -np 4 -H localhost:4 build-venv-tf/bin/python \
        examples/keras_train.py

It reads CIFAR-10 from --data-dir when the python version of the data set
(cifar-10-batches-py) is there, and otherwise trains on synthetic data of
the same shape (32x32x3 images, 10 classes), so that it runs on a machine
without the data set or a network. Each rank trains on its shard; the
learning rate is scaled by the number of ranks and warmed up, rank 0's
weights are broadcast at the start, metrics are averaged over the ranks,
and rank 0 alone writes the checkpoint.

At the end rank 0 prints the throughput, and every rank checks that its
trained weights equal rank 0's.
"""

import argparse
import hashlib
import os
import pickle
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow.keras as hvd  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=os.path.expanduser("~/data"),
                   help="where cifar-10-batches-py is (default ~/data)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0,
                   help="steps per epoch (0: the whole shard)")
    p.add_argument("--batch-size", type=int, default=32,
                   help="samples per rank and step")
    p.add_argument("--lr", type=float, default=0.0125,
                   help="learning rate for one rank (scaled by the size)")
    p.add_argument("--warmup-epochs", type=int, default=1)
    p.add_argument("--fake-size", type=int, default=50000,
                   help="synthetic samples when CIFAR-10 is not on disk")
    p.add_argument("--shuffle-buffer", type=int, default=4096,
                   help="samples in each rank's shuffle buffer (0: none)")
    p.add_argument("--threads", type=int, default=1,
                   help="TensorFlow threads per rank (intra- and inter-op)")
    p.add_argument("--fp16-allreduce", action="store_true",
                   help="send gradients as float16")
    p.add_argument("--checkpoint", help="rank 0 saves the best model here "
                   "(a .keras file)")
    p.add_argument("--seed", type=int, default=42)
    return p.parse_args()


def load(args):
    """This rank's shard of (images, labels), CIFAR-10 or synthetic."""
    folder = os.path.join(args.data_dir, "cifar-10-batches-py")
    if os.path.isdir(folder):
        xs, ys = [], []
        for i in range(1, 6):
            with open(os.path.join(folder, "data_batch_%d" % i), "rb") as f:
                d = pickle.load(f, encoding="bytes")
            xs.append(d[b"data"])
            ys.extend(d[b"labels"])
        x = np.concatenate(xs).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        x = x.astype("float32") / 255.0
        y = np.array(ys, dtype="int64")
        what = "CIFAR-10 from %s" % folder
    else:
        rng = np.random.default_rng(args.seed)
        x = rng.random((args.fake_size, 32, 32, 3), dtype=np.float32)
        y = rng.integers(0, 10, args.fake_size)
        what = "synthetic CIFAR-10-shaped data (%d samples)" % args.fake_size
    return x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()], what


def block(x, filters, stride):
    """A residual block of two 3x3 convolutions."""
    short = x
    x = keras.layers.Conv2D(filters, 3, stride, padding="same",
                            use_bias=False)(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
    x = keras.layers.BatchNormalization()(x)
    if stride != 1 or short.shape[-1] != filters:
        short = keras.layers.Conv2D(filters, 1, stride, use_bias=False)(short)
        short = keras.layers.BatchNormalization()(short)
    return keras.layers.ReLU()(x + short)


def make_model():
    inp = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(32, 3, padding="same", use_bias=False)(inp)
    x = keras.layers.ReLU()(keras.layers.BatchNormalization()(x))
    for filters, stride in ((32, 1), (64, 2), (128, 2)):
        x = block(x, filters, stride)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, keras.layers.Dense(10)(x))


class Throughput(keras.callbacks.Callback):
    """Samples per second over the ranks, from the end of the first step
    to the end of the last (the pipeline's teardown left out)."""

    def __init__(self, batch):
        super().__init__()
        self.batch, self.start, self.end, self.steps = batch, None, None, 0

    def on_train_batch_end(self, step, logs=None):
        self.end = time.perf_counter()
        if self.start is None:
            self.start = self.end
        else:
            self.steps += 1

    def rate(self):
        took = (self.end or 0.0) - (self.start or 0.0)
        return self.steps * self.batch * hvd.size() / took if took else 0.0


def main():
    args = parse_args()
    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    keras.utils.set_random_seed(args.seed + hvd.rank())
    x, y, what = load(args)
    if hvd.rank() == 0:
        print("training on %s, %d ranks, batch %d per rank"
              % (what, hvd.size(), args.batch_size), flush=True)
    model = make_model()
    lr = args.lr * hvd.size()
    opt = hvd.DistributedOptimizer(
        keras.optimizers.SGD(lr, momentum=0.9),
        compression=hvd.Compression.fp16 if args.fp16_allreduce
        else hvd.Compression.none)
    model.compile(optimizer=opt, metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    steps = args.steps or len(x) // args.batch_size
    meter = Throughput(args.batch_size)
    callbacks = [
        # Rank 0's initial weights (and optimizer state) everywhere.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # Every rank logs the job's metrics, not its own shard's.
        hvd.callbacks.MetricAverageCallback(),
        # A large learning rate needs a gentle start.
        hvd.callbacks.LearningRateWarmupCallback(
            initial_lr=lr, warmup_epochs=args.warmup_epochs,
            steps_per_epoch=steps),
        meter,
    ]
    if args.checkpoint:
        callbacks.append(hvd.callbacks.BestModelCheckpoint(
            monitor="loss", filepath=args.checkpoint))
    data = tf.data.Dataset.from_tensor_slices((x, y))
    if args.shuffle_buffer > 0:
        data = data.shuffle(args.shuffle_buffer, seed=args.seed)
    data = data.batch(args.batch_size, drop_remainder=True)
    hist = model.fit(data.repeat(), epochs=args.epochs, steps_per_epoch=steps,
                     callbacks=callbacks, verbose=0, shuffle=False)
    if hvd.rank() == 0:
        for e, (loss, acc) in enumerate(zip(hist.history["loss"],
                                            hist.history["accuracy"])):
            print("epoch %d: loss %.4f, accuracy %.4f" % (e + 1, loss, acc))
        print("throughput: %.1f samples/s over %d ranks"
              % (meter.rate(), hvd.size()), flush=True)
    # The trained weights; BatchNormalization's moving statistics are each
    # rank's own, as in Horovod (averaging them needs SyncBatchNorm).
    digest = hashlib.sha256()
    for w in model.trainable_weights:
        digest.update(np.ascontiguousarray(keras.ops.convert_to_numpy(
            w)).tobytes())
    mine = np.frombuffer(digest.digest()[:8], dtype=np.int64)
    root = hvd.broadcast(mine, 0)
    print("weights checksum: %s" % digest.hexdigest()[:16], flush=True)
    if not np.array_equal(root, mine):
        print("rank %d: weights differ from rank 0's" % hvd.rank(),
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
