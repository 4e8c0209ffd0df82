"""The worker-process machinery of :class:`~dataset_kit.engine._executors.ProcessExecutor`.

Private to the engine: the pool of worker processes and its shared-memory
blocks (``pool``, ``shm``), what a worker runs (``worker``), the typed
messages and the threads that carry them (``messages``, ``transport``), the
lifeline that stops orphaned workers (``lifeline``), the reaper of exited
processes (``reaper``), and the first batch of a fresh pool cut among its
workers (``first_batch``).
"""
