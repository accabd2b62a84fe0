"""xdist workers and a run's shards: what a worker sends its controller (``crossing.py``) and its
progress datagrams (``datagram.py``), the run's identity (``runid.py``) and the ``visits`` each
shard writes so shards can be merged (``shardvisits.py``). Imports no other part of run/; xdist's
hooks, which need the session, are ``start/xdist.py``.
"""
