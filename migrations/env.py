"""Alembic environment for the raytsystem ledger.

raytsystem runs migrations from code (`raytsystem.storage.db.upgrade`), handing Alembic an open
connection in `config.attributes["connection"]`. Running `alembic` by hand also works when
`sqlalchemy.url` is given (`alembic -x url=sqlite:///.raytsystem/ledger.sqlite3 upgrade head`).
"""

from alembic import context
from sqlalchemy import create_engine

config = context.config


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise SystemExit("give the database with: alembic -x url=... upgrade head")
    engine = create_engine(url)
    with engine.begin() as conn:
        context.configure(connection=conn, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


run()
