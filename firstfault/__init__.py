"""firstfault: find the first failure in a failed distributed training job."""

__version__ = "0.1.0"
