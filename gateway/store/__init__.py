"""The only code that talks to Redis: the key layout (:mod:`~gateway.store.keys`), one Lua
script per state change (``lua/``, loaded by :mod:`~gateway.store.scripts`), the stores each
room calls, and the shared clock that follows Redis's ``TIME`` (:mod:`~gateway.store.clock`).

Imports core only; every room above may import it.
"""
