"""Gradient compression for allreduce, as in Horovod: the interface and
the compressor that does nothing; each front end adds its float16 one."""


class Compressor:
    """Compresses a tensor before an allreduce and restores it after."""

    @staticmethod
    def compress(tensor):
        """Returns the tensor to send and what decompress needs."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """Returns the tensor restored from what compress gave."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor
