"""A small CNN on synthetic CIFAR-10-shaped data with
horovod.tensorflow.keras's elastic training (Keras 3), written the way
Horovod's elastic guide writes a Keras script:

    horovodrun -np 2 --min-np 1 --max-np 4 \
        --host-discovery-script ./discover_hosts.sh \
        build-venv-tf/bin/python examples/keras_elastic.py

The job goes on when a process fails or when the discovery script lists
other hosts. A KerasState keeps the model, its optimizer and the epoch
and batch counters; the callbacks update the counters and commit the
state after every --batches-per-commit steps and at the end of each
epoch. After a failure the state goes back to its last commit; either
way every rank leaves the job and joins it again, the learning rate is
scaled to the new size, rank 0's state goes to every rank, and fit()
goes on from the epoch the state has reached (initial_epoch).

The data (--fake-size 32x32x3 images of 10 classes, each a fixed
pattern plus noise, so that the model learns) is the same on every rank;
each rank trains on its shard, taken again after each reset, and an
epoch is one pass of the job over the data.

Rank 0 prints a line per epoch (the epoch counted from 1, the size, the
loss averaged over the ranks, and state.epoch: the epochs done), and at
the end a line starting "keras_elastic: done:" with state.epoch, the
final size and the last epoch's loss. Every rank then checks that its
weights equal rank 0's.

For tests, --fail-at RANK:EPOCH makes the process that started as rank
RANK (its HOROVOD_RANK at the start) raise RuntimeError halfway through
epoch EPOCH (counted from 0, as state.epoch counts).
"""

import argparse
import hashlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow.keras as hvd  # noqa: E402


def fail_at(text):
    """Parses --fail-at's RANK:EPOCH."""
    try:
        rank, epoch = (int(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError("expected RANK:EPOCH, got %r"
                                         % text) from None
    return rank, epoch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32,
                   help="samples per rank and step")
    p.add_argument("--batches-per-commit", type=int, default=1,
                   help="commit the state every this many steps (a "
                   "failure undoes at most this many)")
    p.add_argument("--lr", type=float, default=0.03,
                   help="learning rate for one rank (scaled by the size)")
    p.add_argument("--fake-size", type=int, default=2048,
                   help="synthetic samples")
    p.add_argument("--threads", type=int, default=1,
                   help="TensorFlow threads per rank (intra- and inter-op)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--fail-at", type=fail_at, metavar="RANK:EPOCH",
                   help="for tests: the process that started as rank RANK "
                   "raises RuntimeError halfway through epoch EPOCH")
    args = p.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or args.batches_per_commit < 1:
        p.error("--epochs, --batch-size and --batches-per-commit must be "
                "positive")
    return args


def synthetic(args):
    """(images, labels): each image its class's fixed pattern plus noise;
    the same on every rank."""
    rng = np.random.default_rng(args.seed)
    patterns = rng.standard_normal((10, 32, 32, 3)).astype(np.float32)
    y = rng.integers(0, 10, args.fake_size)
    x = 0.5 * patterns[y] + rng.standard_normal(
        (args.fake_size, 32, 32, 3)).astype(np.float32)
    return x, y


def make_model():
    """Two strided convolutions and a classifier: quick on CPUs."""
    return keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(16, 3, strides=2, padding="same",
                            activation="relu"),
        keras.layers.Conv2D(32, 3, strides=2, padding="same",
                            activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10),
    ])


class Report(keras.callbacks.Callback):
    """Rank 0 prints a line at the end of each epoch."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_epoch_end(self, epoch, logs=None):
        self.state.loss = float(logs["loss"])
        if hvd.rank() == 0:
            print("keras_elastic: epoch %d: %d ranks, loss %.4f, "
                  "state.epoch %d" % (epoch + 1, hvd.size(), self.state.loss,
                                      self.state.epoch), flush=True)


class FailAt(keras.callbacks.Callback):
    """Raises RuntimeError halfway through epoch `epoch` (counted as
    state.epoch counts)."""

    def __init__(self, state, epoch, start_rank):
        super().__init__()
        self.state, self.epoch, self.start_rank = state, epoch, start_rank

    def on_train_batch_end(self, batch, logs=None):
        if self.state.epoch == self.epoch and \
                batch == self.params["steps"] // 2:
            raise RuntimeError("keras_elastic: process started as rank %d "
                               "fails in epoch %d (--fail-at)"
                               % (self.start_rank, self.epoch))


def main():
    args = parse_args()
    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    keras.utils.set_random_seed(args.seed)
    # The rank this process started with: a later reset may change it.
    start_rank = int(os.environ.get("HOROVOD_RANK", "0"))
    x, y = synthetic(args)

    model = make_model()
    opt = hvd.DistributedOptimizer(
        keras.optimizers.SGD(args.lr * hvd.size(), momentum=0.9))
    model.compile(optimizer=opt,
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    # The optimizer's variables must exist before the state is taken, on
    # the ranks that start the job and on those that join it later: build
    # them here (no collective may run before hvd.elastic.run).
    opt.build(model.trainable_variables)

    # No BroadcastGlobalVariablesCallback: hvd.elastic.run gives every
    # rank rank 0's state before it trains, and again after each reset.
    state = hvd.elastic.KerasState(model, batch=0, epoch=0,
                                   loss=float("nan"))

    def on_reset():
        # The learning rate follows the number of ranks.
        model.optimizer.learning_rate = args.lr * hvd.size()
        if hvd.rank() == 0:
            print("keras_elastic: reset: %d ranks" % hvd.size(), flush=True)
    state.register_reset_callbacks([on_reset])

    callbacks = [
        # state.epoch and state.batch follow the training...
        hvd.elastic.UpdateEpochStateCallback(state),
        hvd.elastic.UpdateBatchStateCallback(state),
        # ...the job's loss, not each rank's...
        hvd.callbacks.MetricAverageCallback(),
        Report(state),
        # ...and the state is committed once they are up to date.
        hvd.elastic.CommitStateCallback(
            state, batches_per_commit=args.batches_per_commit),
    ]
    if args.fail_at is not None and args.fail_at[0] == start_rank:
        callbacks.insert(0, FailAt(state, args.fail_at[1], start_rank))

    if hvd.rank() == 0:
        print("keras_elastic: %d ranks, %d synthetic samples, batch %d per "
              "rank" % (hvd.size(), args.fake_size, args.batch_size),
              flush=True)

    @hvd.elastic.run
    def train(state):
        # This rank's shard of the job as it is now.
        data = tf.data.Dataset.from_tensor_slices((x, y))
        data = data.shard(hvd.size(), hvd.rank())
        data = data.shuffle(len(x), seed=args.seed + state.epoch)
        data = data.batch(args.batch_size, drop_remainder=True).repeat()
        steps = max(1, len(x) // (args.batch_size * hvd.size()))
        model.fit(data, steps_per_epoch=steps, epochs=args.epochs,
                  initial_epoch=state.epoch, callbacks=callbacks, verbose=0,
                  shuffle=False)

    train(state)

    # The trained weights, the same on every rank.
    digest = hashlib.sha256()
    for w in model.trainable_weights:
        digest.update(np.ascontiguousarray(keras.ops.convert_to_numpy(
            w)).tobytes())
    mine = np.frombuffer(digest.digest()[:8], dtype=np.int64)
    root = hvd.broadcast(mine, 0, name="keras_elastic.digest")
    if not np.array_equal(root, mine):
        print("keras_elastic: rank %d: weights differ from rank 0's"
              % hvd.rank(), file=sys.stderr, flush=True)
        sys.exit(1)
    if hvd.rank() == 0:
        print("keras_elastic: done: %d epochs, %d ranks, loss %.4f"
              % (state.epoch, hvd.size(), state.loss), flush=True)


if __name__ == "__main__":
    main()
