"""Turns an ``opf_status`` into the Python exception NumPy users expect."""

from __future__ import annotations

from typing import Optional

from ._capi import ffi, lib

_EXCEPTION_OF_STATUS: dict[int, type[Exception]] = {
    lib.OPF_E_DTYPE: TypeError,
    lib.OPF_E_SHAPE: ValueError,
    lib.OPF_E_INVALID: ValueError,
    lib.OPF_E_LAYOUT: ValueError,
    lib.OPF_E_NOMEM: MemoryError,
}


def last_error() -> str:
    """The calling thread's last opforge error message."""
    return ffi.string(lib.opf_last_error()).decode("utf-8", "replace")


def check(status: int, label: Optional[str] = None) -> None:
    """Raises the exception for a failed status, with opf_last_error() as message
    ("opforge.add: shape mismatch: ..."), or, given a label, the label and the
    message without the library's own "<op>: " prefix ("opforge.jax.add: shape
    mismatch: ...").

    OPF_E_DTYPE -> TypeError; OPF_E_SHAPE, OPF_E_INVALID, OPF_E_LAYOUT ->
    ValueError; OPF_E_NOMEM -> MemoryError; any other failure -> RuntimeError.
    Must be called right after the failing call, on the same thread.
    """
    if status == lib.OPF_OK:
        return
    if label is not None:
        detail = ffi.string(lib.opf_last_error_detail()).decode("utf-8", "replace")
        message = f"{label}: {detail or ffi.string(lib.opf_status_name(status)).decode()}"
    else:
        message = last_error() or ffi.string(lib.opf_status_name(status)).decode()
    raise _EXCEPTION_OF_STATUS.get(status, RuntimeError)(message)
