"""The Keras example's model, batch and optimizer under TensorFlow's own
tf.distribute.MultiWorkerMirroredStrategy, in TensorFlow's custom training
loop (Keras 3's model.fit does not run under it across workers), or with
--horovod the same loop on horovod.tensorflow's DistributedGradientTape,
for keras_train_bench.py: run
under horovodrun, which starts the workers; TF_CONFIG is made from
horovodrun's environment (HOROVOD_RANK, HOROVOD_SIZE, MASTER_ADDR,
MASTER_PORT: worker i listens on MASTER_PORT + 1 + i). Prints
"throughput: N samples/s" on rank 0, as the example does.
"""

import argparse
import importlib.util
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples",
                       "keras_train.py")


def tf_config():
    rank, size = int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"])
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = int(os.environ["MASTER_PORT"])
    return rank, size, {"cluster": {"worker": ["%s:%d" % (addr, port + 1 + i)
                                               for i in range(size)]},
                        "task": {"type": "worker", "index": rank}}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.0125)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--fake-size", type=int, default=4096)
    p.add_argument("--shuffle-buffer", type=int, default=4096,
                   help="samples in each rank's shuffle buffer (0: none), "
                   "as in the example")
    p.add_argument("--horovod", action="store_true",
                   help="the same loop with hvd.DistributedGradientTape "
                   "instead of the strategy")
    args = p.parse_args()
    rank, size, config = tf_config()
    if not args.horovod:
        os.environ["TF_CONFIG"] = json.dumps(config)
    import keras
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    spec = importlib.util.spec_from_file_location("keras_train", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    rng = np.random.default_rng(42)
    x = rng.random((args.fake_size, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, args.fake_size)
    global_batch = args.batch_size * size
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                         reduction="none")

    def pipeline(shards, index):
        """This rank's input: the example's (its shard, shuffled, batched)."""
        data = tf.data.Dataset.from_tensor_slices((x, y)).shard(shards, index)
        if args.shuffle_buffer > 0:
            data = data.shuffle(args.shuffle_buffer, seed=42)
        return data.batch(args.batch_size, drop_remainder=True).repeat()

    if args.horovod:
        import horovod.tensorflow as hvd
        hvd.init()
        batches = iter(pipeline(size, rank))
        model = example.make_model()
        opt = keras.optimizers.SGD(args.lr * size, momentum=0.9)

        @tf.function
        def step(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(loss_fn(yb, model(xb, training=True)))
            tape = hvd.DistributedGradientTape(tape)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
    else:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        batches = iter(strategy.distribute_datasets_from_function(
            lambda ctx: pipeline(ctx.num_input_pipelines,
                                 ctx.input_pipeline_id)))
        with strategy.scope():
            model = example.make_model()
            opt = keras.optimizers.SGD(args.lr * size, momentum=0.9)

        # Keras 3's model.fit does not run under this strategy across
        # workers (keras-team/keras#20585): TensorFlow's custom-loop form.
        @tf.function
        def step(xb, yb):
            def replica(xb, yb):
                with tf.GradientTape() as tape:
                    loss = tf.nn.compute_average_loss(
                        loss_fn(yb, model(xb, training=True)),
                        global_batch_size=global_batch)
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                return loss
            per = strategy.run(replica, args=(xb, yb))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per,
                                   axis=None)

    import time
    step(*next(batches))  # the first step (tracing) is left out
    start = time.perf_counter()
    for _ in range(args.steps - 1):
        loss = step(*next(batches))
    float(loss)
    took = time.perf_counter() - start
    if rank == 0:
        print("throughput: %.1f samples/s over %d workers"
              % ((args.steps - 1) * global_batch / took, size), flush=True)


if __name__ == "__main__":
    main()
