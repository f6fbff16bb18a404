"""Open a ``--storage`` database URL as Optuna's RDB storage: one line when it cannot be
opened (naming the driver package when that is what is missing), and no failure when
several processes create a new database's tables at once.

Several sweep or PBT processes started together on a new database all find Optuna's tables
missing and create them; on PostgreSQL all but one then fail ("duplicate key value violates
unique constraint pg_type_typname_nsp_index", an IntegrityError) or find a table made in
between (a ProgrammingError). Such an error while opening is retried a few times: by then
the tables exist and the storage opens.

Drivers: Optuna opens a database URL through SQLAlchemy, which picks a driver (a DB-API module) by
the URL's scheme: ``postgresql://`` is psycopg (v3) since SQLAlchemy 2.1 (psycopg2
before), ``postgresql+psycopg2://`` psycopg2, ``mysql://`` MySQLdb (``mysqlclient``),
``mysql+pymysql://`` PyMySQL. alf's ``[postgres]`` extra installs psycopg (and a
SQLAlchemy that maps ``postgresql://`` to it). When the driver is missing, Optuna says
only "Failed to import DB access module for the specified storage URL"; this module asks
SQLAlchemy which module it tried and names the package to install.
"""
import random
import time
from typing import Any, Optional, Tuple

from alf.errors import UserError

#: the extra that installs the PostgreSQL driver SQLAlchemy uses for ``postgresql://``
POSTGRES_EXTRA = "postgres"

#: driver module SQLAlchemy imports -> (the package that installs it, the extra if any)
DRIVER_PACKAGES = {
    "psycopg": ("psycopg", POSTGRES_EXTRA),
    "psycopg2": ("psycopg2-binary", None),
    "pg8000": ("pg8000", None),
    "MySQLdb": ("mysqlclient", None),
    "pymysql": ("PyMySQL", None),
    "mariadb": ("mariadb", None),
    "oracledb": ("oracledb", None),
    "pyodbc": ("pyodbc", None),
}


#: attempts to open a storage whose tables another process may be creating
OPEN_ATTEMPTS = 5


def open_database(url: str) -> Any:
    """``optuna.storages.RDBStorage(url)``, retried while another process creates the
    database's tables (an IntegrityError or ProgrammingError while opening).

    Raises:
        UserError: it cannot be opened (one line; the URL's password hidden).
    """
    import optuna
    import sqlalchemy.exc
    for attempt in range(OPEN_ATTEMPTS):
        try:
            return optuna.storages.RDBStorage(url)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError) as e:
            if attempt + 1 == OPEN_ATTEMPTS:
                raise _cannot_open(url, e) from None
            time.sleep(0.1 * 2 ** attempt * (1.0 + random.random()))
        except Exception as e:  # noqa: BLE001 - sqlalchemy raises many kinds
            raise _cannot_open(url, e) from None
    raise AssertionError("unreachable")


def _cannot_open(url: str, error: Exception) -> UserError:
    shown = shown_url(url)
    reason = isinstance(error, ImportError) and missing_driver_message(url)
    if reason:
        return UserError(f"--storage {shown}: cannot open it: {reason}")
    text = str(error).splitlines()[0] if str(error) else ""
    return UserError(f"--storage {shown}: cannot open it ({error.__class__.__name__}: {text})")


def shown_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages)."""
    try:
        from sqlalchemy.engine import make_url
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy parses: nothing to hide
        return url


def missing_driver(url: str) -> Optional[Tuple[str, str]]:
    """``(module, scheme)``: the driver module SQLAlchemy needs for ``url`` and cannot
    import, and the URL's scheme; None when the URL is not one SQLAlchemy knows, or its
    driver imports."""
    try:
        from sqlalchemy.engine import make_url
        parsed = make_url(url)
        dialect = parsed.get_dialect()
    except Exception:  # noqa: BLE001 - a bad URL: Optuna's own message says more
        return None
    try:
        dialect.import_dbapi()
    except ImportError as e:
        module = (getattr(e, "name", None) or dialect.driver or "").split(".")[0]
        return module, parsed.drivername
    return None


def missing_driver_message(url: str) -> Optional[str]:
    """The reason ``url`` cannot be opened when its driver is not installed, e.g.
    "SQLAlchemy's driver for postgresql://, the 'psycopg' package, is not installed;
    install the [postgres] extra: pip install -e ".[postgres]""; None otherwise."""
    found = missing_driver(url)
    if found is None:
        return None
    module, scheme = found
    package, extra = DRIVER_PACKAGES.get(module, (module, None))
    what = f"'{package}' package" + (f" (module {module})" if package != module else "")
    if scheme == "postgresql":  # the extra brings a SQLAlchemy that uses psycopg for it
        extra = POSTGRES_EXTRA
    if extra:
        how = f'install the [{extra}] extra: pip install -e ".[{extra}]"'
    else:
        how = f"pip install {package}"
        if scheme.startswith("postgresql"):
            how += f" (or use postgresql://, whose driver the [{POSTGRES_EXTRA}] extra installs)"
    return f"SQLAlchemy's driver for {scheme}://, the {what}, is not installed; {how}"
