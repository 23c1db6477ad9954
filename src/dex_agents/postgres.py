"""The PostgreSQL runtime store (extra `[postgres]`): one database shared by every machine.

Imported on its own, so that `dex_agents.stores` never needs psycopg.
"""

from .stores._postgres import PostgresRuntimeStore

__all__ = ["PostgresRuntimeStore"]
