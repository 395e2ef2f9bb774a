"""Whose fault a failed write is: the store's (retry: 503/UNAVAILABLE) or the request's (refuse: 400).

Decided here, once, by the class of the error, for every caller that commits what a client
sent (the receiver's writer, over HTTP and gRPC alike):

* ``Fault.STORE`` — the store failed, whatever was in the batch: a disk full or nearly full
  (DuckDB reports it as a failed commit, a ``TransactionException``), an I/O error, memory,
  the database invalidated by a failed checkpoint, a lake's PostgreSQL catalog gone or
  restarting, the lake's write lock not taken in time (``Unavailable``). Every request of the
  batch is told to retry, none is blamed: a retry can succeed and the rolled-back batch left
  nothing behind.
* ``Fault.REQUEST`` — a value of the request that no column takes (the door, ``ledger.rows``,
  validates every value, so this is a backstop; none is known to reach a commit).
* ``Fault.UNKNOWN`` — anything else. It is the request's only if it fails again alone while
  other requests commit (``refused``); failing with everything else, it is a retryable 503.

DuckDB's ``InvalidInputException`` is the one ambiguous class: it is what a value DuckDB cannot
read raises, and also what the lake's catalog scanner raises when PostgreSQL goes away in the
middle of a transaction ("Failed to prepare COPY …"). It stays a REQUEST fault, and the writer
gives every suspect a second attempt on its own before refusing it, so a catalog lost for a
moment is retried, and never blamed on the request that met it.
"""

from __future__ import annotations

import enum
import sys

import duckdb
import pyarrow as pa

from .errors import Unavailable

__all__ = ["Fault", "fault_of", "refused"]


class Fault(enum.Enum):
    STORE = "store"
    REQUEST = "request"
    UNKNOWN = "unknown"


# duckdb.OperationalError covers its IOException (and HTTPException: an S3 data path),
# OutOfMemoryException, ConnectionException, TransactionException (a commit that could not
# write its log: "Failed to commit: Could not write file …: No space left on device") and
# SerializationException. FatalException: the database was invalidated (a checkpoint that
# could not write the file); InterruptException: a query cancelled; PermissionException:
# the store's configuration forbids a file it needs. OSError holds ENOSPC, EIO and timeouts.
_STORE = (
    OSError,
    MemoryError,
    Unavailable,
    duckdb.OperationalError,
    duckdb.FatalException,
    duckdb.InterruptException,
    duckdb.PermissionException,
)
_REQUEST = (
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    OverflowError,
    UnicodeError,
    TypeError,
    ValueError,
    duckdb.ConversionException,
    duckdb.OutOfRangeException,
    duckdb.InvalidInputException,
    duckdb.ConstraintException,
)


def _catalog_lost(exc: BaseException) -> bool:
    """A PostgreSQL connection failure (the lake's catalog), from psycopg if anything imported it:
    without the import no psycopg error can exist, so the check costs a file ledger nothing."""
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))


def fault_of(exc: BaseException) -> Fault:
    """Which side an error raised by a commit is on, by its class (the store is asked first: an
    ``OSError`` is never a request's, whatever else it is)."""
    if isinstance(exc, _STORE) or _catalog_lost(exc):
        return Fault.STORE
    if isinstance(exc, _REQUEST):
        return Fault.REQUEST
    return Fault.UNKNOWN


def refused(exc: BaseException, *, others_committed: bool) -> bool:
    """The verdict on a request whose rows failed to commit on their own (twice, for the writer):
    refuse it for good (400) or have it retried (503)? ``others_committed``: requests of the
    same batch committed meanwhile, so the store was working."""
    fault = fault_of(exc)
    return fault is Fault.REQUEST or (fault is Fault.UNKNOWN and others_committed)
