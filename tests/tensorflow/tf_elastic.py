"""A TensorFlow 2 custom training loop (no Keras fit) under Horovod's
elastic API on libhvd, for tests/tensorflow/test_tf_elastic.py:

    horovodrun -np 4 --min-np 2 --host-discovery-script ./discover.sh \
        build-venv-tf/bin/python tests/tensorflow/tf_elastic.py \
        --mode function --fail-at 1:1

A small regression MLP on synthetic data (the same on every rank), its
gradients averaged by hvd.DistributedGradientTape, its step run eagerly
(--mode eager) or as a tf.function (--mode function), and the loop
wrapped in hvd.elastic.run. The state is
hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, batch=0)
(--state keras: a Keras model and SGD optimizer), or
hvd.elastic.TensorFlowState(variables, epoch=0, batch=0) (--state
variables: plain tf.Variables updated by hand). It is committed every
--batches-per-commit steps and at the end of each epoch; the learning
rate follows hvd.size() after each reset (a reset callback).

Output (rank 0 unless said):
    tf_elastic: start: N ranks, mode M, state S
    tf_elastic: epoch E: N ranks, loss L        (E counted from 1; L the
                                                 loss on all the data)
    tf_elastic: reset: N ranks
    tf_elastic: rank R of N (started as S): epoch E, weights HEX, sum X
                                                (every rank, at the end)

--fail-at RANK:EPOCH makes the process that started as rank RANK (its
HOROVOD_RANK at the start) raise RuntimeError halfway through epoch
EPOCH (counted from 0, as state.epoch counts).

--add-flag PATH --add-after E: at the end of epoch E (counted from 1)
rank 0 creates PATH, which makes the test's discovery script list
another host, then waits (up to --notice-wait seconds) for horovodrun's
notice of the change, so that the job grows at that epoch's commit
whatever the machine's speed.
"""

import argparse
import hashlib
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402
from horovod.common.elastic import notification_manager  # noqa: E402

FEATURES = 8
HIDDEN = 16


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
    p.add_argument("--mode", choices=("eager", "function"), default="eager",
                   help="run the train step eagerly or as a tf.function")
    p.add_argument("--state", choices=("keras", "variables"),
                   default="keras", help="TensorFlowKerasState of a Keras "
                   "model, or TensorFlowState of plain tf.Variables")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=12,
                   help="steps per epoch (whatever the size)")
    p.add_argument("--batch-size", type=int, default=16,
                   help="samples per rank and step")
    p.add_argument("--batches-per-commit", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.05,
                   help="learning rate for one rank (scaled by the size)")
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--fail-at", type=fail_at, metavar="RANK:EPOCH")
    p.add_argument("--add-flag", metavar="PATH")
    p.add_argument("--add-after", type=int, default=1, metavar="EPOCH")
    p.add_argument("--notice-wait", type=float, default=60.0)
    args = p.parse_args()
    if min(args.epochs, args.steps, args.batch_size,
           args.batches_per_commit) < 1:
        p.error("--epochs, --steps, --batch-size and --batches-per-commit "
                "must be positive")
    return args


def synthetic(args):
    """(x, y), y a fixed smooth function of x plus a little noise; the
    same on every rank."""
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((args.samples, FEATURES)).astype(np.float32)
    w = rng.standard_normal((FEATURES, 1)).astype(np.float32)
    y = np.tanh(x @ w) + 0.05 * rng.standard_normal(
        (args.samples, 1)).astype(np.float32)
    return x, y.astype(np.float32)


class NoticeSeen:
    """A listener of horovod.common.elastic.notification_manager (as a
    State is one): remembers that a notice of host changes came."""

    def __init__(self):
        self.seen = False

    def on_hosts_updated(self, timestamp, update_res):
        self.seen = True


def main():
    args = parse_args()
    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.random.set_seed(args.seed + int(os.environ.get("HOROVOD_RANK", "0")))
    # The rank this process started with: a reset may change its rank.
    start_rank = int(os.environ.get("HOROVOD_RANK", "0"))
    x, y = synthetic(args)

    # Each process starts from its own random weights (the seed depends
    # on the rank): hvd.elastic.run's sync gives every rank rank 0's.
    if args.state == "keras":
        import keras
        model = keras.Sequential([
            keras.Input((FEATURES,)),
            keras.layers.Dense(HIDDEN, activation="tanh"),
            keras.layers.Dense(1),
        ])
        opt = keras.optimizers.SGD(learning_rate=args.lr * hvd.size(),
                                   momentum=0.5)
        # The optimizer's variables must exist before the state copies
        # them, on the first ranks and on those that join later.
        opt.build(model.trainable_variables)
        variables = model.trainable_variables

        def forward(xb):
            return model(xb, training=True)

        def apply(grads):
            opt.apply_gradients(zip(grads, variables))

        def on_reset():
            opt.learning_rate = args.lr * hvd.size()

        state = hvd.elastic.TensorFlowKerasState(model, opt, epoch=0,
                                                 batch=0)
        weights = model.weights
    else:
        # A variable, not a Python number, so that a traced step reads
        # the value the last reset set.
        lr = tf.Variable(args.lr * hvd.size(), trainable=False, name="lr")
        init = tf.random.normal
        variables = [
            tf.Variable(init((FEATURES, HIDDEN), stddev=0.3), name="w1"),
            tf.Variable(tf.zeros((HIDDEN,)), name="b1"),
            tf.Variable(init((HIDDEN, 1), stddev=0.3), name="w2"),
            tf.Variable(tf.zeros((1,)), name="b2"),
        ]

        def forward(xb):
            w1, b1, w2, b2 = variables
            return tf.tanh(xb @ w1 + b1) @ w2 + b2

        def apply(grads):
            for v, g in zip(variables, grads):
                v.assign_sub(lr * g)

        def on_reset():
            lr.assign(args.lr * hvd.size())

        state = hvd.elastic.TensorFlowState(variables, epoch=0, batch=0)
        weights = variables

    def on_reset_report():
        on_reset()
        if hvd.rank() == 0:
            print("tf_elastic: reset: %d ranks" % hvd.size(), flush=True)
    state.register_reset_callbacks([on_reset_report])

    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(forward(xb) - yb))
        tape = hvd.DistributedGradientTape(tape)
        apply(tape.gradient(loss, variables))
        return loss

    if args.mode == "function":
        step = tf.function(step)

    def batch(epoch, index):
        """This rank's samples for step index of epoch: the job's
        batch of size * batch_size samples, in an order of the epoch,
        dealt out by rank."""
        order = np.random.default_rng(args.seed * 1000 + epoch).permutation(
            args.samples)
        first = (index * hvd.size() + hvd.rank()) * args.batch_size
        pick = order[np.arange(first, first + args.batch_size)
                     % args.samples]
        return tf.constant(x[pick]), tf.constant(y[pick])

    def full_loss():
        # Every rank has the same weights: no collective needed.
        return float(tf.reduce_mean(tf.square(forward(tf.constant(x)) - y)))

    failing = args.fail_at is not None and args.fail_at[0] == start_rank
    notice = NoticeSeen()

    @hvd.elastic.run
    def train(state):
        while state.epoch < args.epochs:
            while state.batch < args.steps:
                step(*batch(state.epoch, state.batch))
                state.batch += 1
                if failing and state.epoch == args.fail_at[1] and \
                        state.batch == args.steps // 2:
                    raise RuntimeError(
                        "tf_elastic: process started as rank %d fails in "
                        "epoch %d (--fail-at)" % (start_rank, state.epoch))
                if state.batch % args.batches_per_commit == 0 and \
                        state.batch < args.steps:
                    state.commit()
            done = state.epoch + 1
            if hvd.rank() == 0:
                print("tf_elastic: epoch %d: %d ranks, loss %.6f"
                      % (done, hvd.size(), full_loss()), flush=True)
                if args.add_flag and done == args.add_after:
                    with open(args.add_flag, "w"):
                        pass
                    # The notice reaches state too (a listener as well):
                    # the commit below raises HostsUpdatedInterrupt.
                    notification_manager.register_listener(notice)
                    deadline = time.monotonic() + args.notice_wait
                    while not notice.seen and time.monotonic() < deadline:
                        notification_manager.poll()
                        time.sleep(0.05)
                    notification_manager.remove_listener(notice)
            # Counted before the commit: a HostsUpdatedInterrupt there
            # keeps the epoch done.
            state.epoch = done
            state.batch = 0
            state.commit()

    if hvd.rank() == 0:
        print("tf_elastic: start: %d ranks, mode %s, state %s"
              % (hvd.size(), args.mode, args.state), flush=True)
    train(state)

    digest = hashlib.sha256()
    total = 0.0
    for w in weights:
        value = np.ascontiguousarray(w.numpy())
        digest.update(value.tobytes())
        total += float(value.astype(np.float64).sum())
    print("tf_elastic: rank %d of %d (started as %d): epoch %d, weights %s, "
          "sum %.9g" % (hvd.rank(), hvd.size(), start_rank, state.epoch,
                        digest.hexdigest()[:16], total), flush=True)


if __name__ == "__main__":
    main()
