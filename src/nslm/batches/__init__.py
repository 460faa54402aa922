"""Batches: a prepared split cut into stateful TBPTT streams at article starts,
the one layout that training and every scoring pass read."""

from nslm.batches.streams import Streams, make_streams

__all__ = ["Streams", "make_streams"]
